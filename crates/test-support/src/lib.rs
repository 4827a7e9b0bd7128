//! What corral's tests share, written once:
//!
//! - [`bench`]: the measurement loops of the forwarding benchmarks.
//! - [`gate`]: the one rule for a test that needs something the machine may
//!   not give it (root, a network namespace, the Incus daemon, systemd
//!   tools). Under any truthy `CI` (`true`, `1`, `yes`, any case) such a
//!   test **fails**; elsewhere it prints a `SKIPPED` line and appends it to
//!   the file named by `CORRAL_SKIP_LOG`, which `scripts/test.sh` counts.
//! - [`exe`]: fake executables written by a child process, so no thread of
//!   the test binary ever holds a write descriptor to a file it later
//!   executes (the cause of `ETXTBSY`, "Text file busy").
//! - [`host_lock`]: an advisory lock for tests that change the host's own
//!   network namespace (Incus containers live there), held across
//!   processes so parallel test binaries never meet in it.
//! - [`udhcpc`]: busybox's DHCP client, its lease read from its script.
//! - [`user`]: a real second Unix user, for tests of what a local user can
//!   do to corral.
//! - [`unit`]: the shipped systemd units, reproduced outside systemd from
//!   the unit files (bounding set, `NoNewPrivileges=`, `ProtectProc=`, and
//!   the seccomp filters of `RestrictNamespaces=`,
//!   `RestrictAddressFamilies=` and `SystemCallFilter=`; `setpriv` for the
//!   bounding set alone).
//!
//! Test code: failing loudly is the point, so setup errors panic.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod exe;
pub mod gate;
pub mod host_lock;
pub mod memory;
pub mod ocsf;
pub mod udhcpc;
pub mod unit;
pub mod user;

pub use exe::{copy_executable, write_executable};
pub use gate::{in_ci, skip};
pub use host_lock::HostLock;
pub use udhcpc::Udhcpc;
pub use user::TestUser;
pub mod tmpfs;
pub use tmpfs::Tmpfs;
