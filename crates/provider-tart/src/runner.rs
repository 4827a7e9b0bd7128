//! Running a command-line tool: an argv (never a shell string), optional
//! standard input, a time bound, and the captured result; and starting
//! long-lived processes detached (`tart run` stays in the foreground for
//! the VM's whole life).
//!
//! The runner is shared with the other CLI-driven providers and lives in
//! `corral-provider-support`; it is re-exported here so this crate's paths
//! keep working.

pub use corral_provider_support::process::ProcessRunner;
pub(crate) use corral_provider_support::process::{kill_group, process_exists};
/// What the Tart provider needs of a runner: runs, plus detached spawns
/// and program look-ups on this host. It is
/// `corral_provider_support::LocalRunner` (its supertrait
/// `corral_provider_support::Runner` does the runs) under the name this
/// crate has always used.
pub use corral_provider_support::runner::LocalRunner as Runner;
pub use corral_provider_support::runner::{Invocation, RunError, RunOutput};
