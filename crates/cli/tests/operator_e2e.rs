//! What a new operator meets first, with the real `corral` binary against
//! the real Incus daemon: a missing image names the command that gets one,
//! `ls` shows a running sandbox's addresses, and a frozen sandbox can be
//! started (thawed), stopped and is described as frozen to `exec`.
//!
//! Every instance a test names is force-deleted by a guard when it ends;
//! instances are frozen and inspected through Incus's own API.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::corral;
use common::sandboxes::{
    Cleanup, in_lab, in_state, incus, incus_status, instance, plain, runtime, unique,
};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_tests::hostlab::HostLab;
use http::Method;
use serde_json::json;

/// An image alias no Incus holds: the first-run error names the image, the
/// project, and the `incus image copy` that gets it, with its quoting
/// intact; nothing is created. Control: the same command with the test
/// image makes the sandbox.
#[test]
fn a_missing_image_names_the_command_that_gets_one() {
    let Some(client) = incus() else { return };
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let (missing, made) = (unique("noimage"), unique("image"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![missing.clone(), made.clone()],
    };
    let image = "corral-test/no-such-image";
    let project = client.project().to_owned();
    let run = in_state(s, &["new", &missing, "--no-network", "--image", image]);
    assert_ne!(run.code, Some(0), "{run:?}");
    let want = format!(
        "image `{image}` is not in Incus project `{project}`; copy it in with \
         `incus image copy images:{image} local: --alias {image} --project {project}`, \
         or pass `--image` an alias that `incus image list --project {project}` shows"
    );
    assert!(run.stderr.contains(&want), "{}", run.stderr);
    assert!(!run.stderr.contains("does not exist"), "{}", run.stderr);
    assert!(
        instance(&client, &missing).is_none(),
        "an instance was made"
    );

    plain(s, &made);
    assert_eq!(incus_status(&client, &made).as_deref(), Some("Running"));
}

/// A running sandbox on a profile: `ls` (table and JSON) shows the address
/// its lease gave it, the one `info` reads too; stopped, it has none.
#[test]
fn ls_shows_the_addresses_of_running_sandboxes() {
    if !corral_test_support::gate::netns() {
        return;
    }
    if !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(client) = incus() else { return };
    let lab = HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let name = unique("addr");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    let made = in_lab(
        &lab,
        &[
            "new",
            &name,
            "--profile",
            "e2e",
            "--image",
            TEST_IMAGE_ALIAS,
            "--json",
        ],
    )
    .expect_code(0)
    .json();
    let lease = made["ready"]["lease"].as_str().unwrap().to_owned();

    let listed = |lab: &HostLab| {
        let all = in_lab(lab, &["ls", "--json"]).expect_code(0).json();
        all["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name.as_str())
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed: {all}"))
    };
    let row = listed(&lab);
    assert_eq!(row["state"], "running", "{row}");
    assert_eq!(row["addresses"], json!([lease]), "{row}");
    // Control: `info` reads the same runtime state.
    let info = in_lab(&lab, &["info", &name, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(info["addresses"], row["addresses"], "{info}");
    let table = in_lab(&lab, &["ls"]).expect_code(0).stdout;
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name.as_str()))
        .unwrap_or_else(|| panic!("{name} not in the table:\n{table}"));
    assert!(line.contains(&lease), "{line}");
    println!("$ corral ls\n{table}");

    in_lab(&lab, &["stop", &name, "--force"]).expect_code(0);
    let row = listed(&lab);
    assert_eq!(row["state"], "stopped", "{row}");
    assert_eq!(row["addresses"], json!([]), "{row}");
}

/// Freezes `name` behind corral's back.
fn freeze(client: &corral_provider_incus::IncusClient, name: &str) {
    runtime().block_on(async {
        client
            .run(
                Method::PUT,
                &format!("/1.0/instances/{name}/state"),
                Some(&json!({"action": "freeze"})),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
    });
    assert_eq!(incus_status(client, name).as_deref(), Some("Frozen"));
}

/// A frozen sandbox: `exec` says it is frozen and what to do; `start`
/// thaws it (it runs commands again); frozen again, a clean `stop` stops
/// it. Control: the same `exec` runs before the freeze and after the start.
#[test]
fn a_frozen_sandbox_is_started_by_start_and_stopped_by_stop() {
    let Some(client) = incus() else { return };
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let name = unique("frozen");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    plain(s, &name);
    corral(&["exec", &name, "-n", "--", "true"]).expect_code(0);

    freeze(&client, &name);
    let run = corral(&["exec", &name, "-n", "--", "true"]);
    assert_ne!(run.code, Some(0), "{run:?}");
    assert!(
        run.stderr.contains("while it is frozen")
            && run
                .stderr
                .contains(&format!("`corral start {name}` thaws it"))
            && !run.stderr.contains("start it first"),
        "{}",
        run.stderr
    );

    in_state(s, &["start", &name]).expect_code(0);
    assert_eq!(incus_status(&client, &name).as_deref(), Some("Running"));
    corral(&["exec", &name, "-n", "--", "true"]).expect_code(0);

    freeze(&client, &name);
    in_state(s, &["stop", &name]).expect_code(0);
    assert_eq!(incus_status(&client, &name).as_deref(), Some("Stopped"));
}

/// `corral log` says what it could not see: with no collector ever run it
/// says so; while a `corral log --follow` collects, it says nothing (the
/// control); once that stops, it says when the last one ran.
#[test]
fn log_says_when_no_collector_saw_the_network() {
    if !corral_test_support::gate::root() {
        return;
    }
    if incus().is_none() {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let note = |s: &std::path::Path| {
        let run = in_state(s, &["log"]).expect_code(0);
        run.stdout
            .lines()
            .find(|l| l.starts_with("note: "))
            .map(str::to_owned)
    };
    let never = note(s).unwrap_or_else(|| panic!("no note with no collector"));
    assert!(
        never.contains("no collector has run for this state directory")
            && never.contains("`corral log --follow`"),
        "{never}"
    );
    // A lifecycle-only read has nothing to miss.
    let run = in_state(s, &["log", "--kind", "lifecycle"]).expect_code(0);
    assert!(!run.stdout.contains("note: "), "{}", run.stdout);

    let mut follow = std::process::Command::new(common::CORRAL)
        .args(["log", "--follow", "--state-dir", s.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut seen = note(s);
    while seen.is_some() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        seen = note(s);
    }
    assert_eq!(seen, None, "a running collector still gets a note");
    // The collector takes its lock, then records its start: killed in
    // between, it never ran as far as the trail can tell. Kill it only
    // once its start is on disk.
    let record = s.join("audit").join("collected.json");
    while !record.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(record.exists(), "the collector never recorded its start");
    follow.kill().unwrap();
    follow.wait().unwrap();
    let after = note(s).unwrap_or_else(|| panic!("no note once the collector stopped"));
    assert!(
        after.contains("no collector runs now; the last one ran from "),
        "{after}"
    );
}
