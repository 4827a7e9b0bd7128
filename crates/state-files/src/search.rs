//! Search permission for a daemon that drops root: dnsmasq re-reads its
//! DHCP reservations as an unprivileged user, so every directory on the
//! way to that file must let others enter it — enter, never list or write
//! (mode 0711 for corral's own directories).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use crate::dir::StateDir;
use crate::error::StateFileError;
use crate::sys;

/// Mode of a directory others may enter but not list or write.
pub const SEARCH_MODE: u32 = 0o711;

impl StateDir {
    /// Lets other users enter this directory (mode 0711: search only),
    /// so a daemon that dropped root can open a file here by name.
    pub fn allow_search(&self) -> Result<(), StateFileError> {
        sys::fchmod(self.handle(), SEARCH_MODE)
            .map_err(StateFileError::io("set the mode of", self.path()))
    }

    /// [`StateDir::allow_search`] on this directory and every parent up to
    /// `/` that others cannot enter yet. A parent is changed only when it
    /// is private to corral's user (owned by the effective uid, no group or
    /// other permission: what corral creates) and then only gains search
    /// permission for others; any other parent that others cannot enter
    /// is refused, naming it and the fix.
    pub fn allow_search_from_root(&self) -> Result<(), StateFileError> {
        self.allow_search()?;
        let me = sys::effective_uid();
        for parent in self.path().ancestors().skip(1) {
            let meta = std::fs::metadata(parent).map_err(StateFileError::io("inspect", parent))?;
            let mode = meta.mode() & 0o7777;
            if mode & 0o001 != 0 {
                continue;
            }
            if meta.uid() != me || mode & 0o077 != 0 {
                return Err(unsearchable(parent, self.path(), meta.uid(), mode));
            }
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(mode | 0o011))
                .map_err(StateFileError::io("set the mode of", parent))?;
        }
        Ok(())
    }
}

fn unsearchable(parent: &Path, dir: &Path, uid: u32, mode: u32) -> StateFileError {
    StateFileError::Unsearchable {
        path: parent.to_owned(),
        below: dir.to_owned(),
        problem: format!("owner uid {uid}, mode {mode:04o}"),
    }
}
