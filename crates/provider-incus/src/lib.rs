//! `corral-provider-incus`: corral sandboxes on Incus, driven over the REST
//! API (the local unix socket, or HTTPS with a client certificate for remote
//! servers and clusters). Never the `incus` CLI.
//!
//! ```no_run
//! # async fn demo() -> Result<(), corral_sandbox_core::sandbox::ProviderError> {
//! use corral_provider_incus::{IncusConfig, IncusProvider};
//! use corral_sandbox_core::SandboxName;
//! use corral_sandbox_core::sandbox::{ExecRequest, SandboxProvider, SandboxSpec};
//!
//! let provider = IncusProvider::connect(IncusConfig::local()).await?;
//! let name = SandboxName::new("agent-1").map_err(|e| corral_sandbox_core::sandbox::ProviderError::InvalidSpec { field: "name", reason: e.to_string() })?;
//! let sandbox = provider.create(&SandboxSpec::new(name, "corral-test")).await?;
//! sandbox.start().await?;
//! let out = sandbox.exec(&ExecRequest::new(["uname", "-a"])).await?;
//! println!("{}", out.stdout_text());
//! sandbox.delete().await?;
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

pub mod allowed;
pub mod api;
pub mod backup;
pub mod backup_index;
pub mod backup_source;
pub mod client;
pub mod cluster;
pub mod config;
pub mod events;
pub mod exec;
pub mod exec_stream;
pub mod files;
pub mod identity;
pub mod mounts;
pub mod network;
pub mod project;
pub mod provider;
pub mod sandbox;
pub mod stamp;
pub mod terminal;
pub mod topology;
pub mod tree_copy;
pub mod yaml_strict;

pub use client::{IncusClient, RemoteCredentials};
pub use cluster::ClusterMember;
pub use config::{DEFAULT_MAX_EXEC_OUTPUT, DEFAULT_MAX_PULL_BYTES, Endpoint, IncusConfig};
pub use mounts::MountPolicy;
pub use network::assign_static_ipv4;
pub use provider::IncusProvider;
pub use sandbox::IncusSandbox;

/// The alias of the busybox test image `scripts/incus-image.sh` imports.
pub const TEST_IMAGE_ALIAS: &str = "corral-test";
