//! Running a command-line tool: an argv (never a shell string), optional
//! standard input, a time bound, and the captured result.
//!
//! [`Runner`] is the seam the provider talks through, so tests can swap the
//! real process runner for a recording fake, and multipass-remote can swap
//! it for [`crate::SshRunner`]. The runner is shared with the other
//! CLI-driven providers and lives in `corral-provider-support`; it is
//! re-exported here so this crate's paths keep working.

pub use corral_provider_support::process::ProcessRunner;
pub use corral_provider_support::runner::{Invocation, RunError, RunOutput, Runner};
