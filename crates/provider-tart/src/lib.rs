//! `corral-provider-tart`: Tart VMs on macOS (Apple Silicon), driven
//! through the `tart` command line, every VM under a Softnet allowlist.
//!
//! - [`runner`]: the [`Runner`] seam, the local process runner, detached spawns.
//! - [`argv`]: the exact argv of every operation and the name checks.
//! - [`softnet`]: the Softnet policy (block all, allow the gateway and
//!   resolved global-unicast /32s) and run-argument validation.
//! - [`health`]: the filter-health signal ([`FilterHealth`]).
//! - [`staging`]: the 0700 staging directory and ownership stamps.
//! - [`provider`] / [`sandbox`]: the `SandboxProvider` / `Sandbox` impls.
//!
//! The runner, the staging directory and the error mapping are shared
//! with the other CLI-driven providers through `corral-provider-support`
//! (re-exported here where they are part of this crate's API).
//!
//! Tart runs only on macOS, and corral's build machines run Linux: this
//! crate is tested through exact argvs and a recording fake `tart`, never
//! against the real tool or a real Softnet (see `docs/tart.md`).
#![warn(missing_docs)]

pub mod argv;
pub mod health;
pub mod json;
pub mod provider;
pub mod runner;
pub mod sandbox;
mod shared;
pub mod softnet;
pub mod staging;

pub use health::FilterHealth;
pub use provider::{ConfigError, TartConfig, TartProvider, Timeouts, check_platform};
pub use runner::{Invocation, ProcessRunner, RunError, RunOutput, Runner};
pub use sandbox::TartSandbox;
pub use softnet::{SoftnetError, SoftnetPolicy};
