//! The staging directory: per-sandbox files and the ownership stamp.
//!
//! CLI-driven backends keep no metadata corral could tag, so ownership
//! lives here: an instance is corral's when its name carries corral's
//! prefix AND `<root>/<vm>/corral-stamp.json` exists and names it. The root
//! and every per-sandbox directory are mode 0700 and the files 0600, so
//! other host users can neither read what is staged nor forge a stamp.
//!
//! What a stamp records is the provider's business: [`Staging`] is generic
//! over an [`OwnershipStamp`] type.

use std::fmt;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::{self, Write};
use std::marker::PhantomData;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

/// File name of the ownership stamp inside a sandbox's staging directory.
pub const STAMP_FILE: &str = "corral-stamp.json";

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

/// What a provider records about an instance it created; stored as JSON.
pub trait OwnershipStamp: Serialize + DeserializeOwned {
    /// The backend's name of the instance (its staging directory's name).
    fn vm(&self) -> &str;
}

/// The staging root, holding stamps of type `S`.
pub struct Staging<S> {
    root: PathBuf,
    // `fn() -> S`: the root holds no `S`, so it is Send + Sync whatever S is.
    stamp: PhantomData<fn() -> S>,
}

impl<S> fmt::Debug for Staging<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Staging").field("root", &self.root).finish()
    }
}

impl<S> Clone for Staging<S> {
    fn clone(&self) -> Self {
        Self {
            root: self.root.clone(),
            stamp: PhantomData,
        }
    }
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

impl<S> Staging<S> {
    /// Open (creating if needed) the staging root with mode 0700.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StagingError> {
        let root = root.into();
        private_dir(&root, true)?;
        Ok(Self {
            root,
            stamp: PhantomData,
        })
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

impl<S: OwnershipStamp> Staging<S> {
    /// Record that corral owns `stamp.vm()`.
    pub fn write_stamp(&self, stamp: &S) -> Result<(), StagingError> {
        let json = serde_json::to_vec_pretty(stamp).map_err(|e| StagingError::BadStamp {
            path: self.dir(stamp.vm()).join(STAMP_FILE),
            reason: e.to_string(),
        })?;
        self.write_file(stamp.vm(), STAMP_FILE, &json).map(|_| ())
    }

    /// The stamp of `vm`, or `None` when there is none.
    pub fn read_stamp(&self, vm: &str) -> Result<Option<S>, StagingError> {
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
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    struct TestStamp {
        vm: String,
        profile: Option<String>,
    }

    impl OwnershipStamp for TestStamp {
        fn vm(&self) -> &str {
            &self.vm
        }
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o777
    }

    fn stamp(vm: &str) -> TestStamp {
        TestStamp {
            vm: vm.to_owned(),
            profile: Some("dev".to_owned()),
        }
    }

    type TestStaging = Staging<TestStamp>;

    #[test]
    fn root_and_sandbox_dirs_are_0700_and_files_0600() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("deep").join("staging");
        let staging = TestStaging::open(&root).unwrap();
        assert_eq!(mode(&root), 0o700);
        let dir = staging.create_dir("corral-a").unwrap();
        assert_eq!(mode(&dir), 0o700);
        staging.write_stamp(&stamp("corral-a")).unwrap();
        assert_eq!(mode(&dir.join(STAMP_FILE)), 0o600);
        let f = staging.write_file("corral-a", "run.pid", b"42").unwrap();
        assert_eq!(mode(&f), 0o600);
        assert_eq!(
            staging.read_file("corral-a", "run.pid").unwrap().unwrap(),
            b"42"
        );
        staging.remove_file("corral-a", "run.pid").unwrap();
        staging.remove_file("corral-a", "run.pid").unwrap();
        assert_eq!(staging.read_file("corral-a", "run.pid").unwrap(), None);
    }

    #[test]
    fn an_existing_open_root_is_tightened_but_an_open_sandbox_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("staging");
        fs::create_dir(&root).unwrap();
        fs::set_permissions(&root, fs::Permissions::from_mode(0o755)).unwrap();
        let staging = TestStaging::open(&root).unwrap();
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
        let staging = TestStaging::open(tmp.path().join("s")).unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        fs::create_dir(&elsewhere).unwrap();
        std::os::unix::fs::symlink(&elsewhere, staging.dir("corral-c")).unwrap();
        let err = staging.create_dir("corral-c").unwrap_err();
        assert!(err.to_string().contains("symlink"), "{err}");
    }

    #[test]
    fn a_symlinked_file_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let staging = TestStaging::open(tmp.path().join("s")).unwrap();
        staging.create_dir("corral-d").unwrap();
        let target = tmp.path().join("target");
        fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, staging.dir("corral-d").join("f")).unwrap();
        let err = staging.write_file("corral-d", "f", b"x").unwrap_err();
        assert!(matches!(err, StagingError::Io { .. }), "{err}");
        assert_eq!(fs::read(&target).unwrap(), b"keep");
    }

    #[test]
    fn stamps_round_trip_and_go_away() {
        let tmp = tempfile::tempdir().unwrap();
        let staging = TestStaging::open(tmp.path().join("s")).unwrap();
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

    #[test]
    fn rename_moves_the_directory_and_refuses_to_overwrite() {
        let tmp = tempfile::tempdir().unwrap();
        let staging = TestStaging::open(tmp.path().join("s")).unwrap();
        staging.create_dir("corral-a").unwrap();
        staging.write_stamp(&stamp("corral-a")).unwrap();
        staging.create_dir("corral-b").unwrap();
        let err = staging.rename("corral-a", "corral-b").unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        staging.rename("corral-a", "corral-c").unwrap();
        assert!(!staging.dir("corral-a").exists());
        assert_eq!(
            staging.read_stamp("corral-c").unwrap(),
            Some(stamp("corral-a"))
        );
    }
}
