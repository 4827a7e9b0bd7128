//! The staging directory: per-sandbox state (Softnet policy, the pid and
//! log of `tart run`) and the ownership stamp.
//!
//! Tart keeps no metadata corral could tag, so ownership lives here: a VM
//! is corral's when its name carries corral's prefix AND
//! `<root>/<vm>/corral-stamp.json` exists and names that VM. The root and
//! every per-sandbox directory are mode 0700 and the files 0600, so other
//! host users can neither read them nor forge a stamp.
//!
//! (The same scheme as the Multipass provider's staging; providers may not
//! depend on each other, so it is repeated here.)

use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File name of the ownership stamp inside a sandbox's staging directory.
pub const STAMP_FILE: &str = "corral-stamp.json";
/// File name of the Softnet policy the VM runs under (JSON).
pub const POLICY_FILE: &str = "softnet.json";
/// File name holding the pid of the VM's `tart run`.
pub const PID_FILE: &str = "run.pid";
/// File name of the `tart run` log.
pub const LOG_FILE: &str = "run.log";
/// Stamp format version.
pub const STAMP_VERSION: u32 = 1;

/// Why the staging directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum StagingError {
    /// A filesystem operation failed.
    #[error("staging {action} `{path}` failed: {source}")]
    Io {
        /// What corral was doing.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The path exists but is not a private directory of this user.
    #[error(
        "staging directory `{path}` is unsafe: {reason}; fix it (e.g. `chmod 700`) or choose another directory"
    )]
    Unsafe {
        /// The path.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A stamp exists but cannot be read.
    #[error("ownership stamp `{path}` is unreadable: {reason}")]
    BadStamp {
        /// The stamp file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// What corral records about a VM it created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// Format version.
    pub version: u32,
    /// The Tart VM name.
    pub vm: String,
    /// The corral sandbox name.
    pub sandbox: String,
    /// The profile it was attached to.
    pub profile: Option<String>,
    /// The VM or OCI image it was cloned from.
    pub image: String,
}

/// The staging root.
#[derive(Debug, Clone)]
pub struct Staging {
    root: PathBuf,
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> StagingError + 'a {
    move |source| StagingError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

fn current_uid() -> u32 {
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Create `path` as a 0700 directory, or accept an existing one only when it
/// is a real directory (not a symlink) of ours. An existing root with looser
/// bits is tightened to 0700 (it held nothing private yet); an existing
/// per-sandbox directory with group/other access is refused.
fn private_dir(path: &Path, is_root: bool) -> Result<(), StagingError> {
    match DirBuilder::new()
        .mode(0o700)
        .recursive(is_root)
        .create(path)
    {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err("create", path)(e)),
    }
    let meta = fs::symlink_metadata(path).map_err(io_err("inspect", path))?;
    let unsafe_dir = |reason: String| StagingError::Unsafe {
        path: path.to_owned(),
        reason,
    };
    if !meta.is_dir() {
        return Err(unsafe_dir(
            "it is not a directory (or is a symlink)".to_owned(),
        ));
    }
    if meta.uid() != current_uid() {
        return Err(unsafe_dir(format!(
            "it belongs to uid {} instead of uid {}",
            meta.uid(),
            current_uid()
        )));
    }
    // The umask can only take bits away, so set 0700 explicitly once.
    if meta.mode() & 0o777 != 0o700 {
        if meta.mode() & 0o077 != 0 && !is_root {
            return Err(unsafe_dir(format!(
                "its mode is {:o}, not 700",
                meta.mode() & 0o777
            )));
        }
        fs::set_permissions(path, fs::Permissions::from_mode(0o700))
            .map_err(io_err("chmod", path))?;
    }
    Ok(())
}

impl Staging {
    /// Open (creating if needed) the staging root with mode 0700.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StagingError> {
        let root = root.into();
        private_dir(&root, true)?;
        Ok(Self { root })
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of `vm`.
    pub fn dir(&self, vm: &str) -> PathBuf {
        self.root.join(vm)
    }

    /// Create the private (0700) directory of `vm`.
    pub fn create_dir(&self, vm: &str) -> Result<PathBuf, StagingError> {
        let dir = self.dir(vm);
        private_dir(&dir, false)?;
        Ok(dir)
    }

    /// Write `contents` to `name` in `vm`'s directory, mode 0600.
    pub fn write_file(
        &self,
        vm: &str,
        name: &str,
        contents: &[u8],
    ) -> Result<PathBuf, StagingError> {
        let path = self.dir(vm).join(name);
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io_err("write", &path))?;
        file.write_all(contents).map_err(io_err("write", &path))?;
        file.sync_all().map_err(io_err("sync", &path))?;
        Ok(path)
    }

    /// Record that corral owns `stamp.vm`.
    pub fn write_stamp(&self, stamp: &Stamp) -> Result<(), StagingError> {
        let json = serde_json::to_vec_pretty(stamp).map_err(|e| StagingError::BadStamp {
            path: self.dir(&stamp.vm).join(STAMP_FILE),
            reason: e.to_string(),
        })?;
        self.write_file(&stamp.vm, STAMP_FILE, &json).map(|_| ())
    }

    /// The contents of `name` in `vm`'s directory, or `None` when absent.
    pub fn read_file(&self, vm: &str, name: &str) -> Result<Option<Vec<u8>>, StagingError> {
        let path = self.dir(vm).join(name);
        match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err("read", &path)(e)),
        }
    }

    /// Remove `name` from `vm`'s directory (a missing file is fine).
    pub fn remove_file(&self, vm: &str, name: &str) -> Result<(), StagingError> {
        let path = self.dir(vm).join(name);
        match fs::remove_file(&path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("remove", &path)(e)),
            _ => Ok(()),
        }
    }

    /// The stamp of `vm`, or `None` when there is none.
    pub fn read_stamp(&self, vm: &str) -> Result<Option<Stamp>, StagingError> {
        let path = self.dir(vm).join(STAMP_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err("read", &path)(e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| StagingError::BadStamp {
                path,
                reason: e.to_string(),
            })
    }

    /// Move `from`'s directory to `to` (which must not exist yet).
    pub fn rename(&self, from: &str, to: &str) -> Result<(), StagingError> {
        let target = self.dir(to);
        if fs::symlink_metadata(&target).is_ok() {
            return Err(StagingError::Unsafe {
                path: target,
                reason: "it already exists".to_owned(),
            });
        }
        fs::rename(self.dir(from), &target).map_err(io_err("rename", &target))
    }

    /// Remove `vm`'s directory with everything in it (a missing one is fine).
    pub fn remove(&self, vm: &str) -> Result<(), StagingError> {
        let dir = self.dir(vm);
        match fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(io_err("remove", &dir)(e)),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o777
    }

    fn stamp(vm: &str) -> Stamp {
        Stamp {
            version: STAMP_VERSION,
            vm: vm.to_owned(),
            sandbox: "a".to_owned(),
            profile: Some("dev".to_owned()),
            image: "24.04".to_owned(),
        }
    }

    #[test]
    fn root_and_sandbox_dirs_are_0700_and_files_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("deep").join("staging");
        let staging = Staging::open(&root).unwrap();
        assert_eq!(mode(&root), 0o700);
        let dir = staging.create_dir("corral-a").unwrap();
        assert_eq!(mode(&dir), 0o700);
        staging.write_stamp(&stamp("corral-a")).unwrap();
        assert_eq!(mode(&dir.join(STAMP_FILE)), 0o600);
        let f = staging.write_file("corral-a", PID_FILE, b"42").unwrap();
        assert_eq!(mode(&f), 0o600);
        assert_eq!(
            staging.read_file("corral-a", PID_FILE).unwrap().unwrap(),
            b"42"
        );
        staging.remove_file("corral-a", PID_FILE).unwrap();
        assert_eq!(staging.read_file("corral-a", PID_FILE).unwrap(), None);
    }

    #[test]
    fn an_existing_open_root_is_tightened_but_an_open_sandbox_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("staging");
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        let staging = Staging::open(&root).unwrap();
        assert_eq!(mode(&root), 0o700);
        let dir = root.join("corral-b");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        let err = staging.create_dir("corral-b").unwrap_err();
        assert!(matches!(err, StagingError::Unsafe { .. }), "{err}");
    }

    #[test]
    fn symlinked_sandbox_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let staging = Staging::open(tmp.path().join("s")).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, staging.dir("corral-c")).unwrap();
        let err = staging.create_dir("corral-c").unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
    }

    #[test]
    fn stamps_round_trip_and_go_away() {
        let tmp = tempfile::tempdir().unwrap();
        let staging = Staging::open(tmp.path().join("s")).unwrap();
        assert_eq!(staging.read_stamp("corral-a").unwrap(), None);
        staging.create_dir("corral-a").unwrap();
        staging.write_stamp(&stamp("corral-a")).unwrap();
        assert_eq!(
            staging.read_stamp("corral-a").unwrap(),
            Some(stamp("corral-a"))
        );
        staging
            .write_file("corral-a", STAMP_FILE, b"{not json")
            .unwrap();
        assert!(matches!(
            staging.read_stamp("corral-a"),
            Err(StagingError::BadStamp { .. })
        ));
        staging.remove("corral-a").unwrap();
        staging.remove("corral-a").unwrap();
        assert!(!staging.dir("corral-a").exists());
    }
}
