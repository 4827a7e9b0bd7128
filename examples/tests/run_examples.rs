//! Every example runs and does what docs/examples.md says.

use std::process::{Command, Output};

use corral_egress::host::plan_settings;
use corral_egress::plan::{HostPlan, Resolution};
use corral_sandbox_core::Config;

fn run(exe: &str, args: &[&str]) -> Output {
    Command::new(exe)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {exe}: {e}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn plan_nft_prints_the_library_rendering_of_the_builtin_profiles() {
    let out = run(env!("CARGO_BIN_EXE_plan_nft"), &["--offline"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let config = Config::builtin_default();
    let plan = HostPlan::build(
        &config.profiles,
        &plan_settings(&config.host),
        &Resolution::new(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let stdout = text(&out.stdout);
    assert!(stdout.ends_with(&plan.render_nft()), "{stdout}");
    assert!(
        stdout.starts_with("# 3 profile(s), 3 bridge(s)"),
        "{stdout}"
    );
}

#[test]
fn plan_nft_refuses_an_invalid_file_with_its_problems() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "[[profile]]\nname = \"x\"\nbridge = \"br0\"\nsubnet = \"10.0.0.0/33\"\nmode = \"none\"\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = run(
        env!("CARGO_BIN_EXE_plan_nft"),
        &[file.to_str().unwrap_or_default(), "--offline"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("bad.toml"), "{stderr}");
}

#[test]
fn platform_prints_the_matrix_and_this_hosts_selection() {
    let out = run(env!("CARGO_BIN_EXE_platform"), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // 3 host OSes × 8 kinds, plus the header.
    let rows = stdout
        .lines()
        .take_while(|l| !l.is_empty())
        .filter(|l| l.contains("supported") || l.contains("refused"))
        .count();
    assert_eq!(rows, 24, "{stdout}");
    assert!(stdout.contains("profiled work on this host"), "{stdout}");
    if cfg!(target_os = "linux") {
        assert!(
            stdout.contains("incus             ok: enforced (this host)"),
            "{stdout}"
        );
    }
}

#[test]
fn placement_demotes_a_leaking_kind_and_readmits_it_after_the_cool_down() {
    let out = run(env!("CARGO_BIN_EXE_placement"), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for expected in [
        "candidate incus-remote   trust: enforced",
        "first sandbox: Failed",
        "skipped   tart: demoted after a failed verification",
        "after the cool-down tart is Probation",
        "second sandbox: Passed",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
}

#[test]
fn incus_sandbox_says_clearly_when_there_is_no_daemon() {
    let out = run(
        env!("CARGO_BIN_EXE_incus_sandbox"),
        &["--socket", "/nonexistent/corral/unix.socket", "--", "true"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("no Incus daemon socket at /nonexistent/corral/unix.socket"),
        "{stderr}"
    );
}

/// With a daemon (as in CI), the example really creates, runs and deletes.
#[test]
fn incus_sandbox_runs_a_command_in_a_real_container() {
    if corral_test_support::gate::incus().is_none() {
        return;
    }
    let out = run(
        env!("CARGO_BIN_EXE_incus_sandbox"),
        &[
            "--",
            "sh",
            "-c",
            "echo \"$0 from $(hostname)\"; exit 3",
            "a b",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("a b from "), "{stdout}");
    assert!(stderr.contains("deleted"), "{stderr}");
}
