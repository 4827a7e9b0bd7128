//! The trust rule: corral writes as root into its state directory, so
//! nobody else may be able to change what is there.
//!
//! - the directory, and every subdirectory corral uses, is a real directory
//!   (not a symlink), owned by the effective uid and not writable by group
//!   or others; corral creates them mode 0700;
//! - every parent directory is owned by root or the effective uid and is
//!   not writable by group or others unless it is sticky (`/tmp`), so nobody
//!   can swap the directory itself; a parent that is a symlink must be
//!   owned by root or the effective uid too;
//! - a file corral reads back is a regular file owned by the effective uid.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::error::StateFileError;
use crate::sys::effective_uid;

/// Owner and mode of something on disk, for the rule and its messages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Seen {
    pub(crate) uid: u32,
    pub(crate) mode: u32,
}

impl Seen {
    pub(crate) fn of_stat(st: &libc::stat) -> Self {
        Self {
            uid: st.st_uid,
            mode: st.st_mode,
        }
    }

    fn is_dir(self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFDIR
    }

    fn is_file(self) -> bool {
        self.mode & libc::S_IFMT == libc::S_IFREG
    }

    fn describe(self) -> String {
        format!("owner uid {}, mode {:04o}", self.uid, self.mode & 0o7777)
    }
}

fn untrusted(path: &Path, problem: String, fix: String) -> StateFileError {
    StateFileError::Untrusted {
        path: path.to_owned(),
        problem,
        fix,
    }
}

/// The directory corral is about to use (already opened without following
/// a symlink, so `seen` is the directory itself).
pub(crate) fn check_dir(path: &Path, seen: Seen) -> Result<(), StateFileError> {
    let me = effective_uid();
    let fix = format!(
        "corral writes here as uid {me}, so it must be a directory owned by uid {me} that only \
         its owner can write: remove it and let corral create it (mode 0700), or run \
         `chown {me} {p} && chmod 0700 {p}` after checking its contents",
        p = path.display()
    );
    if !seen.is_dir() {
        return Err(untrusted(
            path,
            format!("it is not a directory ({})", seen.describe()),
            fix,
        ));
    }
    if seen.uid != me {
        return Err(untrusted(
            path,
            format!(
                "it belongs to another user ({}), who could plant files corral then trusts",
                seen.describe()
            ),
            fix,
        ));
    }
    if seen.mode & 0o022 != 0 {
        return Err(untrusted(
            path,
            format!(
                "group or others may write in it ({}), so they could swap files corral writes",
                seen.describe()
            ),
            fix,
        ));
    }
    Ok(())
}

/// Every parent of `path` (absolute), from the root down.
pub(crate) fn check_parents(path: &Path) -> Result<(), StateFileError> {
    let me = effective_uid();
    let owner_ok = |uid: u32| uid == 0 || uid == me;
    let mut parents: Vec<&Path> = path.ancestors().skip(1).collect();
    parents.reverse();
    for parent in parents {
        let link =
            std::fs::symlink_metadata(parent).map_err(StateFileError::io("inspect", parent))?;
        if link.file_type().is_symlink() && !owner_ok(link.uid()) {
            return Err(untrusted(
                parent,
                format!(
                    "this parent of the state directory is a symlink owned by uid {}, who can point it elsewhere",
                    link.uid()
                ),
                "give a state directory whose parents belong to root".to_owned(),
            ));
        }
        let meta = std::fs::metadata(parent).map_err(StateFileError::io("inspect", parent))?;
        let seen = Seen {
            uid: meta.uid(),
            mode: meta.mode(),
        };
        let sticky = seen.mode & libc::S_ISVTX != 0;
        if !owner_ok(seen.uid) || (seen.mode & 0o022 != 0 && !sticky) {
            return Err(untrusted(
                parent,
                format!(
                    "this parent of the state directory can be changed by someone other than root \
                     or uid {me} ({}), who could replace the state directory",
                    seen.describe()
                ),
                "give a state directory whose parents belong to root and are not group or \
                 world-writable (or are sticky, like /tmp)"
                    .to_owned(),
            ));
        }
    }
    Ok(())
}

/// A file corral reads back from its state directory: a regular file owned
/// by the effective uid (or one of `also`).
pub(crate) fn check_file(path: &Path, seen: Seen, also: &[u32]) -> Result<(), StateFileError> {
    let me = effective_uid();
    if !seen.is_file() || (seen.uid != me && !also.contains(&seen.uid)) {
        return Err(untrusted(
            path,
            format!(
                "expected a regular file owned by uid {me}, found {}",
                seen.describe()
            ),
            "remove it; corral writes it again".to_owned(),
        ));
    }
    Ok(())
}
