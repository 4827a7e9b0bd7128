//! A recording fake `tart` (and a fake `softnet`) for the provider tests,
//! on the shared harness of `corral-provider-support` (`test-support`).
//!
//! The fake keeps a tiny VM store in its state directory: `clone` makes a
//! VM, `run` marks it running, starts a `softnet` child (a copy of `sleep`
//! named `softnet`, so the process table shows that name) and stays in the
//! foreground like the real `tart run`; `stop` kills the run's process
//! group; `list` reports the store as JSON; `exec` runs the argv for real.
//! Calls are recorded as `call.N` (argv, NUL-terminated); `run`, which
//! races with later calls, records to `run.argv` instead. Canned answers:
//! `resp/<subcommand>.{out,err,code,sleep}` (with `.code` present the
//! canned answer replaces the behaviour); `resp/run.nosoftnet` makes `run`
//! start without Softnet.

use std::fs;
use std::ops::Deref;
use std::path::Path;

use corral_provider_support::testing::FakeTool;

// A file of its own, so corral's end-to-end conformance suite (the
// `corral-tests` crate) runs the very same fake.
const FAKE_TART: &str = include_str!("tart.sh");

/// The shared harness with a fake `tart` and `softnet` installed; it
/// derefs to [`FakeTool`] for `runner`, `calls`, `count`, `sleep`, `root`.
pub struct Fake {
    tool: FakeTool,
}

impl Deref for Fake {
    type Target = FakeTool;
    fn deref(&self) -> &FakeTool {
        &self.tool
    }
}

impl Fake {
    pub fn new() -> Self {
        let tool = FakeTool::new();
        tool.install("tart", FAKE_TART);
        tool.install_copy("softnet", Path::new("/bin/sleep"));
        Self { tool }
    }

    pub fn remove_softnet(&self) {
        self.uninstall("softnet");
    }

    pub fn without_softnet_at_run(&self) {
        fs::write(self.resp("run.nosoftnet"), "").unwrap();
    }

    /// The argv of the last `run`, if any.
    pub fn run_argv(&self) -> Option<Vec<String>> {
        let path = self.state().join("run.argv");
        path.exists().then(|| FakeTool::words(&path))
    }

    pub fn softnet_pid(&self) -> Option<i32> {
        self.read_pid("softnet.pid")
    }

    pub fn run_pid(&self) -> Option<i32> {
        self.read_pid("run.pid")
    }

    pub fn alive(pid: i32) -> bool {
        Path::new(&format!("/proc/{pid}")).exists()
            && !fs::read_to_string(format!("/proc/{pid}/stat"))
                .unwrap_or_default()
                .contains(") Z ")
    }

    pub fn kill(pid: i32) {
        let _ = std::process::Command::new("/bin/kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        // Leave no fake VM processes behind.
        if let Some(pid) = self.run_pid() {
            let _ = std::process::Command::new("/bin/kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
    }
}
