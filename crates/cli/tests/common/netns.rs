//! A NAMED network namespace for one test: an anonymous namespace made on a
//! throwaway thread and bind-mounted at /run/netns/<unique>, exactly what
//! `ip netns add` makes, so `corral --netns NAME` is exercised by name.
//! Dropping the guard unmounts and removes the name; the kernel then frees
//! the namespace and everything in it.

use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A named network namespace that exists while this value lives.
#[derive(Debug)]
pub struct NamedNetns {
    name: String,
    path: PathBuf,
}

impl NamedNetns {
    /// Create `/run/netns/corral-e2e-<pid>-<n>`.
    pub fn new() -> Self {
        let name = format!(
            "corral-e2e-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let dir = Path::new("/run/netns");
        std::fs::create_dir_all(dir).expect("create /run/netns");
        let path = dir.join(&name);
        std::fs::File::create(&path).expect("create the mount point");
        let target = CString::new(path.as_os_str().as_encoded_bytes()).expect("no NUL in path");
        std::thread::spawn(move || {
            // SAFETY: unshare changes only this throwaway thread's namespace.
            let rc = unsafe { libc::unshare(libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "unshare: {}", std::io::Error::last_os_error());
            let src = c"/proc/thread-self/ns/net";
            // SAFETY: both pointers are valid NUL-terminated strings for the
            // duration of the call; fstype and data may be null for a bind.
            let rc = unsafe {
                libc::mount(
                    src.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            };
            assert_eq!(rc, 0, "bind mount: {}", std::io::Error::last_os_error());
        })
        .join()
        .expect("namespace thread");
        Self { name, path }
    }

    /// The name to pass to `--netns`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The bind-mounted path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Run a program inside the namespace (test tooling such as `nft`).
    pub fn exec(&self, program: &str, args: &[&str]) -> std::process::Output {
        std::process::Command::new("nsenter")
            .arg(format!("--net={}", self.path.display()))
            .arg(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("nsenter {program}: {e}"))
    }
}

impl Drop for NamedNetns {
    fn drop(&mut self) {
        if let Ok(c) = CString::new(self.path.as_os_str().as_encoded_bytes()) {
            // SAFETY: a valid NUL-terminated path; MNT_DETACH cannot touch
            // anything but this mount.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
