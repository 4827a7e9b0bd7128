//! The systemd units in dist/systemd pass `systemd-analyze verify` with the
//! real binary in place of /usr/local/bin/corral. (Their command lines are
//! also parsed by a unit test in src/args.rs.)

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn units_pass_systemd_analyze_verify() {
    if !corral_test_support::gate::tool("systemd-analyze", "systemd") {
        return;
    }
    let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/systemd");
    let dir = tempfile::tempdir().unwrap();
    let mut units = Vec::new();
    for name in [
        "corral-host.service",
        "corral-refresh.service",
        "corral-refresh.timer",
        "corrald.service",
    ] {
        let text = std::fs::read_to_string(dist.join(name)).unwrap();
        // corrald is another package's binary: any existing executable
        // serves for verify; corral is the binary under test.
        let text = text
            .replace("/usr/local/bin/corrald", "/bin/true")
            .replace("/usr/local/bin/corral", common::CORRAL);
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        units.push(path);
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&units)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Units this host lacks (incus, multipass) are only ordering hints.
    let problems: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !l.contains("incus") && !l.contains("multipass"))
        .collect();
    assert!(
        out.status.success() && problems.is_empty(),
        "systemd-analyze verify:\n{stderr}"
    );
}
