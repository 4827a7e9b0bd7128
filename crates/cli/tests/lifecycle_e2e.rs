//! The rest of the lifecycle end to end — clones, snapshots and restore,
//! rename, export and import — with the real `corral` binary against the
//! real Incus daemon and the busybox test image (templates are in
//! `templates_e2e.rs`, push, pull and shell in `files_e2e.rs`). The clone
//! test runs a profiled sandbox in the HOST network namespace through
//! `corral host apply` (see `corral_tests::hostlab`).
//!
//! Every instance a test names is force-deleted by a guard when the test
//! ends; instances are inspected and tampered with through Incus's own API.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::sandboxes::{
    Cleanup, cat, in_lab, in_state, incus, incus_status, instance, no_terminal, plain, unique,
    unstamp,
};
use common::{corral, schema};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_provider_incus::api::Instance;
use corral_tests::hostlab::HostLab;
use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

#[test]
fn snapshots_restore_and_rename() {
    let Some(client) = incus() else { return };
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let (name, renamed, other, foreign) = (
        unique("snap"),
        unique("snap-renamed"),
        unique("snap-other"),
        unique("snap-foreign"),
    );
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![
            name.clone(),
            renamed.clone(),
            other.clone(),
            foreign.clone(),
        ],
    };
    plain(s, &name);
    corral(&["exec", &name, "--", "sh", "-c", "echo one > /root/f"]).expect_code(0);
    let first = in_state(s, &["snapshot", &name, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(first["schema"], "corral.sandbox-snapshot.v1");
    schema::check(&first);
    assert_eq!(first["name"], "snap0");
    in_state(s, &["snapshot", &name, "before-two"]).expect_code(0);
    let run = in_state(s, &["snapshot", &name, "before-two"]).expect_code(1);
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);
    in_state(s, &["snapshot", &name, "a/b"]).expect_code(2);
    corral(&["exec", &name, "--", "sh", "-c", "echo two > /root/f"]).expect_code(0);
    let info = in_state(s, &["info", &name, "--json"])
        .expect_code(0)
        .json();
    schema::check(&info);
    let snaps: Vec<&str> = info["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(snaps, ["snap0", "before-two"]);

    // Destructive: no terminal and no --force is exit 2, nothing changes.
    let run = no_terminal(&[
        "restore",
        &name,
        "snap0",
        "--state-dir",
        s.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("--force"), "{}", run.stderr);
    assert_eq!(cat(&name, "/root/f"), "two\n");
    // A snapshot that does not exist: refused before anything is stopped.
    let run = in_state(s, &["restore", &name, "nope", "--force"]).expect_code(1);
    assert!(run.stderr.contains("does not exist"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &name).as_deref(), Some("Running"));
    let restored = in_state(s, &["restore", &name, "snap0", "--force", "--json"])
        .expect_code(0)
        .json();
    schema::check(&restored);
    assert_eq!(restored["info"]["state"], "running", "{restored}");
    assert_eq!(cat(&name, "/root/f"), "one\n");

    // Rename: refused while running; then the record and name follow.
    let run = in_state(s, &["rename", &name, &renamed]).expect_code(1);
    assert!(run.stderr.contains("stop it first"), "{}", run.stderr);
    in_state(s, &["stop", "--force", &name]).expect_code(0);
    plain(s, &other);
    let run = in_state(s, &["rename", &name, &other]).expect_code(1);
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);
    in_state(s, &["rename", &name, "Bad Name"]).expect_code(2);
    let moved = in_state(s, &["rename", &name, &renamed, "--json"])
        .expect_code(0)
        .json();
    schema::check(&moved);
    assert_eq!(moved["from"], name.as_str());
    assert_eq!(moved["name"], renamed.as_str());
    assert_eq!(incus_status(&client, &name), None);
    assert_eq!(incus_status(&client, &renamed).as_deref(), Some("Stopped"));
    in_state(s, &["info", &name]).expect_code(1);
    let gate = in_state(s, &["gate", "--json"]).expect_code(0).json();
    assert!(
        gate["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["name"] == renamed.as_str()),
        "the record follows the rename: {gate}"
    );
    let events = in_state(s, &["events", "--sandbox", &renamed, "--json"])
        .expect_code(0)
        .json();
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "renamed" && e["from"] == name.as_str()),
        "{events}"
    );
    let events = in_state(s, &["events", "--sandbox", &name, "--json"])
        .expect_code(0)
        .json();
    for kind in ["snapshotted", "restored"] {
        assert!(
            events["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["event"] == kind),
            "{kind}: {events}"
        );
    }

    // An instance without corral's stamp: every new verb refuses it.
    plain(s, &foreign);
    unstamp(&client, &foreign);
    let host_file = tempfile::NamedTempFile::new().unwrap();
    let host_path = host_file.path().to_str().unwrap();
    let export_to = state.path().join("foreign.tar.gz");
    let from = format!("{foreign}/snap0");
    let (x_renamed, x_clone) = (unique("x-renamed"), unique("x-clone"));
    for args in [
        vec!["snapshot", foreign.as_str()],
        vec!["restore", foreign.as_str(), "snap0", "--force"],
        vec!["rename", foreign.as_str(), x_renamed.as_str()],
        vec!["export", foreign.as_str(), export_to.to_str().unwrap()],
        vec!["push", foreign.as_str(), host_path, "/tmp/x"],
        vec!["pull", foreign.as_str(), "/etc/hostname", "-"],
        vec!["new", x_clone.as_str(), "--from", foreign.as_str()],
        vec!["new", x_clone.as_str(), "--from", from.as_str()],
    ] {
        let run = in_state(s, &args).expect_code(1);
        assert!(
            run.stderr.contains("was not created by corral"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert!(!export_to.exists());
    assert_eq!(incus_status(&client, &x_clone), None);
    assert_eq!(incus_status(&client, &foreign).as_deref(), Some("Running"));
}

#[test]
fn export_says_it_may_hold_credentials_and_import_brings_it_back() {
    let Some(client) = incus() else { return };
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let (name, back, by_file) = (unique("exp"), unique("exp-back"), unique("exp-file"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone(), back.clone(), by_file.clone()],
    };
    plain(s, &name);
    corral(&["exec", &name, "--", "sh", "-c", "echo kept > /root/f"]).expect_code(0);
    in_state(s, &["snapshot", &name]).expect_code(0);
    let file = s.join("backup.tar.gz");
    let run = in_state(s, &["export", &name, file.to_str().unwrap(), "--json"]).expect_code(0);
    let json = run.json();
    assert_eq!(json["schema"], "corral.sandbox-export.v1");
    schema::check(&json);
    assert!(json["bytes"].as_u64().unwrap() > 0);
    assert!(run.stderr.contains("WARNING"), "{}", run.stderr);
    assert!(
        run.stderr.contains("may hold credentials"),
        "{}",
        run.stderr
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Never over an existing file.
    let run = in_state(s, &["export", &name, file.to_str().unwrap()]).expect_code(1);
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);

    let imported = in_state(
        s,
        &["import", file.to_str().unwrap(), "--name", &back, "--json"],
    )
    .expect_code(0)
    .json();
    schema::check(&imported);
    assert_eq!(imported["state"], "stopped", "{imported}");
    let (a, b) = (
        instance(&client, &name).unwrap(),
        instance(&client, &back).unwrap(),
    );
    assert_ne!(
        a.config.get("user.corral.id"),
        b.config.get("user.corral.id"),
        "an import gets a fresh stamp"
    );
    in_state(s, &["start", &back]).expect_code(0);
    assert_eq!(cat(&back, "/root/f"), "kept\n");
    let info = in_state(s, &["info", &back, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(info["snapshots"][0]["name"], "snap0", "{info}");
    let run = in_state(s, &["import", file.to_str().unwrap(), "--name", &back]).expect_code(1);
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);
    // The default name is the file's.
    let named = s.join(format!("{by_file}.tar.gz"));
    std::fs::copy(&file, &named).unwrap();
    in_state(s, &["import", named.to_str().unwrap()]).expect_code(0);
    assert_eq!(incus_status(&client, &by_file).as_deref(), Some("Stopped"));
    // Not a backup: refused before anything is uploaded.
    let junk = s.join("junk.tar.gz");
    std::fs::write(&junk, b"not a backup").unwrap();
    let never = unique("exp-never");
    let run = in_state(s, &["import", junk.to_str().unwrap(), "--name", &never]).expect_code(2);
    assert!(run.stderr.contains("cannot be imported"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &never), None);
    let events = in_state(s, &["events", "--sandbox", &name, "--json"])
        .expect_code(0)
        .json();
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "exported"),
        "{events}"
    );
}

/// A clone of a profiled sandbox gets a fresh identity — its own MAC and
/// host-side interface, its own lease, an emptied machine-id, a new stamp
/// — and passes the start gate and the canary like a new sandbox; with
/// the profile's tables gone, a clone (and a restore of a running
/// sandbox) is refused and nothing is created or changed.
#[test]
fn a_clone_gets_a_fresh_identity_through_the_start_gate() {
    if !corral_test_support::gate::netns() {
        return;
    }
    if !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(client) = incus() else { return };
    let lab = HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let (src, copy, refused) = (unique("src"), unique("clone"), unique("clone-refused"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![src.clone(), copy.clone(), refused.clone()],
    };
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    let made = in_lab(
        &lab,
        &[
            "new",
            &src,
            "--profile",
            "e2e",
            "--image",
            TEST_IMAGE_ALIAS,
            "--json",
        ],
    )
    .expect_code(0)
    .json();
    let src_lease = made["ready"]["lease"].as_str().unwrap().to_owned();
    // Give the source a machine identity to leave behind.
    let id = lab.state_dir().join("machine-id");
    std::fs::write(&id, "0123456789abcdef0123456789abcdef\n").unwrap();
    in_lab(
        &lab,
        &["push", &src, id.to_str().unwrap(), "/etc/machine-id"],
    )
    .expect_code(0);
    in_lab(&lab, &["snapshot", &src, "base"]).expect_code(0);

    let cloned = in_lab(
        &lab,
        &["new", &copy, "--from", &format!("{src}/base"), "--json"],
    )
    .expect_code(0)
    .json();
    schema::check(&cloned);
    assert_eq!(cloned["from"], format!("{src}/base"), "{cloned}");
    assert_eq!(cloned["info"]["profile"], "e2e", "{cloned}");
    assert_eq!(
        cloned["gate"]["bridge"],
        lab.profile.bridge.as_str(),
        "a clone passes the start gate: {cloned}"
    );
    let lease = cloned["ready"]["lease"].as_str().unwrap();
    assert!(
        lab.profile
            .subnet_v4
            .contains(&lease.parse::<std::net::Ipv4Addr>().unwrap()),
        "{lease}"
    );
    assert_ne!(lease, src_lease, "a clone holds a lease of its own");
    let (a, b) = (
        instance(&client, &src).unwrap(),
        instance(&client, &copy).unwrap(),
    );
    // A bound NIC carries its MAC and port name on the device; Incus's
    // volatile keys hold them otherwise.
    let nic_key = |i: &Instance, key: &str| {
        i.devices
            .get("eth0")
            .and_then(|d| d.get(key))
            .or_else(|| i.config.get(&format!("volatile.eth0.{key}")))
            .cloned()
    };
    for key in ["hwaddr", "host_name"] {
        let (x, y) = (nic_key(&a, key), nic_key(&b, key));
        assert!(x.is_some() && y.is_some(), "{key}: {x:?} {y:?}");
        assert_ne!(x, y, "{key} must not be the source's");
    }
    let (x, y) = (
        a.config.get("user.corral.id"),
        b.config.get("user.corral.id"),
    );
    assert!(x.is_some() && y.is_some(), "user.corral.id: {x:?} {y:?}");
    assert_ne!(x, y, "user.corral.id must not be the source's");
    assert_eq!(
        b.devices.get("eth0").and_then(|d| d.get("parent")),
        a.devices.get("eth0").and_then(|d| d.get("parent")),
        "on the source's profile bridge"
    );
    assert_eq!(cat(&copy, "/etc/machine-id"), "", "machine-id emptied");
    assert_eq!(
        cat(&src, "/etc/machine-id"),
        "0123456789abcdef0123456789abcdef\n",
        "the source keeps its own"
    );
    let gate = in_lab(&lab, &["gate", "--json"]).expect_code(0).json();
    let verdict = gate["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == copy.as_str())
        .map(|r| r["verdict"].clone());
    assert_eq!(
        verdict,
        Some(serde_json::json!("passed")),
        "the canary ran in the clone: {gate}"
    );

    // Each has a port binding of its own.
    let (src_nic, copy_nic) = (&made["info"]["nic"], &cloned["info"]["nic"]);
    assert!(
        src_nic["mac"].is_string() && copy_nic["mac"].is_string(),
        "{made} {cloned}"
    );
    assert_ne!(src_nic["mac"], copy_nic["mac"]);
    assert_ne!(src_nic["port"], copy_nic["port"]);

    // With corral's tables deleted behind its back, a clone is refused
    // naming what is missing, and nothing is created.
    let out = Command::new("nft")
        .args(["delete", "table", "inet", "corral"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = in_lab(&lab, &["new", &refused, "--from", &src]).expect_code(1);
    assert!(run.stderr.contains("table inet corral"), "{}", run.stderr);
    assert!(run.stderr.contains("corral host apply"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &refused), None);
    // A restore of a running sandbox passes the gate first, too.
    let run = in_lab(&lab, &["restore", &src, "base", "--force"]).expect_code(1);
    assert!(run.stderr.contains("not enforced"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &src).as_deref(), Some("Running"));
    in_lab(&lab, &["host", "apply"]).expect_code(0);
}
