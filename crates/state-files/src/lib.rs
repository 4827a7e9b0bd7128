//! `corral-state-files`: corral's state directory, written once for every
//! store (applied inputs, gateway configurations, the database of events
//! and the verification gate).
//!
//! corral runs as root and writes files that later decide what root does
//! (a dnsmasq configuration, the inputs a refresh re-applies). So:
//!
//! - **Trust rule.** The state directory and every subdirectory corral uses
//!   must be a real directory owned by the effective uid and not writable
//!   by group or others; its parents must belong to root (or the effective
//!   uid) and be unwritable by others unless sticky. corral creates what is
//!   missing with mode 0700 and refuses anything else with a message naming
//!   the path, its owner and mode, and the fix ([`StateFileError::Untrusted`]).
//! - **One atomic write** ([`StateDir::write`]): a temp file with a random
//!   name created exclusively without following symlinks, mode 0600 unless
//!   told otherwise, fsync of the file, rename, fsync of the directory.
//!   Every operation goes through the directory handle that passed the
//!   check, so swapping a path component afterwards redirects nothing.
//! - **One lock** ([`StateDir::lock`]): `flock` on a file in the directory,
//!   so a timed refresh and an apply never interleave.
//! - **Search, never list** ([`StateDir::allow_search_from_root`]): a
//!   directory a daemon that drops root must cross to read a file corral
//!   wrote for it (dnsmasq's DHCP reservations) is mode 0711, and so is
//!   every private parent of it; nothing becomes listable or writable.
#![warn(missing_docs)]

mod dir;
mod error;
mod log;
pub mod output;
mod search;
mod sys;
mod trust;

use std::path::Path;

pub use dir::{DIR_MODE, FILE_MODE, StateDir, StateLock};
pub use error::StateFileError;
pub use log::RotatingLog;
pub use search::SEARCH_MODE;
pub use sys::effective_uid;

/// The lock file that serialises changes to the host (apply, refresh,
/// teardown) in one state directory.
pub const HOST_LOCK: &str = "host.lock";

/// Writes `bytes` to `dir/name` atomically with `mode`, after opening (and
/// if needed creating) `dir` under the trust rule.
pub fn write_atomic(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> Result<(), StateFileError> {
    StateDir::open(dir)?.write_with_mode(name, bytes, mode)
}

#[cfg(test)]
mod tests;
