//! `corral-provider-support`: what every corral provider that drives a
//! backend through its command-line tool (Multipass, Tart) needs alike.
//!
//! Providers may not depend on each other (see the architecture's crate
//! table), so the code they share lives here, below them all:
//!
//! - [`runner`]: the [`Runner`] seam (argv in, captured output out), and
//!   [`LocalRunner`] for runners on this host that also start detached
//!   processes and look programs up.
//! - [`process`]: [`ProcessRunner`], the real one, plus process-group
//!   kill and liveness probes.
//! - [`staging`]: the 0700 staging directory and ownership stamps, generic
//!   over each provider's stamp type.
//! - [`stamp`]: the ownership stamp both CLI-driven providers write.
//! - [`ownership`]: the ownership checks in the provider vocabulary.
//! - [`errors`]: the mapping of tool answers to `ProviderError`s.
//! - [`setup`]: the host, platform and name-prefix checks before a
//!   provider is built.
//! - [`guest_argv`]: an exec request's words as the guest runs them.
//! - [`spec`]: spec checks shared by VM-only backends.
//! - [`vm`]: the steps both take alike over their shared state
//!   ([`VmBackend`]): running the tool, their common capabilities, a
//!   clone's prelude, a stamp's construction and check.
//! - `testing` (feature `test-support`): the recording fake-binary harness.
//!
//! What is a provider's own (argv shapes, cloud-init, Softnet, health)
//! stays in its crate. This crate depends on `corral-sandbox-core` only.
#![warn(missing_docs)]

pub mod errors;
pub mod guest_argv;
pub mod ownership;
pub mod process;
pub mod runner;
pub mod setup;
pub mod spec;
pub mod staging;
pub mod stamp;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;
pub mod vm;

pub use errors::{ToolErrors, exec_output, staging_error};
pub use guest_argv::env_argv;
pub use ownership::valid_name_prefix;
pub use process::{ProcessRunner, kill_group, process_exists};
pub use runner::{Invocation, LocalRunner, Program, RunError, RunOutput, Runner, check_argv};
pub use setup::SetupError;
pub use spec::{refuse_clone_from_snapshot, require_vm_without_mounts};
pub use staging::{OwnershipStamp, STAMP_FILE, Staging, StagingError};
pub use vm::{VM_LIFECYCLE, VmBackend, VmTool, vm_capabilities};
