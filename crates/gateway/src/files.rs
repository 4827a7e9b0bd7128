//! Who may read and write a gateway's files. dnsmasq starts as root and
//! drops to `nobody`, a user other services share, so:
//!
//! - the lease file (every sandbox's MAC, address and name) is root's,
//!   0600: dnsmasq opens it before dropping root and rewrites it in place
//!   through that descriptor;
//! - the reservations are 0640 root:`nogroup`: dnsmasq re-reads them as
//!   `nobody` on SIGHUP, so its group reads them and nobody else;
//! - the log the audit trail reads is root's, 0640, opened by corral and
//!   handed to dnsmasq as its standard error (`--log-facility=-`). Given a
//!   path instead, dnsmasq 2.90 opens it as root and then `fchown`s it to
//!   `nobody` (and widens it to 0660), which would let any `nobody` process
//!   forge audit records; on stderr it never does.
//!
//! Files left by an older corral with wider modes or another owner are
//! corrected before a daemon starts, and a running daemon whose log is not
//! root's is restarted by the next apply (it holds the old file open).

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

use corral_state_files::{StateDir, StateFileError};

use crate::GatewayError;

/// The log's file name in a gateway's directory.
pub(crate) const LOG_FILE: &str = "dnsmasq.log";
/// The lease file's name in a gateway's directory.
pub(crate) const LEASES_FILE: &str = "leases";
/// The lease file of corral's own DHCP server, in dnsmasq's format. Not
/// dnsmasq's file: a dnsmasq that still serves the bridge's router
/// advertisements keeps a lease database of its own and rewrites it.
pub(crate) const CORRAL_LEASES_FILE: &str = "corral-leases";
/// The reservations with their ports, for corral's own DHCP server (it
/// answers out of the client's port, which dnsmasq's file does not name).
pub(crate) const DHCP_RESERVATIONS_FILE: &str = "reservations.json";
/// The socket corral's gateway holds bound while it serves the bridge
/// (`hosted_mark`), which the start gate connects to.
pub(crate) const HOSTED_SOCKET_FILE: &str = "hosted.sock";

/// The log: corral writes and reads it, the audit's readers may read it.
pub(crate) const LOG_MODE: u32 = 0o640;
/// The leases: root's alone.
pub(crate) const LEASES_MODE: u32 = 0o600;
/// The reservations: read by dnsmasq's group after it drops root.
pub(crate) const RESERVATIONS_MODE: u32 = 0o640;

/// How much of a failed start's log is quoted.
const STARTUP_QUOTE: u64 = 4096;

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> GatewayError + 'a {
    move |source| {
        GatewayError::Files(StateFileError::Io {
            op,
            path: path.to_owned(),
            source,
        })
    }
}

/// Opens (creates) `name` in `dir` without following a link, and makes it
/// a regular file of ours with `mode`.
fn own_file(dir: &StateDir, name: &str, mode: u32, append: bool) -> Result<File, GatewayError> {
    let path = dir.file_path(name);
    let mut options = OpenOptions::new();
    options
        .create(true)
        .mode(mode)
        .custom_flags(libc::O_NOFOLLOW);
    if append {
        options.append(true);
    } else {
        options.read(true).write(true);
    }
    let file = options.open(&path).map_err(io("open", &path))?;
    let meta = file.metadata().map_err(io("inspect", &path))?;
    let me = corral_state_files::effective_uid();
    if !meta.is_file() || meta.uid() != me || meta.nlink() != 1 {
        return Err(GatewayError::Files(StateFileError::Untrusted {
            path,
            problem: format!(
                "it is not a regular file of uid {me} with one link (owner {}, {} links)",
                meta.uid(),
                meta.nlink()
            ),
            fix: "remove it; corral creates it again".to_owned(),
        }));
    }
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(io("set the mode of", &path))?;
    Ok(file)
}

/// True when `name` in `dir` is a regular file of ours, one link, whose
/// mode grants no more than `mode`; false when it is missing or is not.
fn is_private(dir: &StateDir, name: &str, mode: u32) -> bool {
    std::fs::symlink_metadata(dir.file_path(name)).is_ok_and(|m| {
        m.is_file()
            && m.uid() == corral_state_files::effective_uid()
            && m.nlink() == 1
            && m.mode() & 0o7777 & !mode == 0
    })
}

/// A log another user owns (dnsmasq took an older corral's) is replaced by
/// a file of ours with the same content, so whoever holds the old one
/// open writes into a file nothing reads.
fn take_back(dir: &StateDir, name: &str, mode: u32) -> Result<(), GatewayError> {
    let path = dir.file_path(name);
    let Ok(meta) = std::fs::symlink_metadata(&path) else {
        return Ok(());
    };
    if meta.is_file() && meta.uid() == corral_state_files::effective_uid() && meta.nlink() == 1 {
        return Ok(());
    }
    let mut old = Vec::new();
    if meta.is_file() {
        OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .and_then(|mut f| f.read_to_end(&mut old))
            .map_err(io("read", &path))?;
    }
    dir.write_regenerated(name, &old, mode)?;
    Ok(())
}

/// The log, root's and 0640, open for appending: dnsmasq's standard error.
/// Also its length now, where a failed start's words begin.
pub(crate) fn open_log(dir: &StateDir) -> Result<(File, u64), GatewayError> {
    take_back(dir, LOG_FILE, LOG_MODE)?;
    let file = own_file(dir, LOG_FILE, LOG_MODE, true)?;
    let path = dir.file_path(LOG_FILE);
    let mark = file.metadata().map_err(io("inspect", &path))?.len();
    Ok((file, mark))
}

/// What the log holds past `mark` (at most its last few KiB): what a
/// daemon that failed to start said.
pub(crate) fn log_since(dir: &StateDir, mark: u64) -> String {
    let path = dir.file_path(LOG_FILE);
    let read = (|| {
        let mut file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        let len = file.metadata()?.len();
        let from = mark.max(len.saturating_sub(STARTUP_QUOTE)).min(len);
        file.seek(SeekFrom::Start(from))?;
        let mut text = String::new();
        file.take(STARTUP_QUOTE).read_to_string(&mut text)?;
        Ok::<_, std::io::Error>(text)
    })();
    read.unwrap_or_default().trim().to_owned()
}

/// The lease file, created root's 0600 before dnsmasq opens it, and made
/// so if an older corral left it wider.
pub(crate) fn prepare_leases(dir: &StateDir) -> Result<(), GatewayError> {
    take_back(dir, LEASES_FILE, LEASES_MODE)?;
    own_file(dir, LEASES_FILE, LEASES_MODE, false).map(drop)
}

/// Gives the reservations file to dnsmasq's group, 0640.
pub(crate) fn share_reservations(dir: &StateDir, name: &str) -> Result<(), GatewayError> {
    let path = dir.file_path(name);
    let gid = run_as_gid(&path)?;
    let file = own_file(dir, name, RESERVATIONS_MODE, false)?;
    if file.metadata().is_ok_and(|m| m.gid() == gid) {
        return Ok(());
    }
    std::os::unix::fs::fchown(&file, None, Some(gid)).map_err(io("set the group of", &path))?;
    Ok(())
}

/// Writes the reservations `bytes`. With CAP_CHOWN (an apply as root) the
/// file is replaced atomically and given dnsmasq's group. Without it
/// (corrald under its unit) a new file could not be given the group, so
/// one that already has it is rewritten in place: its writers hold the
/// host lock and dnsmasq reads it only when signalled afterwards. A file
/// without the group, and no CAP_CHOWN, is an error that says to apply.
pub(crate) fn write_reservations(
    dir: &StateDir,
    name: &str,
    bytes: &[u8],
) -> Result<(), GatewayError> {
    write_reservations_as(dir, name, bytes, may_chown())
}

fn write_reservations_as(
    dir: &StateDir,
    name: &str,
    bytes: &[u8],
    chown: bool,
) -> Result<(), GatewayError> {
    let path = dir.file_path(name);
    let gid = run_as_gid(&path)?;
    if chown {
        dir.write_regenerated(name, bytes, RESERVATIONS_MODE)?;
        return share_reservations(dir, name);
    }
    let shared = std::fs::symlink_metadata(&path).is_ok_and(|m| m.gid() == gid);
    if !shared {
        return Err(GatewayError::Render(format!(
            "{} must belong to group `{}` (dnsmasq reads it as that group) and this process may not give it away (no CAP_CHOWN); run `corral host apply` as root once",
            path.display(),
            crate::render::RUN_AS_GROUP
        )));
    }
    let mut file = own_file(dir, name, RESERVATIONS_MODE, false)?;
    file.set_len(0).map_err(io("empty", &path))?;
    std::io::Write::write_all(&mut file, bytes).map_err(io("write", &path))?;
    Ok(())
}

/// The gid dnsmasq drops to; its absence is an error naming `path`.
fn run_as_gid(path: &Path) -> Result<u32, GatewayError> {
    let group = crate::render::RUN_AS_GROUP;
    group_gid(group).ok_or_else(|| {
        GatewayError::Render(format!(
            "group `{group}`, which dnsmasq drops to and which reads {}, does not exist; create it (Debian's base system has it)",
            path.display()
        ))
    })
}

/// Whether this process holds CAP_CHOWN (bit 0 of its effective set).
fn may_chown() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & 1 != 0)
}

/// True when every file the gateway keeps is as private as this module
/// makes it (the log root's 0640, the leases root's 0600).
pub(crate) fn all_private(dir: &StateDir) -> bool {
    is_private(dir, LOG_FILE, LOG_MODE) && is_private(dir, LEASES_FILE, LEASES_MODE)
}

/// The gid of the local group `name`, from `/etc/group`.
pub(crate) fn group_gid(name: &str) -> Option<u32> {
    let groups = std::fs::read_to_string("/etc/group").ok()?;
    groups.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next() == Some(name))
            .then(|| fields.nth(1).and_then(|g| g.parse().ok()))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> (u32, u32) {
        let m = std::fs::symlink_metadata(path).unwrap();
        (m.mode() & 0o7777, m.uid())
    }

    #[test]
    fn files_are_created_private_and_wide_ones_narrowed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(&tmp.path().join("s")).unwrap();
        let me = corral_state_files::effective_uid();
        let (_, mark) = open_log(&dir).unwrap();
        assert_eq!(mark, 0);
        prepare_leases(&dir).unwrap();
        assert_eq!(mode(&dir.file_path(LOG_FILE)), (LOG_MODE, me));
        assert_eq!(mode(&dir.file_path(LEASES_FILE)), (LEASES_MODE, me));
        assert!(all_private(&dir));
        // Control: what an older corral left (dnsmasq's umask, 0644).
        for name in [LOG_FILE, LEASES_FILE] {
            std::fs::set_permissions(dir.file_path(name), std::fs::Permissions::from_mode(0o644))
                .unwrap();
        }
        assert!(!all_private(&dir));
        open_log(&dir).unwrap();
        prepare_leases(&dir).unwrap();
        assert!(all_private(&dir));
    }

    #[test]
    fn a_link_where_a_file_belongs_is_replaced_never_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(&tmp.path().join("s")).unwrap();
        let target = tmp.path().join("elsewhere");
        std::fs::write(&target, "keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.file_path(LOG_FILE)).unwrap();
        let (mut log, _) = open_log(&dir).unwrap();
        std::io::Write::write_all(&mut log, b"x").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert!(
            std::fs::symlink_metadata(dir.file_path(LOG_FILE))
                .unwrap()
                .is_file()
        );
    }

    #[test]
    fn without_cap_chown_a_shared_file_is_rewritten_in_place_and_another_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(&tmp.path().join("s")).unwrap();
        let nogroup = group_gid(crate::render::RUN_AS_GROUP).unwrap();
        let file = dir.file_path("reservations");
        // Control: a file of root's own group cannot be shared without it.
        std::fs::write(&file, "old\n").unwrap();
        let e = write_reservations_as(&dir, "reservations", b"new\n", false).unwrap_err();
        assert!(e.to_string().contains("CAP_CHOWN"), "{e}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n");
        // With it (root), the file is replaced and shared.
        write_reservations_as(&dir, "reservations", b"longer line\n", true).unwrap();
        let inode = std::fs::metadata(&file).unwrap().ino();
        assert_eq!(mode(&file), (RESERVATIONS_MODE, 0));
        assert_eq!(std::fs::metadata(&file).unwrap().gid(), nogroup);
        // Without it, the shared file keeps its inode, group and mode.
        write_reservations_as(&dir, "reservations", b"new\n", false).unwrap();
        let m = std::fs::metadata(&file).unwrap();
        assert_eq!(
            (m.ino(), m.gid(), m.mode() & 0o777),
            (inode, nogroup, RESERVATIONS_MODE)
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
    }

    #[test]
    fn the_words_of_a_failed_start_are_what_follows_the_mark() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = StateDir::open(&tmp.path().join("s")).unwrap();
        let (mut log, _) = open_log(&dir).unwrap();
        std::io::Write::write_all(&mut log, b"old line\n").unwrap();
        let (mut log, mark) = open_log(&dir).unwrap();
        std::io::Write::write_all(&mut log, b"dnsmasq: failed to bind\n").unwrap();
        assert_eq!(log_since(&dir, mark), "dnsmasq: failed to bind");
    }
}
