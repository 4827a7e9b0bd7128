//! A tmpfs mounted for one test (nosuid or not), unmounted on drop: tests
//! about what a filesystem's mount options allow need both kinds, and a
//! machine's own /tmp may be either.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs; unmounted (lazily) and its mount point removed on drop.
#[derive(Debug)]
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a fresh tmpfs (mode 0755) at a new directory under `parent`,
    /// with `nosuid` when asked, and `suid` explicitly otherwise. Needs
    /// root; panics if the mount fails.
    pub fn mount(parent: &Path, nosuid: bool) -> Tmpfs {
        let dir = parent.join(format!(
            "tmpfs-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos())
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
        let opts = if nosuid {
            "nosuid,mode=0755"
        } else {
            "suid,mode=0755"
        };
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mount: {e}"));
        assert!(
            out.status.success(),
            "mount tmpfs at {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Tmpfs { dir }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        let _ = std::fs::remove_dir(&self.dir);
    }
}
