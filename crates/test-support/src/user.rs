//! A real second Unix user for tests about what a local, unprivileged user
//! can do to corral (plant files in its state directory, run files a
//! sandbox left in a mount). Each test creates its own (`useradd
//! --system`, a name unique to the process and test) and the guard deletes
//! it on drop, so parallel test binaries never share or remove each
//! other's user.

use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::gate;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A local user other than root, deleted on drop.
#[derive(Debug)]
pub struct TestUser {
    /// Login name.
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
}

impl TestUser {
    /// A fresh system user (no home, no login shell). Needs root and
    /// `useradd`: under CI their absence fails the test, elsewhere it is a
    /// counted skip (`None`).
    pub fn create() -> Option<TestUser> {
        if !gate::root() || !tool_exists("useradd", "passwd") {
            return None;
        }
        let name = format!(
            "corral-t{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        // useradd refuses while another holds /etc/passwd's lock: retry.
        let mut tries = 0;
        loop {
            let out = Command::new("useradd")
                .args(["--system", "--no-create-home", "--user-group"])
                .args(["--shell", "/usr/sbin/nologin", &name])
                .output()
                .unwrap_or_else(|e| panic!("cannot run useradd: {e}"));
            if out.status.success() {
                break;
            }
            tries += 1;
            assert!(
                tries < 50,
                "useradd {name} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let id = |flag: &str| -> u32 {
            let out = Command::new("id")
                .args([flag, &name])
                .output()
                .unwrap_or_else(|e| panic!("cannot run id: {e}"));
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("id {flag} {name}: {e}"))
        };
        let user = TestUser {
            uid: id("-u"),
            gid: id("-g"),
            name,
        };
        assert_ne!(user.uid, 0, "the test user must not be root");
        Some(user)
    }

    /// `program` set up to run as this user (supplementary groups dropped).
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.uid(self.uid).gid(self.gid).current_dir("/");
        cmd
    }

    /// Runs `sh -c script` as this user and returns its stdout; panics
    /// unless it succeeds.
    pub fn sh(&self, script: &str) -> String {
        let out = self
            .command("/bin/sh")
            .arg("-c")
            .arg(script)
            .output()
            .unwrap_or_else(|e| panic!("cannot run a shell as {}: {e}", self.name));
        assert!(
            out.status.success(),
            "`{script}` as {} failed: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        for _ in 0..50 {
            match Command::new("userdel").arg(&self.name).output() {
                Ok(out) if out.status.success() => return,
                Ok(_) => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => {
                    eprintln!("cannot delete test user {}: {e}", self.name);
                    return;
                }
            }
        }
        eprintln!("could not delete test user {}", self.name);
    }
}

fn tool_exists(program: &str, package: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
        || ["/usr/sbin", "/sbin"]
            .iter()
            .any(|d| std::path::Path::new(d).join(program).is_file());
    if !found {
        gate::skip(format!("needs `{program}` (Debian package {package})"));
    }
    found
}
