//! `corral host apply / verify / status / plan / teardown` on a named network
//! namespace the test creates, with the real binary; and drift made behind
//! corral's back (a rule deleted with `nft`) caught by `verify`.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::netns::NamedNetns;
use common::{assert_fields, corral, schema};

fn host(verb: &str, ns: &NamedNetns, state: &std::path::Path, extra: &[&str]) -> common::Run {
    let mut args = vec![
        "host",
        verb,
        "--netns",
        ns.name(),
        "--state-dir",
        state.to_str().expect("utf-8 temp path"),
    ];
    args.extend_from_slice(extra);
    corral(&args)
}

/// The first rule handle of `chain` in `table inet corral`, via `nft -a`.
fn first_rule(ns: &NamedNetns, chain: &str) -> (String, String) {
    let out = ns.exec("nft", &["-a", "list", "chain", "inet", "corral", chain]);
    assert!(
        out.status.success(),
        "nft list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("# handle") && !l.contains("chain "))
        .unwrap_or_else(|| panic!("no rule in chain {chain}:\n{text}"));
    let handle = line
        .rsplit("# handle ")
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    (handle, line.trim().to_owned())
}

#[test]
fn apply_verify_status_drift_teardown_on_a_named_netns() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = NamedNetns::new();
    let state = tempfile::tempdir().unwrap();

    // Before apply: plan shows drift but changes nothing; verify fails.
    let plan = host("plan", &ns, state.path(), &["--json"])
        .expect_code(0)
        .json();
    assert_fields(
        &plan,
        &[
            "schema", "source", "netns", "nft", "bridges", "sysctls", "rules", "elements",
            "in_sync", "drift",
        ],
        "host plan",
    );
    schema::check(&plan);
    assert_eq!(plan["in_sync"], false);
    assert!(plan["nft"].as_str().unwrap().contains("table inet corral"));
    let dry = host("apply", &ns, state.path(), &["--dry-run", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(dry["nft"], plan["nft"], "apply --dry-run must equal plan");
    host("verify", &ns, state.path(), &[]).expect_code(1);

    // Apply: exit 0, state recorded, read back clean.
    let applied = host("apply", &ns, state.path(), &["--json"])
        .expect_code(0)
        .json();
    assert_fields(
        &applied,
        &[
            "schema",
            "source",
            "netns",
            "state_file",
            "sysctls",
            "bridges",
            "rules",
            "set_elements",
            "ms",
        ],
        "host apply",
    );
    schema::check(&applied);
    assert_eq!(applied["bridges"].as_array().unwrap().len(), 3);
    assert!(state.path().join("applied.json").exists());

    let verify = host("verify", &ns, state.path(), &[]).expect_code(0);
    assert!(
        verify.stdout.contains("enforces exactly the plan"),
        "{}",
        verify.stdout
    );
    let v = host("verify", &ns, state.path(), &["--json"])
        .expect_code(0)
        .json();
    assert_fields(
        &v,
        &["schema", "source", "netns", "in_sync", "drift"],
        "host verify",
    );
    schema::check(&v);
    assert_eq!(v["in_sync"], true);

    let status = host("status", &ns, state.path(), &[]).expect_code(0);
    for needle in ["corral-iso", "corral-net", "corral-allow", "in sync"] {
        assert!(
            status.stdout.contains(needle),
            "status lacks {needle}:\n{}",
            status.stdout
        );
    }
    let s = host("status", &ns, state.path(), &["--json"])
        .expect_code(0)
        .json();
    assert_fields(
        &s,
        &[
            "schema", "source", "netns", "bridges", "counters", "sets", "drift",
        ],
        "host status",
    );
    for b in s["bridges"].as_array().unwrap() {
        assert_fields(
            b,
            &["name", "profile", "present", "up", "managed", "addresses"],
            "status bridge",
        );
        assert_eq!(b["present"], true, "{b}");
        assert_eq!(b["up"], true, "{b}");
    }
    schema::check(&s);
    assert_eq!(s["drift"], 0);

    // Applying again is a no-op by read-back.
    host("apply", &ns, state.path(), &["--quiet"]).expect_code(0);
    host("verify", &ns, state.path(), &[]).expect_code(0);

    // Drift: delete a rule behind corral's back.
    let (handle, rule) = first_rule(&ns, "isolated-out");
    let out = ns.exec(
        "nft",
        &[
            "delete",
            "rule",
            "inet",
            "corral",
            "isolated-out",
            "handle",
            &handle,
        ],
    );
    assert!(
        out.status.success(),
        "nft delete: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let drifted = host("verify", &ns, state.path(), &[]).expect_code(1);
    assert!(drifted.stdout.contains("missing"), "{}", drifted.stdout);
    assert!(
        drifted.stdout.contains("isolated-out"),
        "verify does not name the chain of the deleted rule `{rule}`:\n{}",
        drifted.stdout
    );
    let dj = host("verify", &ns, state.path(), &["--json"])
        .expect_code(1)
        .json();
    schema::check(&dj);
    assert_eq!(dj["in_sync"], false);
    let items = dj["drift"].as_array().unwrap();
    assert!(
        items.iter().any(|d| d["area"] == "nft"
            && d["object"] == "rule"
            && d["location"]
                .as_str()
                .unwrap_or("")
                .contains("isolated-out")),
        "no rule drift in isolated-out: {dj}"
    );
    for d in items {
        assert_fields(
            d,
            &["area", "kind", "object", "location", "detail", "message"],
            "drift item",
        );
    }
    // Apply repairs it.
    host("apply", &ns, state.path(), &["--quiet"]).expect_code(0);
    host("verify", &ns, state.path(), &[]).expect_code(0);

    // Refresh with nothing to change.
    let r = host("refresh", &ns, state.path(), &["--json"])
        .expect_code(0)
        .json();
    assert_fields(
        &r,
        &[
            "schema",
            "netns",
            "state_file",
            "sets",
            "added",
            "removed",
            "changed",
        ],
        "host refresh",
    );
    schema::check(&r);
    assert_eq!(r["changed"], false);

    // Teardown: tables and stamped bridges gone, state forgotten.
    let t = corral(&[
        "host",
        "teardown",
        "--netns",
        ns.name(),
        "--state-dir",
        state.path().to_str().unwrap(),
        "--json",
    ])
    .expect_code(0)
    .json();
    assert_fields(
        &t,
        &[
            "schema",
            "netns",
            "state_file",
            "tables_deleted",
            "bridges_deleted",
            "errors",
        ],
        "host teardown",
    );
    schema::check(&t);
    assert_eq!(t["bridges_deleted"].as_array().unwrap().len(), 3, "{t}");
    assert!(!state.path().join("applied.json").exists());
    let out = ns.exec("nft", &["list", "tables"]);
    let tables = String::from_utf8_lossy(&out.stdout);
    assert!(
        !tables.contains("corral"),
        "corral tables left after teardown:\n{tables}"
    );
    let s = host("status", &ns, state.path(), &["--json"])
        .expect_code(0)
        .json();
    assert!(
        s["bridges"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["present"] == false),
        "{s}"
    );
}

#[test]
fn netns_by_path_and_unknown_netns() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = NamedNetns::new();
    let state = tempfile::tempdir().unwrap();
    let path = ns.path().to_str().unwrap().to_owned();
    let run = corral(&[
        "host",
        "plan",
        "--netns",
        &path,
        "--state-dir",
        state.path().to_str().unwrap(),
        "--json",
    ])
    .expect_code(0);
    assert_eq!(run.json()["netns"], path);

    let run = corral(&["host", "status", "--netns", "corral-no-such-netns-e2e"]);
    assert_eq!(run.code, Some(2), "{}", run.stderr);
    assert!(
        run.stderr.contains("/run/netns/corral-no-such-netns-e2e"),
        "{}",
        run.stderr
    );
}
