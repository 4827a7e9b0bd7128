//! Fake executables that can be run at once, whatever other test threads do.
//!
//! `ETXTBSY` ("Text file busy") comes from `execve` of a file that some
//! process still has open for writing. When a test thread writes a script
//! with `std::fs::write` while another thread forks, the child inherits the
//! write descriptor until it calls `exec` (close-on-exec does not help in
//! that window), and an `execve` of the script in that moment fails. The
//! cure is to never hold the write descriptor in the test process: a child
//! `/bin/sh` writes the file (its descriptors are not inherited by the test
//! process's other children) and exits before anyone runs the file.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// Writes `body` to `path` as an executable (mode 0755), through a child
/// process, so the file can be executed right away without `ETXTBSY`.
pub fn write_executable(path: &Path, body: impl AsRef<[u8]>) {
    let mut child = Command::new("/bin/sh")
        .args(["-c", "cat > \"$1\" && chmod 0755 \"$1\"", "sh"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn /bin/sh to write {}: {e}", path.display()));
    let mut stdin = child
        .stdin
        .take()
        .unwrap_or_else(|| panic!("no stdin pipe to the writer of {}", path.display()));
    stdin
        .write_all(body.as_ref())
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    drop(stdin);
    let status = child
        .wait()
        .unwrap_or_else(|e| panic!("wait for the writer of {}: {e}", path.display()));
    assert!(
        status.success(),
        "writing {} failed: {status}",
        path.display()
    );
}

/// Copies the executable `from` to `to` (mode 0755) through a child
/// process, for the same reason as [`write_executable`].
pub fn copy_executable(from: &Path, to: &Path) {
    let status = Command::new("/bin/sh")
        .args(["-c", "cat \"$1\" > \"$2\" && chmod 0755 \"$2\"", "sh"])
        .arg(from)
        .arg(to)
        .status()
        .unwrap_or_else(|e| panic!("spawn /bin/sh to copy {}: {e}", from.display()));
    assert!(
        status.success(),
        "copying {} to {} failed: {status}",
        from.display(),
        to.display()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many threads write and run scripts while others fork: with a plain
    /// `fs::write` this fails with ETXTBSY within a few hundred rounds here.
    #[test]
    fn scripts_run_at_once_while_other_threads_fork() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let forkers: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let _ = Command::new("/bin/true").status();
                    }
                })
            })
            .collect();
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let dir = dir.path().to_owned();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let path = dir.join(format!("s-{t}-{i}"));
                        write_executable(&path, format!("#!/bin/sh\necho {t}-{i}\n"));
                        let out = Command::new(&path)
                            .output()
                            .unwrap_or_else(|e| panic!("run {}: {e}", path.display()));
                        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("{t}-{i}\n"));
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for f in forkers {
            f.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
    }

    #[test]
    fn copies_keep_the_content_and_are_executable() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        write_executable(&a, "#!/bin/sh\necho copied\n");
        copy_executable(&a, &b);
        let out = Command::new(&b).output().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "copied\n");
    }
}
