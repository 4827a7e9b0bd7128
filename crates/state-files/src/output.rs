//! Files corral writes as root where someone else named the place: the
//! destination of `pull`, an export's backup file, any operator-named
//! output. The directory may be writable by a local user who plants a
//! symlink (even a dangling one) or a file there just before corral writes.
//! So the last component is never followed and never overwritten unless
//! the operator asked for a replacement, and a failure removes only what
//! corral itself created.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::error::StateFileError;
use crate::sys;

/// Whether an existing file at the destination may be replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Refuse when anything (a file, a symlink, dangling or not) is there.
    Refuse,
    /// Replace it: a new file is renamed over the name, so a symlink there
    /// is replaced itself and its target is never written.
    Replace,
}

/// The destination exists and was not to be replaced.
pub fn is_already_exists(e: &StateFileError) -> bool {
    matches!(e, StateFileError::Io { source, .. } if source.kind() == io::ErrorKind::AlreadyExists)
}

/// Creates `path` with `mode` and writes `bytes` there (see the module
/// docs). With [`Existing::Refuse`] the file is created exclusively
/// (`O_CREAT|O_EXCL|O_NOFOLLOW`); with [`Existing::Replace`] a temp file in
/// the same directory is renamed over it. Either way a failure leaves the
/// destination as it was.
pub fn write_output(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    existing: Existing,
) -> Result<(), StateFileError> {
    let mut out = Output::create(path, mode, existing)?;
    match out.file().write_all(bytes) {
        Ok(()) => out.finish(),
        Err(e) => Err(out.abandon(e)),
    }
}

/// An output file being written; [`Output::finish`] puts it in place,
/// [`Output::abandon`] (or a drop) removes what was created.
#[derive(Debug)]
pub struct Output {
    dir: OwnedFd,
    name: CString,
    temp: Option<CString>,
    file: File,
    path: PathBuf,
    done: bool,
}

impl Output {
    /// Creates the file to write (see [`write_output`]).
    pub fn create(path: &Path, mode: u32, existing: Existing) -> Result<Self, StateFileError> {
        let (parent, name) = split(path)?;
        let dir = sys::openat(
            None,
            &sys::c_path(&parent).map_err(StateFileError::io("open the directory of", path))?,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            0,
        )
        .map_err(StateFileError::io("open the directory of", path))?;
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let (temp, fd) = match existing {
            Existing::Refuse => {
                let fd = sys::openat(Some(dir.as_fd()), &name, flags, mode)
                    .map_err(StateFileError::io("create", path))?;
                (None, fd)
            }
            Existing::Replace => {
                let mut attempt = 0;
                loop {
                    let random = sys::random_u64()
                        .map_err(StateFileError::io("draw a temp name for", path))?;
                    let temp = CString::new(format!(".corral-{random:016x}.tmp"))
                        .map_err(|e| StateFileError::io("name a temp file for", path)(e.into()))?;
                    match sys::openat(Some(dir.as_fd()), &temp, flags, mode) {
                        Ok(fd) => break (Some(temp), fd),
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 8 => {
                            attempt += 1;
                        }
                        Err(e) => {
                            return Err(StateFileError::io("create a temp file for", path)(e));
                        }
                    }
                }
            }
        };
        let out = Self {
            dir,
            name,
            temp,
            file: File::from(fd),
            path: path.to_owned(),
            done: false,
        };
        // The mode asked for, whatever the umask made of it.
        sys::fchmod(out.file.as_fd(), mode).map_err(|e| out.cleanup_err("set the mode of", e))?;
        Ok(out)
    }

    /// The file to write into.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Syncs the file and puts it at its name.
    pub fn finish(mut self) -> Result<(), StateFileError> {
        if let Err(e) = self.file.sync_all() {
            return Err(self.cleanup_err("write", e));
        }
        if let Some(temp) = &self.temp
            && let Err(e) = sys::renameat(self.dir.as_fd(), temp, &self.name)
        {
            return Err(self.cleanup_err("replace", e));
        }
        self.done = true;
        Ok(())
    }

    /// Gives up after `e`: what was created is removed.
    pub fn abandon(self, e: io::Error) -> StateFileError {
        self.cleanup_err("write", e)
    }

    fn cleanup_err(&self, op: &'static str, e: io::Error) -> StateFileError {
        self.remove_created();
        StateFileError::io(op, &self.path)(e)
    }

    fn remove_created(&self) {
        let created = self.temp.as_ref().unwrap_or(&self.name);
        let _ = sys::unlinkat(self.dir.as_fd(), created, 0);
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.done {
            self.done = true;
            self.remove_created();
        }
    }
}

/// The directory and the last component of `path`.
fn split(path: &Path) -> Result<(PathBuf, CString), StateFileError> {
    let bad = || {
        StateFileError::io("create", path)(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the path names no file (it ends in `/`, `.` or `..`)",
        ))
    };
    let name = path.file_name().ok_or_else(bad)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    };
    let name = CString::new(std::os::unix::ffi::OsStrExt::as_bytes(name)).map_err(|_| bad())?;
    Ok((parent, name))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::os::unix::fs::{PermissionsExt, symlink};

    #[test]
    fn a_dangling_symlink_is_refused_and_its_target_never_written() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("elsewhere");
        let link = dir.path().join("report.txt");
        symlink(&target, &link).unwrap();
        let err = write_output(&link, b"guest", 0o600, Existing::Refuse).unwrap_err();
        assert!(is_already_exists(&err), "{err}");
        assert!(!target.exists(), "the link was followed");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn a_replacement_replaces_the_link_itself_never_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("victim");
        std::fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("report.txt");
        symlink(&target, &link).unwrap();
        write_output(&link, b"guest", 0o640, Existing::Replace).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        let meta = std::fs::symlink_metadata(&link).unwrap();
        assert!(meta.file_type().is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o640);
        assert_eq!(std::fs::read(&link).unwrap(), b"guest");
        // Control: without the replacement the existing name is refused.
        let err = write_output(&link, b"again", 0o600, Existing::Refuse).unwrap_err();
        assert!(is_already_exists(&err), "{err}");
        assert_eq!(std::fs::read(&link).unwrap(), b"guest");
    }

    #[test]
    fn an_abandoned_output_removes_only_what_it_created() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("backup.tar.gz");
        let out = Output::create(&path, 0o600, Existing::Refuse).unwrap();
        assert!(path.exists());
        drop(out.abandon(io::ErrorKind::Interrupted.into()));
        assert!(!path.exists());
        // A file someone else made there is never removed by a refusal.
        std::fs::write(&path, b"theirs").unwrap();
        assert!(Output::create(&path, 0o600, Existing::Refuse).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"theirs");
        let mut names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        names.clear();
    }
}
