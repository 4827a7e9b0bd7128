//! Seeing a gateway's daemon exit the moment it does. dnsmasq daemonises,
//! so it is never corral's child and `waitpid` cannot see it; a pidfd
//! (`pidfd_open(2)`, Linux 5.3) works for any process and becomes readable
//! when it exits, so a supervisor sleeps in poll/epoll instead of checking
//! the pid file on a clock.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// A handle on one running process that becomes readable when it exits.
#[derive(Debug)]
pub struct ExitWatch {
    pid: u32,
    fd: OwnedFd,
}

impl ExitWatch {
    /// A watch on `pid`. The caller checks, after this returns, that the pid
    /// still names the process it means: the pidfd then pins that process
    /// even if the pid is reused later.
    pub fn open(pid: u32) -> io::Result<Self> {
        let raw =
            libc::pid_t::try_from(pid).map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        // SAFETY: pidfd_open takes a pid and flags (0) and returns a new fd
        // or -1; no memory is passed.
        let ret = unsafe { libc::syscall(libc::SYS_pidfd_open, raw, 0) };
        if ret < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = RawFd::try_from(ret).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
        // SAFETY: the kernel just returned this fd to us, and nothing else
        // owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { pid, fd })
    }

    /// The process watched.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether the process has exited, waiting at most `timeout_ms`
    /// (0: just look).
    pub fn wait(&self, timeout_ms: i32) -> io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            // SAFETY: one valid pollfd, on a fd this watch owns.
            let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
            if n >= 0 {
                return Ok(n > 0);
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    /// Resolves when the process exits, on the current tokio runtime's
    /// reactor (no thread waits on it).
    pub async fn exited(self) -> io::Result<()> {
        // SAFETY: the fd is owned by `self`, which moves into the AsyncFd
        // and is only closed when the AsyncFd (deregistering first) drops.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(self, tokio::io::Interest::READABLE)
        }
        .map_err(|e| e.into_parts().1)?;
        let _ready = fd.readable().await?;
        Ok(())
    }
}

impl AsFd for ExitWatch {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for ExitWatch {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_turns_readable_when_its_process_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let watch = ExitWatch::open(child.id()).unwrap();
        // Control: still running, not readable.
        assert!(!watch.wait(50).unwrap());
        child.kill().unwrap();
        assert!(watch.wait(5000).unwrap());
        child.wait().unwrap();
    }

    #[tokio::test(flavor = "current_thread")]
    async fn exited_resolves_when_the_process_exits() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let watch = ExitWatch::open(child.id()).unwrap();
        let wait = tokio::spawn(watch.exited());
        // Control: not resolved while the process runs.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        assert!(!wait.is_finished());
        child.kill().unwrap();
        tokio::time::timeout(std::time::Duration::from_secs(5), wait)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_gone_pid_cannot_be_watched() {
        // pid_max is at most 2^22.
        assert!(ExitWatch::open(99_999_999).is_err());
    }
}
