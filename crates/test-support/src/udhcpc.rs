//! busybox `udhcpc` as the DHCP tests run it: a real client (its client
//! identifier included) whose script records what it was given, so a test
//! reads the address bound rather than parsing the client's chatter.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// One client's script and log, in a directory the test owns.
#[derive(Debug)]
pub struct Udhcpc {
    script: PathBuf,
    log: PathBuf,
}

impl Udhcpc {
    /// Writes the script into `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        let (script, log) = (dir.join("udhcpc.sh"), dir.join("udhcpc.log"));
        crate::write_executable(
            &script,
            format!("#!/bin/sh\necho \"$1 ip=$ip\" >> {}\n", log.display()),
        );
        Self { script, log }
    }

    /// `udhcpc` on `iface`, `tries` DISCOVERs a second apart, quitting
    /// once bound or out of tries; run it in the client's namespace. The
    /// log of an earlier run is cleared first.
    pub fn command(&self, iface: &str, tries: u32) -> Command {
        let _ = std::fs::remove_file(&self.log);
        let mut cmd = Command::new("busybox");
        cmd.args(["udhcpc", "-i", iface, "-n", "-q", "-f", "-T", "1", "-t"])
            .arg(tries.to_string())
            .arg("-s")
            .arg(&self.script)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    /// The address the last run bound, if a lease came.
    pub fn bound(&self) -> Option<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("bound ip="))
            .map(str::to_owned)
    }
}
