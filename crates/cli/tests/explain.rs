//! `corral explain` with the real binary on a named network namespace the
//! built-in profiles were applied to: verdicts, the deciding rule and the
//! allow entry in the human line, the JSON against docs/json-schema.md,
//! exit codes (0 for any explanation, 2 for bad input). The verdicts
//! themselves are proven against the kernel in
//! crates/drill/tests/explain_agrees.rs.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::netns::NamedNetns;
use common::{corral, schema};

fn run(ns: &NamedNetns, state: &std::path::Path, args: &[&str]) -> common::Run {
    let mut all = args.to_vec();
    all.extend([
        "--netns",
        ns.name(),
        "--state-dir",
        state.to_str().expect("utf-8 temp path"),
    ]);
    corral(&all)
}

#[test]
fn explain_says_which_rule_decides() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = NamedNetns::new();
    let state = tempfile::tempdir().unwrap();
    let mut apply = vec!["host", "apply"];
    apply.extend([
        "--netns",
        ns.name(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    corral(&apply).expect_code(0);

    let explain = |args: &[&str]| {
        let mut a = vec!["explain"];
        a.extend_from_slice(args);
        run(&ns, state.path(), &a)
    };
    let allow = explain(&["--profile", "allowlist", "203.0.113.10:443"]).expect_code(0);
    let line = allow.stdout.lines().next().unwrap();
    assert!(
        line.starts_with("allow 203.0.113.10:443/tcp from profile allowlist: allowlist-out#"),
        "{line}"
    );
    assert!(line.contains("`203.0.113.10:443/tcp`"), "{line}");
    assert!(line.contains("@allowlist-allow4-tcp-443"), "{line}");

    // A block is an explanation too: exit 0, the verdict in the output.
    for (profile, dest, why) in [
        (
            "allowlist",
            "203.0.113.10:80",
            "nothing in profile allowlist allows it",
        ),
        (
            "internet",
            "169.254.169.254:80",
            "reserved or private space",
        ),
        (
            "internet",
            "[2001:db8::1]:53/udp",
            "DNS leaves a sandbox only",
        ),
        (
            "isolated",
            "198.51.100.1/icmp",
            "nothing in profile isolated allows it",
        ),
    ] {
        let out = explain(&["--profile", profile, dest]).expect_code(0);
        assert!(out.stdout.starts_with("block "), "{dest}: {}", out.stdout);
        assert!(out.stdout.contains(why), "{dest}: {}", out.stdout);
    }

    let v = explain(&["--profile", "internet", "[2001:db8::7]:443", "--json"])
        .expect_code(0)
        .json();
    schema::check(&v);
    assert_eq!(v["verdict"], "allow");
    assert_eq!(v["answers"][0]["trace"]["rule"]["chain"], "internet-out");
    assert_eq!(v["answers"][0]["trace"]["flow"]["src"], "fd00:c0a1:2::2");
    let v = explain(&["--profile", "allowlist", "203.0.113.5:8080", "--json"])
        .expect_code(0)
        .json();
    schema::check(&v);
    assert_eq!(
        v["answers"][0]["trace"]["entries"][0],
        "203.0.113.0/28:8000-8100/tcp"
    );
    assert_eq!(
        v["answers"][0]["trace"]["set"]["element"]["start"],
        "203.0.113.0"
    );

    // A name no entry lists: the plan says so, the gateway resolver refuses it.
    let v = explain(&[
        "--profile",
        "allowlist",
        "unlisted.example.org:443",
        "--json",
    ])
    .expect_code(0)
    .json();
    schema::check(&v);
    assert_eq!(v["verdict"], "block");
    assert_eq!(v["name"]["entries"].as_array().unwrap().len(), 0);

    // Bad input is usage (exit 2) and names what was expected.
    let bad = explain(&["--profile", "allowlist", "203.0.113.10:99999"]).expect_code(2);
    assert!(
        bad.stderr.contains("expected DEST[:PORT][/PROTO]"),
        "{}",
        bad.stderr
    );
    let unknown = explain(&["--profile", "nope", "203.0.113.10:443"]).expect_code(2);
    assert!(
        unknown.stderr.contains("profile `nope`"),
        "{}",
        unknown.stderr
    );
    explain(&["203.0.113.10:443"]).expect_code(2);

    // The answer is the kernel's: an accept inserted behind corral's back
    // turns the block above (the control, with no drift) into an allow,
    // and the answer names the inserted rule, the drift and the plan's
    // verdict.
    let v = explain(&["--profile", "allowlist", "203.0.113.10:80", "--json"])
        .expect_code(0)
        .json();
    schema::check(&v);
    assert_eq!(v["verdict"], "block", "{v:#}");
    assert_eq!(v["drift"].as_array().unwrap().len(), 0, "{v:#}");
    let tamper = ns.exec(
        "nft",
        &[
            "insert",
            "rule",
            "inet",
            "corral",
            "allowlist-out",
            "ip",
            "daddr",
            "203.0.113.10",
            "tcp",
            "dport",
            "80",
            "accept",
        ],
    );
    assert!(tamper.status.success(), "{tamper:?}");
    let v = explain(&["--profile", "allowlist", "203.0.113.10:80", "--json"])
        .expect_code(0)
        .json();
    schema::check(&v);
    assert_eq!(v["verdict"], "allow", "{v:#}");
    assert_eq!(v["plan_verdict"], "block", "{v:#}");
    assert_eq!(v["drift"][0]["kind"], "extra", "{v:#}");
    let a = &v["answers"][0];
    assert_eq!(a["live"]["rule"]["chain"], "allowlist-out", "{a:#}");
    let rule = a["live"]["rule"]["nft"].as_str().unwrap();
    assert!(
        rule.starts_with("ip daddr 203.0.113.10 ") && rule.ends_with(" th dport 80 accept"),
        "{a:#}"
    );
    let human = explain(&["--profile", "allowlist", "203.0.113.10:80"]).expect_code(0);
    assert!(human.stdout.starts_with("drift: "), "{}", human.stdout);
    let line = human
        .stdout
        .lines()
        .find(|l| l.starts_with("allow "))
        .unwrap_or_else(|| panic!("{}", human.stdout));
    assert!(line.contains("the plan says: block"), "{line}");

    let mut teardown = vec!["host", "teardown"];
    teardown.extend([
        "--netns",
        ns.name(),
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);
    corral(&teardown).expect_code(0);
}
