//! A state directory held open by handle: every file operation is relative
//! to the descriptor that passed the trust check, so renaming or replacing
//! a path component afterwards cannot redirect a write.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::error::StateFileError;
use crate::sys;
use crate::trust::{self, Seen};

/// Mode of every file corral writes unless told otherwise.
pub const FILE_MODE: u32 = 0o600;
/// Mode of every directory corral creates.
pub const DIR_MODE: u32 = 0o700;

/// Whether an atomic write also survives a crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Durability {
    /// fsync of the file and of the directory.
    Synced,
    /// Page cache only (see [`StateDir::write_regenerated`]).
    Regenerated,
}

/// A trusted state directory (see the crate docs for the rule).
#[derive(Debug)]
pub struct StateDir {
    path: PathBuf,
    fd: OwnedFd,
}

/// An exclusive lock on a file of the state directory, released on drop.
#[derive(Debug)]
pub struct StateLock {
    _fd: OwnedFd,
    path: PathBuf,
}

impl StateLock {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One plain component: not empty, `.` or `..`, no `/` or NUL.
pub(crate) fn component(name: &str) -> Result<CString, StateFileError> {
    let bad = || StateFileError::BadName {
        name: name.to_owned(),
    };
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(bad());
    }
    CString::new(name).map_err(|_| bad())
}

const DIR_FLAGS: libc::c_int = libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_RDONLY;

impl StateDir {
    /// Opens the state directory at `path`, creating it and any missing
    /// parent (mode 0700), and checks it and its parents.
    pub fn open(path: &Path) -> Result<Self, StateFileError> {
        let path = std::path::absolute(path).map_err(StateFileError::io("resolve", path))?;
        if !path.exists() {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(&path)
                .map_err(StateFileError::io("create", &path))?;
        }
        Self::open_checked(path)
    }

    /// Opens the state directory at `path` if it exists (`None` if not),
    /// checking it like [`StateDir::open`]; creates nothing.
    pub fn open_existing(path: &Path) -> Result<Option<Self>, StateFileError> {
        let path = std::path::absolute(path).map_err(StateFileError::io("resolve", path))?;
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StateFileError::io("inspect", &path)(e)),
            Ok(_) => Self::open_checked(path).map(Some),
        }
    }

    fn open_checked(path: PathBuf) -> Result<Self, StateFileError> {
        trust::check_parents(&path)?;
        let c = sys::c_path(&path).map_err(StateFileError::io("open", &path))?;
        let fd = match sys::openat(None, &c, DIR_FLAGS, 0) {
            Ok(fd) => fd,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                return Err(StateFileError::Untrusted {
                    problem: "it is a symlink or not a directory".to_owned(),
                    fix: "give the path of a real directory".to_owned(),
                    path,
                });
            }
            Err(e) => return Err(StateFileError::io("open", &path)(e)),
        };
        let st = sys::fstat(fd.as_fd()).map_err(StateFileError::io("inspect", &path))?;
        trust::check_dir(&path, Seen::of_stat(&st))?;
        Ok(Self { path, fd })
    }

    /// The directory's path (absolute).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The handle that passed the trust check.
    pub(crate) fn handle(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The path of `name` inside it (for messages and for daemons that
    /// take paths; corral itself goes through the handle).
    pub fn file_path(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The subdirectory `name`, created (0700) if missing, checked.
    pub fn subdir(&self, name: &str) -> Result<StateDir, StateFileError> {
        let c = component(name)?;
        let path = self.file_path(name);
        match sys::mkdirat(self.fd.as_fd(), &c, DIR_MODE) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StateFileError::io("create", &path)(e)),
        }
        self.open_sub(&c, path)
    }

    /// The subdirectory `name` if it exists, checked; creates nothing.
    pub fn subdir_existing(&self, name: &str) -> Result<Option<StateDir>, StateFileError> {
        let c = component(name)?;
        let path = self.file_path(name);
        match self.open_sub(&c, path) {
            Err(StateFileError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(None)
            }
            other => other.map(Some),
        }
    }

    fn open_sub(&self, c: &CString, path: PathBuf) -> Result<StateDir, StateFileError> {
        let fd = match sys::openat(Some(self.fd.as_fd()), c, DIR_FLAGS, 0) {
            Ok(fd) => fd,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                return Err(StateFileError::Untrusted {
                    problem: "it is a symlink or not a directory".to_owned(),
                    fix: "remove it; corral creates it again".to_owned(),
                    path,
                });
            }
            Err(e) => return Err(StateFileError::io("open", &path)(e)),
        };
        let st = sys::fstat(fd.as_fd()).map_err(StateFileError::io("inspect", &path))?;
        trust::check_dir(&path, Seen::of_stat(&st))?;
        Ok(StateDir { path, fd })
    }

    /// The directory's descriptor (for this crate's other writers).
    pub(crate) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Writes `bytes` to `name` atomically, mode 0600.
    pub fn write(&self, name: &str, bytes: &[u8]) -> Result<(), StateFileError> {
        self.write_with_mode(name, bytes, FILE_MODE)
    }

    /// Writes `bytes` to `name` atomically with `mode`: a temp file with a
    /// random name is created exclusively (never following a symlink),
    /// written, given `mode`, synced, renamed over `name`, and the
    /// directory synced. A reader sees the old content or the new, never
    /// half; a crash leaves at most a stray temp file.
    pub fn write_with_mode(
        &self,
        name: &str,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), StateFileError> {
        self.replace(name, bytes, mode, Durability::Synced)
    }

    /// Like [`StateDir::write_with_mode`] (a reader sees the old content or
    /// the new, never half), without the two fsyncs: for files rebuilt from
    /// durable inputs before anything reads them after a crash (a gateway's
    /// configuration and reservations, rewritten by every apply before its
    /// dnsmasq starts). A crash may lose the latest such write; the files
    /// themselves are never an input. Hundreds of gateways are written per
    /// apply, and each synced write costs a journal commit (~5 ms here).
    pub fn write_regenerated(
        &self,
        name: &str,
        bytes: &[u8],
        mode: u32,
    ) -> Result<(), StateFileError> {
        self.replace(name, bytes, mode, Durability::Regenerated)
    }

    fn replace(
        &self,
        name: &str,
        bytes: &[u8],
        mode: u32,
        durability: Durability,
    ) -> Result<(), StateFileError> {
        let synced = durability == Durability::Synced;
        let target = component(name)?;
        let path = self.file_path(name);
        let mut attempt = 0;
        let (tmp, file) = loop {
            let tmp_name = format!(
                ".{name}.{:016x}.tmp",
                sys::random_u64().map_err(StateFileError::io("draw a temp name for", &path))?
            );
            let tmp = component(&tmp_name)?;
            let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
            match sys::openat(Some(self.fd.as_fd()), &tmp, flags, FILE_MODE) {
                Ok(fd) => break (tmp, File::from(fd)),
                // A random 64-bit name taken: someone is guessing; try anew.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < 8 => {
                    attempt += 1;
                }
                Err(e) => return Err(StateFileError::io("create a temp file for", &path)(e)),
            }
        };
        let written = (|| {
            let mut file = file;
            file.write_all(bytes)?;
            sys::fchmod(file.as_fd(), mode)?;
            if synced {
                file.sync_all()?;
            }
            drop(file);
            sys::renameat(self.fd.as_fd(), &tmp, &target)?;
            if synced {
                File::from(self.fd.try_clone()?).sync_all()?;
            }
            Ok(())
        })();
        if let Err(e) = written {
            let _ = sys::unlinkat(self.fd.as_fd(), &tmp, 0);
            return Err(StateFileError::io("write", &path)(e));
        }
        Ok(())
    }

    /// The contents of `name`, `None` when it does not exist. The file must
    /// be a regular file owned by corral; a symlink is refused.
    pub fn read(&self, name: &str) -> Result<Option<Vec<u8>>, StateFileError> {
        self.read_owned_by(name, &[])
    }

    /// Like [`StateDir::read`], also accepting a file owned by one of
    /// `owners` (a daemon that writes its own pid file, then drops to an
    /// unprivileged user and takes ownership so it can remove it).
    pub fn read_owned_by(
        &self,
        name: &str,
        owners: &[u32],
    ) -> Result<Option<Vec<u8>>, StateFileError> {
        let c = component(name)?;
        let path = self.file_path(name);
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let fd = match sys::openat(Some(self.fd.as_fd()), &c, flags, 0) {
            Ok(fd) => fd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(StateFileError::Untrusted {
                    problem: "it is a symlink".to_owned(),
                    fix: "remove it; corral writes it again".to_owned(),
                    path,
                });
            }
            Err(e) => return Err(StateFileError::io("open", &path)(e)),
        };
        let st = sys::fstat(fd.as_fd()).map_err(StateFileError::io("inspect", &path))?;
        trust::check_file(&path, Seen::of_stat(&st), owners)?;
        let mut bytes = Vec::new();
        File::from(fd)
            .read_to_end(&mut bytes)
            .map_err(StateFileError::io("read", &path))?;
        Ok(Some(bytes))
    }

    /// Removes the file `name`; true when there was one.
    pub fn remove(&self, name: &str) -> Result<bool, StateFileError> {
        let c = component(name)?;
        match sys::unlinkat(self.fd.as_fd(), &c, 0) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(StateFileError::io("remove", self.file_path(name))(e)),
        }
    }

    /// Removes the subdirectory `name` and everything in it (after checking
    /// it like any other); true when there was one.
    pub fn remove_subdir(&self, name: &str) -> Result<bool, StateFileError> {
        let Some(sub) = self.subdir_existing(name)? else {
            return Ok(false);
        };
        // std's remove_dir_all never follows a symlink inside the tree.
        std::fs::remove_dir_all(sub.path()).map_err(StateFileError::io("remove", sub.path()))?;
        Ok(true)
    }

    /// The names in the directory (unsorted; `.` and `..` left out).
    pub fn names(&self) -> Result<Vec<String>, StateFileError> {
        let entries =
            std::fs::read_dir(&self.path).map_err(StateFileError::io("list", &self.path))?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(StateFileError::io("list", &self.path))?;
            if let Ok(name) = entry.file_name().into_string() {
                out.push(name);
            }
        }
        Ok(out)
    }

    /// The path of `name`, a private file for a program that opens files
    /// by path (a database): created 0600 if missing (never through a
    /// symlink), checked to be a regular file owned by corral, and set to
    /// 0600 if it was wider. The directory passed the trust rule, so nobody
    /// else can replace the file between this check and the open.
    pub fn private_file(&self, name: &str) -> Result<PathBuf, StateFileError> {
        let c = component(name)?;
        let path = self.file_path(name);
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW | libc::O_NONBLOCK;
        let fd = match sys::openat(Some(self.fd.as_fd()), &c, flags, FILE_MODE) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(StateFileError::Untrusted {
                    problem: "it is a symlink".to_owned(),
                    fix: "remove it; corral creates it again".to_owned(),
                    path,
                });
            }
            Err(e) => return Err(StateFileError::io("open", &path)(e)),
        };
        let st = sys::fstat(fd.as_fd()).map_err(StateFileError::io("inspect", &path))?;
        trust::check_file(&path, Seen::of_stat(&st), &[])?;
        sys::fchmod(fd.as_fd(), FILE_MODE).map_err(StateFileError::io("set the mode of", &path))?;
        Ok(path)
    }

    /// Takes an exclusive lock on the file `name` (created 0600 if
    /// missing), waiting for another holder to let go.
    pub fn lock(&self, name: &str) -> Result<StateLock, StateFileError> {
        let (fd, path) = self.lock_file(name)?;
        sys::flock(fd.as_fd(), libc::LOCK_EX).map_err(StateFileError::io("lock", &path))?;
        Ok(StateLock { _fd: fd, path })
    }

    /// Like [`StateDir::lock`], but `None` at once when another holds it.
    pub fn try_lock(&self, name: &str) -> Result<Option<StateLock>, StateFileError> {
        let (fd, path) = self.lock_file(name)?;
        match sys::flock(fd.as_fd(), libc::LOCK_EX | libc::LOCK_NB) {
            Ok(()) => Ok(Some(StateLock { _fd: fd, path })),
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(None),
            Err(e) => Err(StateFileError::io("lock", &path)(e)),
        }
    }

    fn lock_file(&self, name: &str) -> Result<(OwnedFd, PathBuf), StateFileError> {
        let c = component(name)?;
        let path = self.file_path(name);
        let flags = libc::O_RDWR | libc::O_CREAT | libc::O_NOFOLLOW;
        let fd = sys::openat(Some(self.fd.as_fd()), &c, flags, FILE_MODE)
            .map_err(StateFileError::io("open the lock", &path))?;
        let st = sys::fstat(fd.as_fd()).map_err(StateFileError::io("inspect", &path))?;
        trust::check_file(&path, Seen::of_stat(&st), &[])?;
        Ok((fd, path))
    }
}
