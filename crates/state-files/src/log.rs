//! An append-only log of lines, rotated by size: `NAME` is written,
//! `NAME.1` … `NAME.K` are older (higher is older), so the whole log is
//! bounded by about `(K + 1) × max_bytes`.
//!
//! Several processes append (the CLI, corrald, a collector): each append
//! takes an exclusive `flock` on `NAME.lock`, checks the size, rotates when
//! the line would pass the limit, and writes the line with one `write` on an
//! `O_APPEND` descriptor. A reader never sees half a line from a writer that
//! finished; a writer killed mid-line leaves a line the reader skips.

use std::ffi::CString;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::AsFd;
use std::path::PathBuf;

use crate::dir::{FILE_MODE, StateDir};
use crate::error::StateFileError;
use crate::sys;
use crate::trust::{self, Seen};

/// A size-rotated line log in a state directory (see the module docs).
#[derive(Debug)]
pub struct RotatingLog {
    dir: StateDir,
    name: String,
    max_bytes: u64,
    keep: u32,
}

impl RotatingLog {
    /// The log `name` in `dir`, rotated when the current file would pass
    /// `max_bytes`, keeping `keep` older files (0: the current file is
    /// emptied instead).
    pub fn new(
        dir: StateDir,
        name: &str,
        max_bytes: u64,
        keep: u32,
    ) -> Result<Self, StateFileError> {
        for n in 0..=keep {
            component(&rotated(name, n))?;
        }
        Ok(Self {
            dir,
            name: name.to_owned(),
            max_bytes: max_bytes.max(1),
            keep,
        })
    }

    /// The current file.
    pub fn path(&self) -> PathBuf {
        self.dir.file_path(&self.name)
    }

    /// How many rotated files are kept.
    pub fn keep(&self) -> u32 {
        self.keep
    }

    /// Every file of the log that exists, oldest first (the current file
    /// last).
    pub fn files(&self) -> Vec<PathBuf> {
        (0..=self.keep)
            .rev()
            .map(|n| self.dir.file_path(&rotated(&self.name, n)))
            .filter(|p| p.exists())
            .collect()
    }

    /// Appends `line` (a newline is added), rotating first when it would
    /// make the current file pass the limit.
    pub fn append(&self, line: &str) -> Result<(), StateFileError> {
        let path = self.path();
        let _lock = self.dir.lock(&format!("{}.lock", self.name))?;
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let mut file = self.open_current()?;
        let size = sys::fstat(file.as_fd())
            .map_err(StateFileError::io("inspect", &path))?
            .st_size;
        let size = u64::try_from(size).unwrap_or(0);
        if size > 0 && size.saturating_add(buf.len() as u64) > self.max_bytes {
            drop(file);
            self.rotate()?;
            file = self.open_current()?;
        }
        file.write_all(&buf)
            .map_err(StateFileError::io("append to", &path))
    }

    fn open_current(&self) -> Result<File, StateFileError> {
        let path = self.path();
        let c = component(&self.name)?;
        let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_NOFOLLOW;
        let fd = sys::openat(Some(self.dir_fd()), &c, flags, FILE_MODE)
            .map_err(StateFileError::io("open", &path))?;
        let st = sys::fstat(fd.as_fd()).map_err(StateFileError::io("inspect", &path))?;
        trust::check_file(&path, Seen::of_stat(&st), &[])?;
        Ok(File::from(fd))
    }

    /// `NAME.K-1` → `NAME.K`, …, `NAME` → `NAME.1` (the oldest is
    /// overwritten); with `keep` 0 the current file is removed.
    fn rotate(&self) -> Result<(), StateFileError> {
        let dir = self.dir_fd();
        for n in (0..self.keep).rev() {
            let from = component(&rotated(&self.name, n))?;
            let to = component(&rotated(&self.name, n + 1))?;
            match sys::renameat(dir, &from, &to) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StateFileError::io("rotate", &self.path())(e)),
            }
        }
        if self.keep == 0 {
            let c = component(&self.name)?;
            sys::unlinkat(dir, &c, 0).map_err(StateFileError::io("empty", &self.path()))?;
        }
        Ok(())
    }

    fn dir_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.dir.fd()
    }
}

/// The name of rotation `n` of `name` (0: the current file).
fn rotated(name: &str, n: u32) -> String {
    if n == 0 {
        name.to_owned()
    } else {
        format!("{name}.{n}")
    }
}

fn component(name: &str) -> Result<CString, StateFileError> {
    crate::dir::component(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(dir: &std::path::Path, max: u64, keep: u32) -> RotatingLog {
        RotatingLog::new(StateDir::open(dir).unwrap(), "audit.jsonl", max, keep).unwrap()
    }

    #[test]
    fn appends_lines_and_rotates_by_size_keeping_k_files() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("state");
        let l = log(&dir, 40, 2);
        for i in 0..20 {
            l.append(&format!("line-{i:02}-xxxxxxxxxx")).unwrap();
        }
        let files = l.files();
        assert_eq!(files.len(), 3, "{files:?}");
        assert_eq!(files.last().unwrap(), &l.path());
        let text: String = files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        let lines: Vec<&str> = text.lines().collect();
        // Each file holds two 20-byte lines: the newest six survive, in order.
        assert_eq!(lines.len(), 6, "{lines:?}");
        assert_eq!(lines[0], "line-14-xxxxxxxxxx");
        assert_eq!(lines[5], "line-19-xxxxxxxxxx");
        for f in &files {
            assert!(std::fs::metadata(f).unwrap().len() <= 40);
        }
    }

    #[test]
    fn a_line_larger_than_the_limit_still_lands_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let l = log(tmp.path(), 8, 0);
        l.append("a").unwrap();
        l.append("0123456789abcdef").unwrap();
        assert_eq!(
            std::fs::read_to_string(l.path()).unwrap(),
            "0123456789abcdef\n"
        );
    }

    #[test]
    fn a_symlinked_log_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let l = log(tmp.path(), 100, 1);
        std::os::unix::fs::symlink("/etc/passwd", l.path()).unwrap();
        assert!(l.append("x").is_err());
    }

    #[test]
    fn concurrent_appenders_never_interleave_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_owned();
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    let l = log(&dir, 4096, 3);
                    for i in 0..200 {
                        l.append(&format!("{t}:{i}:{}", "z".repeat(50))).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let l = log(&dir, 4096, 3);
        for f in l.files() {
            for line in std::fs::read_to_string(f).unwrap().lines() {
                assert!(line.ends_with(&"z".repeat(50)), "{line}");
                assert_eq!(line.matches(':').count(), 2, "{line}");
            }
        }
    }
}
