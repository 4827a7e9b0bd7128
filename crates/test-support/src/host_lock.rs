//! One test at a time in the host's own network namespace.
//!
//! Most packet tests run in anonymous namespaces and never meet. A few
//! cannot: an Incus container's veth lives in the daemon's namespace (the
//! host's), so those tests program `table inet corral` and bridges there,
//! and corral keeps one such table per namespace. They take this lock,
//! an `flock` on a file under `/run/lock`, which serialises them across
//! test threads and across concurrently running test binaries.

use std::fs::File;
use std::path::Path;

/// The lock file.
pub const PATH: &str = "/run/lock/corral-tests-host-netns.lock";

/// Held while a test changes the host namespace; released on drop (and by
/// the kernel if the process dies).
#[derive(Debug)]
pub struct HostLock {
    _file: File,
}

impl HostLock {
    /// Waits for the lock.
    pub fn acquire() -> Self {
        let path = Path::new(PATH);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .unwrap_or_else(|e| panic!("open the host-namespace test lock {PATH}: {e}"));
        flock_exclusive(&file)
            .unwrap_or_else(|e| panic!("lock the host-namespace test lock {PATH}: {e}"));
        Self { _file: file }
    }
}

#[allow(unsafe_code)]
fn flock_exclusive(file: &File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock(2) on a descriptor this function borrows; it does
        // not outlive the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if rc == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}
