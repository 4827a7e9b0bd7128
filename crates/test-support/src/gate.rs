//! The one rule for tests that need root, a network namespace, the Incus
//! daemon or a system tool.
//!
//! A test asks, e.g. `if !gate::netns() { return; }`. When the need is met
//! the answer is `true`. When it is not:
//! - under a truthy `CI` (`true`, `1`, `yes`, in any case) the call panics:
//!   CI must never pass a test that did not run;
//! - elsewhere it prints `SKIPPED <test>: <why>` and appends the same line
//!   to the file named by `CORRAL_SKIP_LOG` (the README's test command sets
//!   it and reports the count), then answers `false`.
//!
//! The test's name is the current thread's: libtest names each test's
//! thread after the test.

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The default socket of the local Incus daemon.
pub const INCUS_SOCKET: &str = "/var/lib/incus/unix.socket";

/// The variable naming the file every skip is appended to.
pub const SKIP_LOG_VAR: &str = "CORRAL_SKIP_LOG";

/// True when `CI` holds a truthy value: `true`, `1` or `yes` (any case).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| is_truthy(&v))
}

fn is_truthy(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes")
}

/// The running test's name (its thread's name), or `a test`.
pub fn test_name() -> String {
    std::thread::current()
        .name()
        .filter(|n| *n != "main")
        .unwrap_or("a test")
        .to_owned()
}

/// The need is not met: panics under CI, else prints and records a skip.
pub fn skip(why: impl Display) {
    let test = test_name();
    if in_ci() {
        panic!(
            "{test}: {why}\n(CI is set, so a test that cannot get what it needs fails instead of skipping)"
        );
    }
    let line = format!("SKIPPED {test}: {why}");
    eprintln!("{line}");
    if let Some(path) = std::env::var_os(SKIP_LOG_VAR) {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            // One write of the whole line: O_APPEND keeps concurrent test
            // binaries' lines whole.
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = appended {
            eprintln!(
                "cannot record the skip in {}: {e}",
                Path::new(&path).display()
            );
        }
    }
}

/// Root (effective uid 0).
pub fn root() -> bool {
    if effective_uid() == Some(0) {
        return true;
    }
    skip("needs root (run the tests with sudo, as scripts/test.sh does)");
    false
}

/// The process can create a network namespace (root with CAP_SYS_ADMIN
/// and CAP_NET_ADMIN).
pub fn netns() -> bool {
    match try_unshare_net() {
        Ok(()) => true,
        Err(e) => {
            skip(format!(
                "needs a network namespace (root with CAP_SYS_ADMIN and CAP_NET_ADMIN): {e}"
            ));
            false
        }
    }
}

/// The local Incus daemon's socket (`CORRAL_INCUS_SOCKET` overrides the
/// default), when it exists.
pub fn incus() -> Option<PathBuf> {
    let socket = std::env::var_os("CORRAL_INCUS_SOCKET")
        .map_or_else(|| PathBuf::from(INCUS_SOCKET), PathBuf::from);
    if socket.exists() {
        return Some(socket);
    }
    skip(format!(
        "needs the Incus daemon (no socket at {}); run scripts/incus-setup.sh and scripts/incus-image.sh",
        socket.display()
    ));
    None
}

/// `program` runs (`program --version` exits 0); `package` is the Debian
/// package that provides it, named in the skip.
pub fn tool(program: &str, package: &str) -> bool {
    let ran = std::process::Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
    match ran {
        Ok(s) if s.success() => true,
        other => {
            skip(format!(
                "needs `{program}` (Debian package {package}): {}",
                match other {
                    Ok(s) => format!("`{program} --version` exited with {s}"),
                    Err(e) => e.to_string(),
                }
            ));
            false
        }
    }
}

fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    uids.split_whitespace().nth(1)?.parse().ok()
}

/// Creates a network namespace on a throwaway thread (the kernel removes
/// it when the thread exits), to learn whether this process may.
#[allow(unsafe_code)]
fn try_unshare_net() -> std::io::Result<()> {
    std::thread::spawn(|| {
        // SAFETY: unshare(2) with CLONE_NEWNET changes only the calling
        // thread's namespace, and this thread ends right after.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truthy_values_are_the_documented_ones() {
        for v in ["true", "TRUE", "1", "yes", "Yes", " true "] {
            assert!(is_truthy(v), "{v:?}");
        }
        for v in ["", "0", "false", "no", "y", "on"] {
            assert!(!is_truthy(v), "{v:?}");
        }
    }

    #[test]
    fn the_test_name_is_the_thread_name() {
        assert_eq!(test_name(), "gate::tests::the_test_name_is_the_thread_name");
    }
}
