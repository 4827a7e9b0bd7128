//! The escape hatch end to end: `corral incus NAME [--i-know] -- ARGS…`
//! with the real `corral` binary, Incus's own client and the real daemon.
//! What the hatch refused is checked through Incus's API (the instance's
//! configuration unchanged). Every instance a test names is force-deleted
//! by a guard when the test ends.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::sandboxes::{Cleanup, in_state, incus, incus_status, instance, unique};
use common::{Run, corral};
use corral_provider_incus::TEST_IMAGE_ALIAS;

/// `corral incus NAME --state-dir S [FLAGS…] -- ARGS…`.
fn hatch(state: &Path, name: &str, flags: &[&str], args: &[&str]) -> Run {
    let mut all = vec!["incus", name, "--state-dir", state.to_str().unwrap()];
    all.extend(flags);
    all.push("--");
    all.extend(args);
    corral(&all)
}

/// A running sandbox from the test image, without a network.
fn plain(state: &Path, name: &str) {
    in_state(
        state,
        &["new", name, "--no-network", "--image", TEST_IMAGE_ALIAS],
    )
    .expect_code(0);
}

#[test]
fn the_escape_hatch_runs_incus_on_its_own_sandbox_only() {
    let Some(client) = incus() else { return };
    if !corral_test_support::gate::tool("incus", "incus-client") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let (name, other, foreign) = (unique("hatch"), unique("hatch-other"), unique("hatch-x"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone(), other.clone(), foreign.clone()],
    };
    plain(s, &name);
    plain(s, &other);
    // An instance of corral's project corral did not make.
    let made = Command::new("incus")
        .args(["--project", "corral", "init", TEST_IMAGE_ALIAS, &foreign])
        .args(["-s", "default"])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");

    // Allowed: Incus's own output, its exit status passed through.
    let run = hatch(s, &name, &[], &["info", &name]).expect_code(0);
    assert!(
        run.stdout.contains(&format!("Name: {name}")),
        "{}",
        run.stdout
    );
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    hatch(s, &name, &[], &["exec", &name, "--", "sh", "-c", "exit 7"]).expect_code(7);

    // Another instance in the arguments, corral's or not: refused, even
    // with --i-know.
    for (arg, named) in [
        (other.clone(), other.as_str()),
        (format!("{foreign}/snap0"), foreign.as_str()),
        (format!("local:{other}"), other.as_str()),
    ] {
        for flags in [&[][..], &["--i-know"]] {
            let run = hatch(s, &name, flags, &["info", &name, &arg]).expect_code(2);
            assert!(
                run.stderr
                    .contains(&format!("names instance `{named}`, not `{name}`")),
                "{}",
                run.stderr
            );
        }
    }
    // The sandbox itself must be named.
    let run = hatch(s, &name, &["--i-know"], &["list"]).expect_code(2);
    assert!(run.stderr.contains("do not name"), "{}", run.stderr);

    // A NAME corral did not make: refused before anything runs.
    let run = hatch(s, &foreign, &[], &["info", &foreign]).expect_code(1);
    assert!(
        run.stderr.contains("was not created by corral"),
        "{}",
        run.stderr
    );
    assert!(!run.stdout.contains("Name:"), "{}", run.stdout);

    // Isolation moved without --i-know: refused, nothing changed.
    let run = hatch(
        s,
        &name,
        &[],
        &["config", "set", &name, "security.privileged", "true"],
    )
    .expect_code(2);
    assert!(run.stderr.contains("security.privileged"), "{}", run.stderr);
    assert!(run.stderr.contains("--i-know"), "{}", run.stderr);
    let config = instance(&client, &name).unwrap().config;
    assert_eq!(config.get("security.privileged"), None, "{config:?}");

    // With --i-know a (read-only) isolation word runs, with a warning
    // naming what it moves.
    let run = hatch(
        s,
        &name,
        &["--i-know"],
        &["config", "device", "show", &name],
    )
    .expect_code(0);
    assert!(
        run.stderr
            .contains("warning: --i-know: `device` moves isolation"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("a disk exposes host paths"),
        "{}",
        run.stderr
    );

    // Every run is recorded, refused ones are not.
    let events = in_state(s, &["events", "--sandbox", &name, "--json"])
        .expect_code(0)
        .json();
    let hatches: Vec<&serde_json::Value> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "hatch")
        .collect();
    assert_eq!(hatches.len(), 3, "{events}");
    assert_eq!(
        hatches[2]["moved"],
        serde_json::json!(["device"]),
        "{events}"
    );
}

/// Every start goes through corral's gate: a stopped sandbox stays stopped
/// through `corral incus NAME -- start NAME` (and the other words that
/// start it, with --i-know, after a global flag), and through an alias of
/// the user's client that hides a start behind an allowed word. Controls:
/// the same alias in Incus's own client starts the instance, and
/// `corral start NAME` starts it.
#[test]
fn the_escape_hatch_never_starts_a_sandbox() {
    let Some(client) = incus() else { return };
    if !corral_test_support::gate::tool("incus", "incus-client") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let name = unique("hatch-start");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    plain(s, &name);
    in_state(s, &["stop", &name]).expect_code(0);
    let status = || incus_status(&client, &name).unwrap();
    assert_eq!(status(), "Stopped");

    for (flags, args, instead) in [
        (
            &[][..],
            vec!["start", &name],
            format!("corral start {name}"),
        ),
        (
            &["--i-know"],
            vec!["start", &name],
            format!("corral start {name}"),
        ),
        (
            &["--i-know"],
            vec!["-q", "start", &name],
            format!("corral start {name}"),
        ),
        (
            &[],
            vec!["restart", &name],
            format!("corral restart {name}"),
        ),
        (
            &["--i-know"],
            vec!["snapshot", "restore", &name, "snap0"],
            format!("corral restore {name} SNAP"),
        ),
        (
            &["--i-know"],
            vec!["config", "set", &name, "boot.autostart=true"],
            format!("corral start {name}"),
        ),
    ] {
        let run = hatch(s, &name, flags, &args).expect_code(2);
        assert!(
            run.stderr.contains("outside corral's start gate") && run.stderr.contains(&instead),
            "{args:?}: {}",
            run.stderr
        );
        assert_eq!(status(), "Stopped", "{args:?}");
    }

    // A user's alias shadowing `info` with `start`, in a client
    // configuration of the test's own.
    let conf = tempfile::tempdir().unwrap();
    let aliased = || {
        let mut cmd = Command::new("incus");
        cmd.env("INCUS_CONF", conf.path());
        cmd
    };
    let added = aliased()
        .args(["alias", "add", "info", "start"])
        .output()
        .unwrap();
    assert!(added.status.success(), "{added:?}");
    let run: Run = Command::new(common::CORRAL)
        .args(["incus", &name, "--state-dir", s.to_str().unwrap(), "--"])
        .args(["info", &name])
        .env("INCUS_CONF", conf.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
        .into();
    let run = run.expect_code(0);
    assert!(run.stdout.contains(&format!("Name: {name}")), "{run:?}");
    assert_eq!(status(), "Stopped", "the alias ran through the hatch");
    // Control: the alias does start it in Incus's own client.
    let started = aliased()
        .args(["--force-local", "--project", "corral", "info", &name])
        .output()
        .unwrap();
    assert!(started.status.success(), "{started:?}");
    assert_eq!(
        status(),
        "Running",
        "the alias did not start it: {started:?}"
    );
    in_state(s, &["stop", &name]).expect_code(0);
    assert_eq!(status(), "Stopped");

    // Control: corral's own verb starts it.
    in_state(s, &["start", &name]).expect_code(0);
    assert_eq!(status(), "Running");
}
