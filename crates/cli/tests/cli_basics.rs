//! The parts of the CLI every command shares: version, help, completions, the
//! man page, config import, and the privilege message.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{corral, corral_in};

#[test]
fn version_and_help() {
    let run = corral(&["--version"]).expect_code(0);
    assert!(run.stdout.starts_with("corral "), "{}", run.stdout);
    let run = corral(&["host", "--help"]).expect_code(0);
    for verb in ["plan", "apply", "status", "verify", "teardown", "refresh"] {
        assert!(run.stdout.contains(verb), "host --help lacks {verb}");
    }
}

#[test]
fn completions_for_bash_and_zsh() {
    let run = corral(&["completions", "bash"]).expect_code(0);
    assert!(run.stdout.contains("complete -F"), "{}", run.stdout);
    assert!(run.stdout.contains("drill"));
    let run = corral(&["completions", "zsh"]).expect_code(0);
    assert!(run.stdout.starts_with("#compdef corral"), "{}", run.stdout);
}

#[test]
fn man_page_renders() {
    let run = corral(&["man"]).expect_code(0);
    assert!(run.stdout.contains(".TH corral 1"), "{}", run.stdout);
    assert!(run.stdout.contains("corral\\-drill(1)"));
    let dir = tempfile::tempdir().unwrap();
    corral(&["man", "--out-dir", dir.path().to_str().unwrap()]).expect_code(0);
    assert!(dir.path().join("corral-host-verify.1").exists());
}

#[test]
fn config_import_round_trips_through_check() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("networks.conf"),
        "# legacy format\nisolated corral-iso 10.70.1.0/24 -\nweb corral-web 10.70.2.0/24 internet\napi corral-api 10.70.3.0/24 api.example.com,203.0.113.5:443/tcp\n",
    )
    .unwrap();
    let run = corral_in(Some(dir.path()), &["config", "import", "networks.conf"]).expect_code(0);
    for needle in [
        "corral-iso",
        "mode = \"internet\"",
        "api.example.com",
        "203.0.113.5:443/tcp",
    ] {
        assert!(
            run.stdout.contains(needle),
            "import lacks {needle}:\n{}",
            run.stdout
        );
    }
    corral_in(
        Some(dir.path()),
        &["config", "import", "networks.conf", "-o", "corral.toml"],
    )
    .expect_code(0);
    let run = corral_in(Some(dir.path()), &["config", "check", "corral.toml"]).expect_code(0);
    assert!(run.stdout.contains("3 profiles"), "{}", run.stdout);
    // Both files list the same profiles.
    let a = corral_in(
        Some(dir.path()),
        &["profiles", "--networks-conf", "networks.conf", "--json"],
    )
    .json();
    let b = corral_in(
        Some(dir.path()),
        &["profiles", "--config", "corral.toml", "--json"],
    )
    .json();
    assert_eq!(a["profiles"], b["profiles"]);
}

#[test]
fn quiet_check_prints_nothing_on_success() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("n.conf"), "a corral-a 10.71.0.0/24 -\n").unwrap();
    let run = corral_in(Some(dir.path()), &["--quiet", "config", "check", "n.conf"]).expect_code(0);
    assert_eq!(run.stdout, "");
}

/// Without CAP_NET_ADMIN (root with an empty bounding set), a host command
/// names the missing capability and the remedy, and exits 1.
#[test]
fn missing_capability_is_named() {
    if !corral_test_support::gate::root() {
        return;
    }
    for args in [
        &["host", "status"][..],
        &["host", "apply"][..],
        &["host", "teardown"][..],
        &["drill"][..],
    ] {
        let out = std::process::Command::new("setpriv")
            .args(["--bounding-set=-all", "--inh-caps=-all", common::CORRAL])
            .args(args)
            .env("NO_COLOR", "1")
            .output()
            .expect("setpriv (util-linux) runs");
        let run = common::Run::from(out);
        assert_eq!(run.code, Some(1), "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("CAP_NET_ADMIN"),
            "{args:?}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("run it as root"),
            "{args:?}: {}",
            run.stderr
        );
    }
}
