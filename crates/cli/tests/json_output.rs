//! JSON of the commands that need no privileges parses and matches
//! docs/json-schema.md (the host and drill JSON is checked in their own
//! root tests).

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{corral, corral_in, schema};

#[test]
fn matrix_json() {
    let all = corral(&["matrix", "--json"]).expect_code(0).json();
    schema::check(&all);
    assert_eq!(all["entries"].as_array().unwrap().len(), 3 * 8);
    assert!(all["host_os"].is_null());
    let mac = corral(&["matrix", "--host", "macos", "--json"])
        .expect_code(0)
        .json();
    schema::check(&mac);
    let entries = mac["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 8);
    assert!(entries.iter().all(|e| e["host_os"] == "macos"));
    assert!(entries.iter().any(|e| e["status"] == "refused"));
    assert!(entries.iter().any(|e| e["status"] == "supported"));
}

#[test]
fn profiles_json() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("n.conf"),
        "a corral-a 10.72.1.0/24 -\nb corral-b 10.72.2.0/24 203.0.113.9:443/tcp\n",
    )
    .unwrap();
    let v = corral_in(
        Some(dir.path()),
        &["profiles", "--networks-conf", "n.conf", "--json"],
    )
    .expect_code(0)
    .json();
    schema::check(&v);
    assert_eq!(v["profiles"][1]["allow"][0], "203.0.113.9:443/tcp");
    assert_eq!(v["profiles"][1]["mode"], "allowlist");
}

#[test]
fn builtin_profiles_json() {
    // The built-in profiles, whichever way they are reached, document their
    // JSON the same way.
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(common::CORRAL)
        .args(["profiles", "--json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    schema::check(&v);
}

#[test]
fn config_check_json_valid_and_invalid() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ok.conf"),
        "a corral-a 10.73.1.0/24 internet\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("bad.conf"),
        "a corral-a 10.73.1.0/24 internet extra\n",
    )
    .unwrap();
    let ok = corral_in(Some(dir.path()), &["config", "check", "ok.conf", "--json"])
        .expect_code(0)
        .json();
    schema::check(&ok);
    assert_eq!(ok["valid"], true);
    assert_eq!(ok["format"], "networks-conf");
    let bad =
        corral_in(Some(dir.path()), &["config", "check", "bad.conf", "--json"]).expect_code(2);
    let bad = bad.json();
    schema::check(&bad);
    assert_eq!(bad["valid"], false);
    assert_eq!(bad["errors"][0]["line"], 1);
    assert!(
        bad["errors"][0]["message"]
            .as_str()
            .unwrap()
            .starts_with("bad.conf:1")
    );
}

#[test]
fn cluster_status_json_matches_its_documentation() {
    use corral_provider_incus::ClusterMember;
    use corral_sandbox_core::verify::Timestamp;
    use corral_service::cluster::RotationFile;
    use corral_service::cluster::persisted::{MemberRecord, SCHEMA, StandingName};
    use corral_service::reports::ClusterReport;
    // The builder both `corral cluster status --json` and GET /v1/cluster
    // print, with a member of every standing and a written controller.
    let member = |name: &str| ClusterMember {
        name: name.into(),
        url: String::new(),
        status: "Online".into(),
        message: "Fully operational".into(),
        roles: Vec::new(),
    };
    let file = RotationFile {
        schema: SCHEMA.into(),
        written_at: Timestamp(10_000),
        interval_secs: 10,
        members: vec![MemberRecord {
            member: "m2".into(),
            incus_status: "Online".into(),
            incus_message: String::new(),
            standing: StandingName::Drained,
            attested_at: Some(Timestamp(2_000)),
            since: Timestamp(9_000),
            reason: Some("attestation failed".into()),
            last_failure: Some("attestation failed".into()),
        }],
    };
    let report = ClusterReport::new(
        Some(&[member("m1"), member("m2")]),
        Some(&file),
        &[],
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(12),
    );
    schema::check(&serde_json::to_value(&report).unwrap());
    let off = ClusterReport::new(None, None, &[], std::time::SystemTime::now());
    schema::check(&serde_json::to_value(&off).unwrap());
}

/// A failure with `--json` prints corrald's error body on stdout, the
/// exit code unchanged; the control is the same command without `--json`,
/// whose stdout stays empty.
#[test]
fn a_failure_with_json_prints_the_error_shape() {
    let run = corral(&["new", "shp-x1", "--cpu", "0", "--json"]).expect_code(2);
    let body = run.json();
    assert_eq!(body["error"]["code"], "bad_request", "{body}");
    assert_eq!(
        body["error"]["message"], "--cpu 0: give at least one CPU",
        "{body}"
    );
    assert_eq!(body.as_object().unwrap().len(), 1, "{body}");
    assert!(run.stderr.contains("error: --cpu 0"), "{}", run.stderr);
    let control = corral(&["new", "shp-x1", "--cpu", "0"]).expect_code(2);
    assert!(control.stdout.is_empty(), "{}", control.stdout);
}

/// A command that printed its own object and then fails (an invalid file
/// for `config check --json`) adds no error body: stdout stays one object.
#[test]
fn a_report_printed_before_the_failure_stays_the_only_object() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.toml"), "[profiles.x]\nmode = 7\n").unwrap();
    let run =
        corral_in(Some(dir.path()), &["config", "check", "bad.toml", "--json"]).expect_code(2);
    let report = run.json();
    assert_eq!(report["schema"], "corral.config-check.v1", "{report}");
    assert_eq!(report["valid"], false, "{report}");
}
