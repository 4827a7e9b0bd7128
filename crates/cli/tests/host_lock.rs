//! `corral host apply` and `corral host refresh` take the state directory's
//! host lock, so a timed refresh never interleaves with an apply: while the
//! test holds the lock, each command waits on it (seen in /proc/locks) and
//! finishes only after the lock is let go.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::{Child, Command, Stdio};

use common::CORRAL;
use common::netns::NamedNetns;
use corral_state_files::{HOST_LOCK, StateDir};

fn spawn(verb: &str, ns: &NamedNetns, state: &std::path::Path) -> Child {
    Command::new(CORRAL)
        .args(["host", verb, "--netns", ns.name(), "--state-dir"])
        .arg(state)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until `child` blocks on an flock (a `->` line of /proc/locks
/// with its pid); false when it exits first.
fn blocks_on_a_lock(child: &mut Child) -> bool {
    let pid = child.id().to_string();
    loop {
        let locks = std::fs::read_to_string("/proc/locks").unwrap();
        let waiting = locks.lines().any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&"->") && f.get(2) == Some(&"FLOCK") && f.get(5) == Some(&pid.as_str())
        });
        if waiting {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn finish(child: Child, verb: &str) {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{verb} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn apply_and_refresh_wait_for_the_host_lock() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = NamedNetns::new();
    let state = tempfile::tempdir().unwrap();
    let dir = StateDir::open(state.path()).unwrap();

    let held = dir.lock(HOST_LOCK).unwrap();
    let mut apply = spawn("apply", &ns, state.path());
    assert!(
        blocks_on_a_lock(&mut apply),
        "apply ran without the host lock"
    );
    assert!(dir.read("applied.json").unwrap().is_none());
    drop(held);
    finish(apply, "apply");
    assert!(dir.read("applied.json").unwrap().is_some());

    let held = dir.lock(HOST_LOCK).unwrap();
    let mut refresh = spawn("refresh", &ns, state.path());
    assert!(
        blocks_on_a_lock(&mut refresh),
        "refresh ran without the host lock"
    );
    drop(held);
    finish(refresh, "refresh");

    let out = Command::new(CORRAL)
        .args(["host", "teardown", "--netns", ns.name(), "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
