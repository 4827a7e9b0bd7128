//! `corral host apply` of a configuration that drops a profile whose
//! bridge still has a port: refused (exit 1, naming bridge and port,
//! nothing changed), then `--force` (the port set down and cut, the bridge
//! deleted, the subnet retired and recorded), with the real binary on a
//! named network namespace the test creates.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::netns::NamedNetns;
use common::{corral, schema};

const A: &str =
    "[[profile]]\nname = \"a\"\nbridge = \"cr-a\"\nsubnet = \"10.240.1.0/24\"\nmode = \"none\"\n";
const B: &str = "[[profile]]\nname = \"b\"\nbridge = \"cr-b\"\nsubnet = \"10.240.2.0/24\"\nmode = \"internet\"\n";

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

fn ip(ns: &NamedNetns, args: &[&str]) -> String {
    let out = ns.exec("ip", args);
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn dropping_a_profile_with_a_port_is_refused_then_forced() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = NamedNetns::new();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let both = dir.path().join("both.toml");
    let one = dir.path().join("one.toml");
    std::fs::write(&both, format!("{A}\n{B}")).unwrap();
    std::fs::write(&one, A).unwrap();
    let both = both.to_str().unwrap();
    let one = one.to_str().unwrap();

    host("apply", &ns, &state, &["--config", both]).expect_code(0);
    // A "sandbox" port on b's bridge.
    ip(
        &ns,
        &["link", "add", "vb0", "type", "veth", "peer", "name", "vb1"],
    );
    ip(&ns, &["link", "set", "vb0", "master", "cr-b", "up"]);
    // Swept as corral sweeps a port nobody bound: isolated, quarantined.
    host("refresh", &ns, &state, &[]).expect_code(0);
    let record_before = std::fs::read_to_string(state.join("applied.json")).unwrap();

    let refused = host("apply", &ns, &state, &["--config", one]).expect_code(1);
    for needle in ["cr-b", "vb0", "--force", "nothing was changed"] {
        assert!(
            refused.stderr.contains(needle),
            "{needle}: {}",
            refused.stderr
        );
    }
    assert_eq!(
        std::fs::read_to_string(state.join("applied.json")).unwrap(),
        record_before
    );
    host("verify", &ns, &state, &[]).expect_code(0);
    assert!(ip(&ns, &["-o", "link", "show", "vb0"]).contains("master cr-b"));

    let forced = host(
        "apply",
        &ns,
        &state,
        &["--config", one, "--force", "--json"],
    )
    .expect_code(0)
    .json();
    schema::check(&forced);
    assert_eq!(forced["removed"][0]["name"], "cr-b", "{forced}");
    assert_eq!(forced["removed"][0]["cut"][0], "vb0");
    assert_eq!(forced["removed"][0]["deleted"], true);
    assert_eq!(forced["cut_ports"][0], "vb0");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("applied.json")).unwrap())
            .unwrap();
    assert_eq!(record["retired"][0], "10.240.2.0/24", "{record}");
    assert_eq!(record["cut_ports"][0], "vb0");
    assert!(!ns.exec("ip", &["link", "show", "cr-b"]).status.success());
    let vb0 = ip(&ns, &["-o", "link", "show", "vb0"]);
    assert!(
        !vb0.contains("master") && vb0.contains("state DOWN"),
        "{vb0}"
    );
    let rules = String::from_utf8_lossy(
        &ns.exec("nft", &["list", "set", "inet", "corral", "cut_ports"])
            .stdout,
    )
    .into_owned();
    assert!(rules.contains("\"vb0\""), "{rules}");
    host("verify", &ns, &state, &[]).expect_code(0);
    // The human report of a plain re-apply still keeps the cut.
    host("apply", &ns, &state, &["--config", one]).expect_code(0);
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state.join("applied.json")).unwrap())
            .unwrap();
    assert_eq!(record["cut_ports"][0], "vb0");
    assert_eq!(record["retired"][0], "10.240.2.0/24");
    host("teardown", &ns, &state, &["--force", "--config", one]).expect_code(0);
}
