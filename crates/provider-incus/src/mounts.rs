//! Host directories shown inside a sandbox, under a policy:
//!
//! - a source must resolve (symlinks followed) beneath one of the allowed
//!   roots; anything else is refused before Incus hears of it;
//! - a read-only mount is a *snapshot*: the tree is copied, within a byte
//!   bound, into a private staging directory and that copy is mounted, so
//!   the guest never holds a live view of host data it may not change;
//! - a read-write mount is the resolved source itself, and only on a
//!   filesystem mounted `nosuid`: the guest's root can create setuid files
//!   there, owned by the container's host uid, and on a suid-honouring
//!   filesystem any local user could run them as that uid (and write into
//!   what that uid owns, such as the sandbox's root filesystem);
//! - the staging root is mode 0700, owned by this process, and carries a
//!   marker file (mode 0600, exact content) so corral never adopts or
//!   deletes a directory it did not make;
//! - whenever anything is mounted, the guest uid/gid corral runs work as
//!   must equal this process's, since VM virtiofs cannot remap ids.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use corral_sandbox_core::sandbox::{MountSpec, ProviderError};

use crate::api::MountDevice;
use crate::tree_copy::copy_beneath;

/// The marker file's name inside the staging root.
pub const MARKER_NAME: &str = ".corral-incus-staging-v1";
const MARKER_CONTENT: &str = "corral incus staging root v1\n";

/// Where snapshots of read-only mounts are staged, by default.
pub const DEFAULT_STAGING_ROOT: &str = "/var/lib/corral/incus-staging";
/// Default bound on the bytes one sandbox's read-only mounts may copy.
pub const DEFAULT_MAX_COPY_BYTES: u64 = 1 << 30;

/// The mount rules of one provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountPolicy {
    /// Sources must resolve beneath one of these.
    pub allowed_roots: Vec<PathBuf>,
    /// Private directory for snapshot copies.
    pub staging_root: PathBuf,
    /// Bound on bytes copied per sandbox.
    pub max_copy_bytes: u64,
    /// The uid work runs as in the guest.
    pub guest_uid: u32,
    /// The gid work runs as in the guest.
    pub guest_gid: u32,
}

impl Default for MountPolicy {
    fn default() -> Self {
        Self {
            allowed_roots: Vec::new(),
            staging_root: PathBuf::from(DEFAULT_STAGING_ROOT),
            max_copy_bytes: DEFAULT_MAX_COPY_BYTES,
            guest_uid: effective_ids().0,
            guest_gid: effective_ids().1,
        }
    }
}

fn refuse(source: &Path, reason: impl Into<String>) -> ProviderError {
    ProviderError::Mount {
        source_path: source.display().to_string(),
        reason: reason.into(),
    }
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> ProviderError {
    move |source| ProviderError::Io { context, source }
}

/// This process's effective uid and gid.
pub fn effective_ids() -> (u32, u32) {
    // SAFETY: geteuid/getegid take no arguments, cannot fail and touch no memory.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

impl MountPolicy {
    /// Host paths Incus may mount from: the roots and the staging root. This
    /// becomes the project's disk path allowlist.
    pub fn disk_roots(&self) -> Vec<PathBuf> {
        if self.allowed_roots.is_empty() {
            return Vec::new();
        }
        let mut roots: Vec<PathBuf> = self
            .allowed_roots
            .iter()
            .map(|r| fs::canonicalize(r).unwrap_or_else(|_| r.clone()))
            .collect();
        roots.push(self.staging_root.clone());
        roots
    }

    /// Check `mounts` and turn them into disk devices; read-only ones are
    /// copied under `<staging root>/<stamp id>/`.
    pub fn prepare(
        &self,
        stamp_id: &str,
        mounts: &[MountSpec],
    ) -> Result<Vec<MountDevice>, ProviderError> {
        if mounts.is_empty() {
            return Ok(Vec::new());
        }
        let (uid, gid) = effective_ids();
        if (self.guest_uid, self.guest_gid) != (uid, gid) {
            return Err(refuse(
                &mounts[0].source,
                format!(
                    "the guest runs as {}:{} but corral runs as {uid}:{gid}; mounted files keep host ids, so configure the guest uid/gid to equal corral's",
                    self.guest_uid, self.guest_gid
                ),
            ));
        }
        let mut budget = self.max_copy_bytes;
        let mut devices = Vec::with_capacity(mounts.len());
        for (i, mount) in mounts.iter().enumerate() {
            check_target(mount)?;
            let resolved = self.resolve(&mount.source)?;
            let source = if mount.read_only {
                let dir = self.sandbox_dir(stamp_id)?.join(i.to_string());
                let root = self.root_of(&resolved)?;
                copy_beneath(&root, &resolved, &dir, &mut budget, self.max_copy_bytes)?;
                dir
            } else {
                check_nosuid(&resolved)?;
                resolved
            };
            devices.push(MountDevice {
                source: source.display().to_string(),
                target: mount.target.clone(),
                read_only: mount.read_only,
            });
        }
        Ok(devices)
    }

    /// `source` with symlinks resolved, if it lies beneath an allowed root.
    pub fn resolve(&self, source: &Path) -> Result<PathBuf, ProviderError> {
        if self.allowed_roots.is_empty() {
            return Err(refuse(
                source,
                "no mount roots are configured, so nothing may be mounted",
            ));
        }
        let resolved = fs::canonicalize(source)
            .map_err(|e| refuse(source, format!("cannot resolve it: {e}")))?;
        let inside = self
            .allowed_roots
            .iter()
            .any(|root| fs::canonicalize(root).is_ok_and(|root| resolved.starts_with(root)));
        if !inside {
            let roots: Vec<String> = self
                .allowed_roots
                .iter()
                .map(|r| r.display().to_string())
                .collect();
            return Err(refuse(
                source,
                format!(
                    "it resolves to {}, outside the allowed roots ({})",
                    resolved.display(),
                    roots.join(", ")
                ),
            ));
        }
        Ok(resolved)
    }

    /// The (resolved) allowed root that `resolved` lies beneath.
    fn root_of(&self, resolved: &Path) -> Result<PathBuf, ProviderError> {
        self.allowed_roots
            .iter()
            .filter_map(|r| fs::canonicalize(r).ok())
            .find(|r| resolved.starts_with(r))
            .ok_or_else(|| refuse(resolved, "it is no longer beneath an allowed root"))
    }

    /// The staging root, created (0700 + marker) or checked.
    pub fn ensure_staging_root(&self) -> Result<&Path, ProviderError> {
        let root = &self.staging_root;
        match fs::symlink_metadata(root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.create_staging_root()?,
            Err(e) => {
                return Err(io(format!(
                    "cannot inspect staging root {}",
                    root.display()
                ))(e));
            }
            Ok(meta) => self.check_staging_root(&meta)?,
        }
        Ok(root)
    }

    fn create_staging_root(&self) -> Result<(), ProviderError> {
        let root = &self.staging_root;
        let bad = |reason: String| refuse(root, reason);
        let parent = root
            .parent()
            .ok_or_else(|| bad("the staging root needs a parent directory".into()))?;
        let canonical = fs::canonicalize(parent)
            .map_err(|e| bad(format!("its parent {} must exist: {e}", parent.display())))?;
        if canonical != parent {
            return Err(bad(format!(
                "its parent {} goes through a symlink (to {}); give the real path",
                parent.display(),
                canonical.display()
            )));
        }
        // Exclusive: if someone raced us to it, the check path runs next time.
        fs::DirBuilder::new()
            .mode(0o700)
            .create(root)
            .map_err(io(format!("cannot create staging root {}", root.display())))?;
        fs::set_permissions(root, fs::Permissions::from_mode(0o700))
            .map_err(io(format!("cannot set mode 0700 on {}", root.display())))?;
        let marker = root.join(MARKER_NAME);
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&marker)
            .map_err(io(format!("cannot create {}", marker.display())))?;
        file.write_all(MARKER_CONTENT.as_bytes())
            .map_err(io(format!("cannot write {}", marker.display())))
    }

    fn check_staging_root(&self, meta: &fs::Metadata) -> Result<(), ProviderError> {
        let root = &self.staging_root;
        let (uid, gid) = effective_ids();
        let bad = |reason: String| {
            refuse(
                root,
                format!(
                    "the staging root is not corral's: {reason}; remove it and let corral create it"
                ),
            )
        };
        if !meta.file_type().is_dir() {
            return Err(bad("not a directory (or a symlink)".into()));
        }
        if (meta.uid(), meta.gid()) != (uid, gid) {
            return Err(bad(format!(
                "owned by {}:{}, not {uid}:{gid}",
                meta.uid(),
                meta.gid()
            )));
        }
        if meta.mode() & 0o7777 != 0o700 {
            return Err(bad(format!("mode {:o}, not 700", meta.mode() & 0o7777)));
        }
        let marker = root.join(MARKER_NAME);
        let mmeta =
            fs::symlink_metadata(&marker).map_err(|_| bad(format!("no marker {MARKER_NAME}")))?;
        if !mmeta.file_type().is_file() || mmeta.mode() & 0o7777 != 0o600 || mmeta.uid() != uid {
            return Err(bad("the marker is not a 0600 file owned by corral".into()));
        }
        let content =
            fs::read_to_string(&marker).map_err(|_| bad("the marker is unreadable".into()))?;
        if content != MARKER_CONTENT {
            return Err(bad("the marker's content is unexpected".into()));
        }
        Ok(())
    }

    /// `<staging root>/<stamp id>`, created fresh (0700).
    fn sandbox_dir(&self, stamp_id: &str) -> Result<PathBuf, ProviderError> {
        let root = self.ensure_staging_root()?;
        if stamp_id.is_empty() || !stamp_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(refuse(root, format!("bad stamp id {stamp_id:?}")));
        }
        let dir = root.join(stamp_id);
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(format!("cannot create {}", dir.display()))(e)),
        }
        Ok(dir)
    }

    /// Remove the staged copies of the sandbox with stamp `stamp_id`.
    pub fn remove_staging(&self, stamp_id: &str) -> Result<(), ProviderError> {
        if stamp_id.is_empty() || !stamp_id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(());
        }
        let dir = self.staging_root.join(stamp_id);
        match fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io(format!("cannot remove staged mounts {}", dir.display()))(e))
            }
            _ => Ok(()),
        }
    }

    /// Copy the staged tree of `from_id` to `to_id` (a clone must not share,
    /// nor outlive with, its origin's copies); returns the new source for
    /// each old one beneath the origin's directory.
    pub fn restage(
        &self,
        from_id: &str,
        to_id: &str,
        source: &str,
    ) -> Result<Option<String>, ProviderError> {
        let from_dir = self.staging_root.join(from_id);
        let Ok(rest) = Path::new(source).strip_prefix(&from_dir) else {
            return Ok(None);
        };
        let to = self.sandbox_dir(to_id)?.join(rest);
        let mut budget = self.max_copy_bytes;
        copy_beneath(
            &self.staging_root,
            Path::new(source),
            &to,
            &mut budget,
            self.max_copy_bytes,
        )?;
        Ok(Some(to.display().to_string()))
    }
}

/// A read-write source must be on a filesystem mounted `nosuid`.
pub fn check_nosuid(path: &Path) -> Result<(), ProviderError> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|_| refuse(path, "the path holds a NUL byte"))?;
    // SAFETY: `statvfs` is plain old data; all-zero is a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: a valid C string and a writable `statvfs`, both alive for the call.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io(format!(
            "cannot inspect the filesystem of {}",
            path.display()
        ))(std::io::Error::last_os_error()));
    }
    if st.f_flag & libc::ST_NOSUID == 0 {
        return Err(refuse(
            path,
            "read-write mounts must be on a filesystem mounted nosuid (the guest's root could \
             plant setuid files there that any local user could run as the container's host \
             uid); bind it nosuid (`mount --bind DIR DIR && mount -o remount,bind,nosuid DIR`) \
             or mount it read-only",
        ));
    }
    Ok(())
}

fn check_target(mount: &MountSpec) -> Result<(), ProviderError> {
    let target = Path::new(&mount.target);
    let bad = |reason: &str| refuse(&mount.source, format!("target `{}` {reason}", mount.target));
    if !target.is_absolute() {
        return Err(bad("must be an absolute path in the guest"));
    }
    if target
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(bad("must not contain `..`"));
    }
    if target == Path::new("/") {
        return Err(bad("must not be the guest's root"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(dir: &Path) -> MountPolicy {
        let roots = dir.join("roots");
        fs::create_dir_all(roots.join("repo/sub")).unwrap_or_else(|e| panic!("{e}"));
        fs::write(roots.join("repo/sub/file"), b"hello").unwrap_or_else(|e| panic!("{e}"));
        MountPolicy {
            allowed_roots: vec![roots],
            staging_root: dir.join("staging"),
            ..MountPolicy::default()
        }
    }

    fn mount(source: PathBuf, read_only: bool) -> MountSpec {
        MountSpec {
            source,
            target: "/work".into(),
            read_only,
        }
    }

    #[test]
    fn read_only_mounts_are_staged_copies_in_a_private_root() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = policy(tmp.path());
        let devices = p
            .prepare("ab12", &[mount(tmp.path().join("roots/repo"), true)])
            .unwrap_or_else(|e| panic!("{e}"));
        let staged = PathBuf::from(&devices[0].source);
        assert!(staged.starts_with(tmp.path().join("staging/ab12")));
        assert_eq!(
            fs::read(staged.join("sub/file")).ok(),
            Some(b"hello".to_vec())
        );
        let meta = fs::metadata(tmp.path().join("staging")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(meta.mode() & 0o777, 0o700);
        let marker = fs::metadata(tmp.path().join("staging").join(MARKER_NAME))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(marker.mode() & 0o777, 0o600);
        p.remove_staging("ab12").unwrap_or_else(|e| panic!("{e}"));
        assert!(!tmp.path().join("staging/ab12").exists());
    }

    #[test]
    fn read_write_mounts_are_the_resolved_source_on_nosuid_only() {
        if !corral_test_support::gate::root() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let nosuid = corral_test_support::Tmpfs::mount(tmp.path(), true);
        let p = policy(nosuid.path());
        let devices = p
            .prepare(
                "ab12",
                &[mount(nosuid.path().join("roots/repo/./sub"), false)],
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let canonical = fs::canonicalize(nosuid.path().join("roots/repo/sub"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(devices[0].source, canonical.display().to_string());
        // The same tree on a filesystem that honours setuid bits: refused.
        let suid = corral_test_support::Tmpfs::mount(tmp.path(), false);
        let p = policy(suid.path());
        let err = p
            .prepare("ab12", &[mount(suid.path().join("roots/repo"), false)])
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("nosuid")));
        // Read-only mounts are copies, so the source's options do not matter.
        assert!(
            p.prepare("ab12", &[mount(suid.path().join("roots/repo"), true)])
                .is_ok()
        );
    }

    #[test]
    fn symlinks_out_of_the_roots_are_refused() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = policy(tmp.path());
        let link = tmp.path().join("roots/escape");
        std::os::unix::fs::symlink("/etc", &link).unwrap_or_else(|e| panic!("{e}"));
        let err = p
            .prepare("ab12", &[mount(link, false)])
            .err()
            .map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("outside the allowed roots")));
        let err = p
            .prepare(
                "ab12",
                &[mount(tmp.path().join("roots/../roots/../.."), false)],
            )
            .err();
        assert!(matches!(err, Some(ProviderError::Mount { .. })));
    }

    #[test]
    fn the_copy_bound_holds() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = MountPolicy {
            max_copy_bytes: 4,
            ..policy(tmp.path())
        };
        let err = p
            .prepare("ab12", &[mount(tmp.path().join("roots/repo"), true)])
            .err();
        assert!(err.is_some_and(|e| e.to_string().contains("4-byte bound")));
    }

    #[test]
    fn a_foreign_staging_root_is_not_adopted() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = policy(tmp.path());
        fs::create_dir(&p.staging_root).unwrap_or_else(|e| panic!("{e}"));
        fs::set_permissions(&p.staging_root, fs::Permissions::from_mode(0o700))
            .unwrap_or_else(|e| panic!("{e}"));
        let err = p.ensure_staging_root().err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("no marker")));
        fs::set_permissions(&p.staging_root, fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        let err = p.ensure_staging_root().err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("mode 755")));
    }

    #[test]
    fn guest_ids_must_match_the_process() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = MountPolicy {
            guest_uid: effective_ids().0.wrapping_add(1),
            ..policy(tmp.path())
        };
        let err = p
            .prepare("ab12", &[mount(tmp.path().join("roots/repo"), true)])
            .err();
        assert!(err.is_some_and(|e| e.to_string().contains("configure the guest uid/gid")));
    }

    #[test]
    fn targets_must_be_absolute_and_not_root() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = policy(tmp.path());
        for target in ["work", "/", "/a/../b"] {
            let m = MountSpec {
                target: target.into(),
                ..mount(tmp.path().join("roots/repo"), false)
            };
            assert!(p.prepare("ab12", &[m]).is_err(), "{target}");
        }
    }
}
