//! The recording fake-binary harness the CLI-driven providers are tested
//! through (their real tools cannot run on corral's build machines).
//!
//! A [`FakeTool`] is a private temporary directory holding a `bin/` (put
//! first on the runner's `PATH`) and a `state/` the fake scripts write to.
//! A provider's test harness installs its own fake scripts (shell, with
//! `@STATE@`, `@BIN@` and `@RECORD@` filled in) and reads back what they
//! recorded: every call as `state/call.N` (argv, NUL-terminated, numbered
//! in `state/count`). Canned answers live in `state/resp/`.
//!
//! Only built with the `test-support` feature.

// Test support: a failed setup step should abort the test loudly.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use corral_sandbox_core::ProfileSet;
use corral_sandbox_core::profile::{BlockAction, DnsPolicy, EgressMode, Profile};

use crate::process::ProcessRunner;
use crate::staging::{OwnershipStamp, STAMP_FILE, Staging};

/// Shell lines that record the script's argv as the next `call.N` in the
/// state directory `$d` (and leave the number in `$n`); a fake script
/// includes them with `@RECORD@`.
pub const RECORD_CALL: &str = r#"n=$(cat "$d/count" 2>/dev/null || echo 0)
n=$((n + 1))
echo "$n" > "$d/count"
: > "$d/call.$n"
for a in "$@"; do printf '%s\0' "$a" >> "$d/call.$n"; done"#;

/// A directory of fake programs and the state they record.
#[derive(Debug)]
pub struct FakeTool {
    _tmp: tempfile::TempDir,
    /// The temporary directory; tests put the staging root under it.
    pub root: PathBuf,
    state: PathBuf,
    bin: PathBuf,
}

impl Default for FakeTool {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeTool {
    /// An empty harness: `bin/`, `state/` and `state/resp/`.
    pub fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_owned();
        let state = root.join("state");
        let bin = root.join("bin");
        fs::create_dir_all(state.join("resp")).unwrap();
        fs::create_dir_all(&bin).unwrap();
        Self {
            _tmp: tmp,
            root,
            state,
            bin,
        }
    }

    /// Install `script` as the executable `bin/<name>`, with `@STATE@` and
    /// `@BIN@` replaced by the two directories and `@RECORD@` by
    /// [`RECORD_CALL`].
    pub fn install(&self, name: &str, script: &str) {
        let body = script
            .replace("@RECORD@", RECORD_CALL)
            .replace("@STATE@", self.state.to_str().unwrap())
            .replace("@BIN@", self.bin.to_str().unwrap());
        // Written by a child process: see `corral_test_support::exe`.
        corral_test_support::write_executable(&self.bin.join(name), body);
    }

    /// Install a copy of the program at `from` as `bin/<name>` (a process
    /// then shows up under that name in the process table).
    pub fn install_copy(&self, name: &str, from: &Path) {
        corral_test_support::copy_executable(from, &self.bin.join(name));
    }

    /// Take `bin/<name>` away again.
    pub fn uninstall(&self, name: &str) {
        fs::remove_file(self.bin.join(name)).unwrap();
    }

    /// The state directory the fakes write to.
    pub fn state(&self) -> &Path {
        &self.state
    }

    /// The directory of the fake programs.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// A runner whose `PATH` starts with the fake programs.
    pub fn runner(&self) -> ProcessRunner {
        ProcessRunner::with_search_path(format!("{}:/usr/bin:/bin", self.bin.display()))
    }

    /// The canned-answer file `resp/<name>`.
    pub fn resp(&self, name: &str) -> PathBuf {
        self.state.join("resp").join(name)
    }

    /// Answer `sub` with `out` on stdout and exit `code` (`resp/<sub>.out`
    /// and `.code`).
    pub fn respond(&self, sub: &str, out: &str, code: i32) {
        fs::write(self.resp(&format!("{sub}.out")), out).unwrap();
        fs::write(self.resp(&format!("{sub}.code")), code.to_string()).unwrap();
    }

    /// Answer `sub` with `err` on stderr, nothing on stdout, and exit `code`.
    pub fn fail(&self, sub: &str, err: &str, code: i32) {
        let _ = fs::remove_file(self.resp(&format!("{sub}.out")));
        fs::write(self.resp(&format!("{sub}.err")), err).unwrap();
        fs::write(self.resp(&format!("{sub}.code")), code.to_string()).unwrap();
    }

    /// Answer `sub` with `out`, `err` and exit `code`.
    pub fn canned(&self, sub: &str, out: &str, err: &str, code: i32) {
        fs::write(self.resp(&format!("{sub}.out")), out).unwrap();
        fs::write(self.resp(&format!("{sub}.err")), err).unwrap();
        fs::write(self.resp(&format!("{sub}.code")), code.to_string()).unwrap();
    }

    /// Forget every canned answer (and delay) for `sub`.
    pub fn uncan(&self, sub: &str) {
        for ext in ["out", "err", "code", "sleep"] {
            let _ = fs::remove_file(self.resp(&format!("{sub}.{ext}")));
        }
    }

    /// Make `sub` sleep `secs` seconds before answering (`resp/<sub>.sleep`).
    pub fn sleep(&self, sub: &str, secs: u32) {
        fs::write(self.resp(&format!("{sub}.sleep")), secs.to_string()).unwrap();
    }

    /// How many calls were recorded.
    pub fn count(&self) -> usize {
        fs::read_to_string(self.state.join("count"))
            .map(|s| s.trim().parse().unwrap())
            .unwrap_or(0)
    }

    /// The NUL-terminated words recorded in `path`.
    pub fn words(path: &Path) -> Vec<String> {
        let raw = fs::read(path).unwrap();
        let mut words: Vec<String> = raw
            .split(|b| *b == 0)
            .map(|w| String::from_utf8(w.to_vec()).unwrap())
            .collect();
        // Every word ends with a NUL, so the split leaves one empty tail.
        words.pop();
        words
    }

    /// Every recorded argv (without the program), in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        (1..=self.count())
            .map(|n| Self::words(&self.state.join(format!("call.{n}"))))
            .collect()
    }

    /// A pid a fake wrote to `state/<file>`, if any.
    pub fn read_pid(&self, file: &str) -> Option<i32> {
        fs::read_to_string(self.state.join(file))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }
}

/// A profile set with one internet-mode profile `dev` on bridge `cb-dev`
/// with `subnet_v4`.
pub fn dev_profiles(subnet_v4: &str) -> ProfileSet {
    ProfileSet::new(vec![Profile {
        name: "dev".parse().unwrap(),
        bridge: "cb-dev".parse().unwrap(),
        subnet_v4: subnet_v4.parse().unwrap(),
        subnet_v6: None,
        mode: EgressMode::Internet,
        allow: vec![],
        block: BlockAction::Reject,
        dns: DnsPolicy::Gateway,
        allow_unresolved: false,
        learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
        approvals: Default::default(),
        flows: Default::default(),
        deny: Vec::new(),
    }])
    .unwrap()
}

/// The JSON `stamp` is stored as, read back raw from a throwaway staging
/// directory (to pin a provider's on-disk stamp format).
pub fn stamp_json<S: OwnershipStamp>(stamp: &S) -> serde_json::Value {
    let tmp = tempfile::tempdir().unwrap();
    let staging = Staging::<S>::open(tmp.path().join("s")).unwrap();
    staging.create_dir(stamp.vm()).unwrap();
    staging.write_stamp(stamp).unwrap();
    let raw = fs::read(staging.dir(stamp.vm()).join(STAMP_FILE)).unwrap();
    serde_json::from_slice(&raw).unwrap()
}

/// Owned strings, for comparing argvs.
pub fn sv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

/// The permission bits of `path`.
pub fn mode(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::runner::{Invocation, Runner};

    #[tokio::test]
    async fn a_fake_records_every_argv_and_answers_from_resp() {
        let fake = FakeTool::new();
        fake.install(
            "tool",
            "#!/bin/sh\nd='@STATE@'\n@RECORD@\ncat \"$d/resp/$1.out\" 2>/dev/null\nexit 0\n",
        );
        fake.respond("hello", "hi", 0);
        let runner = fake.runner();
        let run = |argv: &[&str]| Invocation::new(sv(argv), Duration::from_secs(10));
        let out = runner
            .run(&run(&["tool", "hello", "two words"]))
            .await
            .unwrap();
        assert_eq!(out.stdout, b"hi");
        runner.run(&run(&["tool", "bye", ""])).await.unwrap();
        fake.canned("hello", "", "", 0);
        assert!(
            runner
                .run(&run(&["tool", "hello"]))
                .await
                .unwrap()
                .stdout
                .is_empty()
        );
        fake.uncan("hello");
        fake.fail("hello", "no", 1);
        assert!(!fake.resp("hello.out").exists());
        assert_eq!(fs::read_to_string(fake.resp("hello.err")).unwrap(), "no");
        assert_eq!(fake.count(), 3);
        assert_eq!(
            fake.calls(),
            vec![
                sv(&["hello", "two words"]),
                sv(&["bye", ""]),
                sv(&["hello"])
            ]
        );
        assert_eq!(mode(&fake.bin().join("tool")), 0o755);
        fake.uninstall("tool");
        assert!(runner.run(&run(&["tool"])).await.is_err());
    }

    #[test]
    fn profiles_and_pids() {
        let set = dev_profiles("10.9.0.0/24");
        assert_eq!(set.get("dev").unwrap().gateway_v4().to_string(), "10.9.0.1");
        let fake = FakeTool::new();
        assert_eq!(fake.read_pid("x.pid"), None);
        std::fs::write(fake.state().join("x.pid"), "42\n").unwrap();
        assert_eq!(fake.read_pid("x.pid"), Some(42));
    }
}
