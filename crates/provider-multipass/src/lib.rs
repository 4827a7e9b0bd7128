//! `corral-provider-multipass`: Multipass sandboxes, driven through the
//! `multipass` command line — on this host, or on a Linux executor over
//! SSH (multipass-remote).
//!
//! - [`runner`]: the [`Runner`] seam and the local process runner.
//! - [`ssh`]: [`SshRunner`] and POSIX argument quoting.
//! - [`argv`]: the exact argv of every operation.
//! - [`cloud_init`]: user-data with the route swap onto the profile bridge.
//! - [`staging`]: the 0700 staging directory and ownership stamps.
//! - [`provider`] / [`sandbox`]: the `SandboxProvider` / `Sandbox` impls.
//!
//! The runner, the staging directory and the error mapping are shared
//! with the other CLI-driven providers through `corral-provider-support`
//! (re-exported here where they are part of this crate's API).
//!
//! Multipass cannot run on corral's build machines: everything here is
//! tested through exact argvs and a recording fake `multipass` binary,
//! never against the real tool (see `docs/multipass.md`).
#![warn(missing_docs)]

pub mod argv;
pub mod cloud_init;
pub mod json;
pub mod provider;
pub mod runner;
pub mod sandbox;
mod shared;
pub mod ssh;
pub mod staging;

pub use provider::{ConfigError, MultipassConfig, MultipassProvider, Timeouts, check_platform};
pub use runner::{Invocation, ProcessRunner, RunError, RunOutput, Runner};
pub use sandbox::MultipassSandbox;
pub use ssh::{SshRunner, SshTarget, SshTargetError, quote};
