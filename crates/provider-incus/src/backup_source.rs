//! The bytes an import checks are the bytes it uploads.
//!
//! The check reads the file, then the upload reads it again. A file only
//! corral's user can write keeps its bytes between the two reads: it is
//! used where it is, through the descriptor opened first (`/proc/self/fd`),
//! so renaming another file over its path changes nothing. A file someone
//! else may write (another owner, group- or world-writable, or with a
//! second name) could be rewritten in between, so it is copied first into a
//! private file (0600 in a 0700 directory of the system's temporary
//! directory), and the copy is checked and uploaded, then removed.

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::fd::AsRawFd as _;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use corral_sandbox_core::sandbox::ProviderError;

/// A backup file held for one import; a private copy is removed on drop.
#[derive(Debug)]
pub struct HeldBackup {
    /// Kept open: the path below names it.
    _file: File,
    path: PathBuf,
    copy_dir: Option<PathBuf>,
}

impl HeldBackup {
    /// The path the check and the upload read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when the bytes are a private copy of the source.
    pub fn is_copy(&self) -> bool {
        self.copy_dir.is_some()
    }
}

impl Drop for HeldBackup {
    fn drop(&mut self) {
        if let Some(dir) = &self.copy_dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> ProviderError {
    move |source| ProviderError::Io { context, source }
}

/// Opens `source` once and returns what the import reads: the file itself
/// when only this process's user can change it, else a private copy.
pub fn hold(source: &Path) -> Result<HeldBackup, ProviderError> {
    let shown = source.display().to_string();
    let file = File::open(source).map_err(io(format!("cannot open {shown}")))?;
    let meta = file
        .metadata()
        .map_err(io(format!("cannot inspect {shown}")))?;
    if !meta.is_file() {
        return Err(ProviderError::NotFound {
            what: "backup file",
            name: shown,
        });
    }
    let (euid, _) = crate::mounts::effective_ids();
    let stable = meta.uid() == euid && meta.mode() & 0o022 == 0 && meta.nlink() == 1;
    if stable {
        let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
        return Ok(HeldBackup {
            _file: file,
            path,
            copy_dir: None,
        });
    }
    let dir = private_dir()?;
    // Built first, so that a failure below removes the directory.
    let held = HeldBackup {
        path: dir.join("backup.tar"),
        _file: file,
        copy_dir: Some(dir),
    };
    let mut copy = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(held.path())
        .map_err(io(format!("cannot create {}", held.path().display())))?;
    // From the descriptor opened first: the path may name another file now.
    let mut from = &held._file;
    std::io::copy(&mut from, &mut copy).map_err(io(format!(
        "cannot copy {shown} to {}",
        held.path().display()
    )))?;
    Ok(held)
}

/// A new directory only this user can enter, in the temporary directory.
fn private_dir() -> Result<PathBuf, ProviderError> {
    let base = std::env::temp_dir();
    let mut last = None;
    for attempt in 0..16u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = base.join(format!(
            "corral-import-{}-{nanos:x}-{attempt}",
            std::process::id()
        ));
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => {
                return Err(ProviderError::Io {
                    context: format!("cannot create a private directory in {}", base.display()),
                    source: e,
                });
            }
        }
    }
    Err(ProviderError::Io {
        context: format!("cannot create a private directory in {}", base.display()),
        source: last.unwrap_or_else(|| std::io::Error::other("every name was taken")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_file_of_ours_is_read_in_place_through_its_first_descriptor() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("b.tar.gz");
        std::fs::write(&file, "first").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let held = hold(&file).unwrap();
        assert!(!held.is_copy());
        // Another file renamed over the path changes nothing read.
        let other = tmp.path().join("other");
        std::fs::write(&other, "second").unwrap();
        std::fs::rename(&other, &file).unwrap();
        assert_eq!(std::fs::read_to_string(held.path()).unwrap(), "first");
    }

    #[test]
    fn a_file_others_may_write_is_copied_and_the_copy_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("b.tar.gz");
        std::fs::write(&file, "first").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
        let held = hold(&file).unwrap();
        assert!(held.is_copy());
        // Rewritten in place after the hold: the copy keeps what was held.
        std::fs::write(&file, "rewritten").unwrap();
        assert_eq!(std::fs::read_to_string(held.path()).unwrap(), "first");
        let m = std::fs::metadata(held.path()).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600);
        let dir = held.path().parent().unwrap().to_owned();
        drop(held);
        assert!(!dir.exists());
        // A second name makes a file changeable through the other one.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::hard_link(&file, tmp.path().join("alias")).unwrap();
        assert!(hold(&file).unwrap().is_copy());
    }
}
