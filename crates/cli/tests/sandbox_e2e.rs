//! The sandbox verbs end to end: the real `corral` binary against the real
//! Incus daemon, real containers from the busybox test image (which runs a
//! DHCP client at boot), and — for profiled sandboxes — corral's rules and
//! gateway applied by `corral host apply` in the HOST network namespace
//! (Incus's containers live there; see `corral_tests::hostlab` for what
//! that lab refuses to touch and how it cleans up, even on panic).
//!
//! Every instance a test names is force-deleted by a guard when the test
//! ends; instances are inspected and tampered with through Incus's own API,
//! never through corral.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use common::sandboxes::{Cleanup, in_lab, incus, incus_status, unique, unstamp};
use common::{CORRAL, Run, corral, schema};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_tests::hostlab::{ALLOWED_NAME, HostLab, UNLISTED_NAME};

/// `corral exec NAME -- ARGV…` with `input` on its standard input.
fn exec_with_stdin(name: &str, argv: &[&str], input: &[u8]) -> Run {
    use std::io::Write as _;
    let mut child = Command::new(CORRAL)
        .args(["exec", name, "--"])
        .args(argv)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap().into()
}

/// Token the lab's echo listeners send back.
const TOKEN: &str = "corral-cli-probe";

/// A TCP round trip from inside `name` to `to` (busybox `nc`), through
/// `corral exec`: reached only when the token comes back.
fn reached(name: &str, to: SocketAddr) -> bool {
    let script = format!("echo {TOKEN} | timeout 5 nc -w 3 \"$0\" \"$1\"");
    let run = corral(&[
        "exec",
        name,
        "-n",
        "--",
        "sh",
        "-c",
        &script,
        &to.ip().to_string(),
        &to.port().to_string(),
    ]);
    assert!(
        matches!(run.code, Some(0 | 1)),
        "the probe to {to} did not run: {run:?}"
    );
    run.stdout.contains(TOKEN)
}

/// Ask the sandbox's resolver (the gateway, from its DHCP lease) for `name`.
fn resolve(sandbox: &str, name: &str) -> Run {
    corral(&["exec", sandbox, "-n", "--", "nslookup", name])
}

#[test]
fn verbs_on_an_unprofiled_sandbox() {
    let Some(client) = incus() else { return };
    let name = unique("plain");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    let made = corral(&[
        "new",
        &name,
        "--no-network",
        "--image",
        TEST_IMAGE_ALIAS,
        "--json",
    ])
    .expect_code(0)
    .json();
    assert_eq!(made["schema"], "corral.sandbox-new.v1");
    schema::check(&made);
    assert_eq!(made["info"]["state"], "running", "{made}");
    assert_eq!(made["gate"], serde_json::Value::Null);
    assert_eq!(incus_status(&client, &name).as_deref(), Some("Running"));

    let list = corral(&["ls", "--json"]).expect_code(0).json();
    assert_eq!(list["schema"], "corral.sandbox-list.v1");
    schema::check(&list);
    assert!(
        list["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == name.as_str()),
        "{list}"
    );
    let info = corral(&["info", &name, "--json"]).expect_code(0).json();
    assert_eq!(info["schema"], "corral.sandbox-info.v1");
    schema::check(&info);
    assert_eq!(info["image"], TEST_IMAGE_ALIAS);
    assert_eq!(info["profile"], serde_json::Value::Null);
    let human = corral(&["ls"]).expect_code(0);
    assert!(human.stdout.contains(&name), "{}", human.stdout);

    // argv intact (spaces, quotes, `$`, a leading dash), the exit status
    // passed through, stdout and stderr apart, stdin streamed in.
    let run = exec_with_stdin(
        &name,
        &[
            "sh",
            "-c",
            "printf '%s|' \"$1\" \"$2\"; wc -c; echo oops >&2; exit 7",
            "argv0",
            "a b 'c' $HOME",
            "-n",
        ],
        &[b'x'; 300_000],
    );
    assert_eq!(run.code, Some(7), "{run:?}");
    assert_eq!(run.stdout, "a b 'c' $HOME|-n|300000\n");
    assert_eq!(run.stderr, "oops\n");
    let run = corral(&[
        "exec",
        &name,
        "--env",
        "A=b c",
        "--cwd",
        "/tmp",
        "--",
        "sh",
        "-c",
        "echo \"$A\" \"$(pwd)\"",
    ]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert_eq!(run.stdout, "b c /tmp\n");
    corral(&["exec", &name, "--env", "novalue", "--", "true"]).expect_code(2);

    corral(&["stop", &name, "--force"]).expect_code(0);
    assert_eq!(incus_status(&client, &name).as_deref(), Some("Stopped"));
    let run = corral(&["exec", &name, "--", "true"]).expect_code(1);
    assert!(run.stderr.contains("start it first"), "{}", run.stderr);
    corral(&["start", &name]).expect_code(0);
    assert_eq!(incus_status(&client, &name).as_deref(), Some("Running"));
    let restarted = corral(&["restart", &name, "--force", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(restarted["schema"], "corral.sandbox-action.v1");
    schema::check(&restarted);
    assert_eq!(restarted["results"][0]["ok"], true, "{restarted}");
    assert_eq!(restarted["results"][0]["state"], "running", "{restarted}");

    // Destructive: without a terminal and without --force, nothing happens.
    let run = Command::new(CORRAL)
        .args(["rm", &name])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&run.stderr).contains("--force"));
    assert_eq!(incus_status(&client, &name).as_deref(), Some("Running"));
    corral(&["rm", "--force", &name]).expect_code(0);
    assert_eq!(incus_status(&client, &name), None);
    let run = corral(&["info", &name]).expect_code(1);
    assert!(run.stderr.contains("does not exist"), "{}", run.stderr);
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let Some(client) = incus() else { return };
    let taken = unique("taken");
    let foreign = unique("foreign");
    let never = unique("never");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![taken.clone(), foreign.clone(), never.clone()],
    };
    // Unknown profile: usage, exit 2, nothing created.
    let run = corral(&[
        "new",
        &never,
        "--profile",
        "nope",
        "--image",
        TEST_IMAGE_ALIAS,
    ])
    .expect_code(2);
    assert!(
        run.stderr.contains("profile `nope` is not configured"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("isolated, internet, allowlist"),
        "{}",
        run.stderr
    );
    assert_eq!(incus_status(&client, &never), None);
    corral(&["new", "Not A Name!", "--no-network"]).expect_code(2);
    corral(&["new", &never, "--no-network", "--memory", "lots"]).expect_code(2);
    // A size without a unit is not guessed (1 MiB? 1 GiB?); a negative one
    // is this parser's error, not clap's "unexpected argument".
    for (flag, value) in [("--memory", "1"), ("--memory", "-5"), ("--disk", "20")] {
        let run = corral(&["new", &never, "--no-network", flag, value]).expect_code(2);
        assert!(
            run.stderr.contains(&format!("`{value}` is not a size")),
            "{flag} {value}: {}",
            run.stderr
        );
    }
    // A disk beyond what the storage pool has free is refused before
    // anything is made (control: the same create with a disk that fits
    // is made further down, `taken`).
    let run = corral(&[
        "new",
        &never,
        "--no-network",
        "--image",
        TEST_IMAGE_ALIAS,
        "--disk",
        "100000TiB",
    ])
    .expect_code(2);
    assert!(run.stderr.contains("GiB free"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &never), None);
    corral(&[
        "new",
        &never,
        "--no-network",
        "--size",
        "small",
        "--cpu",
        "2",
    ])
    .expect_code(2);
    corral(&["exec", &never]).expect_code(2);

    // A taken name.
    corral(&[
        "new",
        &taken,
        "--no-network",
        "--image",
        TEST_IMAGE_ALIAS,
        "--disk",
        "1GiB",
    ])
    .expect_code(0);
    let run = corral(&["new", &taken, "--no-network", "--image", TEST_IMAGE_ALIAS]).expect_code(1);
    assert!(run.stderr.contains("already exists"), "{}", run.stderr);

    // An instance without corral's stamp: every verb refuses it, ls hides it.
    corral(&["new", &foreign, "--no-network", "--image", TEST_IMAGE_ALIAS]).expect_code(0);
    unstamp(&client, &foreign);
    for args in [
        vec!["info", foreign.as_str()],
        vec!["exec", foreign.as_str(), "--", "true"],
        vec!["stop", foreign.as_str()],
        vec!["start", foreign.as_str()],
        vec!["restart", foreign.as_str()],
        vec!["rm", "--force", foreign.as_str()],
    ] {
        let run = corral(&args).expect_code(1);
        assert!(
            run.stderr.contains("was not created by corral"),
            "{args:?}: {}",
            run.stderr
        );
    }
    assert_eq!(incus_status(&client, &foreign).as_deref(), Some("Running"));
    let list = corral(&["ls", "--json"]).expect_code(0).json();
    assert!(
        !list["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["name"] == foreign.as_str()),
        "{list}"
    );
    // Several names: the others are still acted on, and the command fails.
    let both = corral(&["stop", "--force", "--json", &taken, &foreign])
        .expect_code(1)
        .json();
    schema::check(&both);
    assert_eq!(both["results"][0]["ok"], true, "{both}");
    assert_eq!(both["results"][1]["ok"], false, "{both}");
    assert_eq!(incus_status(&client, &taken).as_deref(), Some("Stopped"));
}

/// A sandbox made with `corral new` on an allowlist profile gets its
/// address from the profile's gateway, resolves through the gateway's
/// filtered resolver and reaches the allowlisted name and nothing else;
/// with the profile's tables deleted behind corral's back, `corral new` and
/// `corral start` refuse (exit 1, naming what is missing) and nothing runs.
#[test]
fn an_allowlist_sandbox_from_new_to_rm_through_the_start_gate() {
    if !corral_test_support::gate::netns() {
        return;
    }
    if !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(client) = incus() else { return };
    let lab = HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let (box1, box2) = (unique("allow"), unique("refused"));
    // Declared after the lab: dropped first, before the bridge goes.
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![box1.clone(), box2.clone()],
    };
    let new = |name: &str| {
        in_lab(
            &lab,
            &[
                "new",
                name,
                "--profile",
                "e2e",
                "--image",
                TEST_IMAGE_ALIAS,
                "--json",
            ],
        )
    };

    // Nothing applied yet: refused before anything is created.
    let run = new(&box2).expect_code(1);
    assert!(
        run.stderr.contains("nothing has been applied"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("corral host apply"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &box2), None);

    in_lab(&lab, &["host", "apply"]).expect_code(0);
    let made = new(&box1).expect_code(0).json();
    schema::check(&made);
    let lease = made["ready"]["lease"]
        .as_str()
        .unwrap_or_else(|| panic!("{made}"));
    assert!(
        lab.profile
            .subnet_v4
            .contains(&lease.parse::<std::net::Ipv4Addr>().unwrap()),
        "{lease} is not in {}",
        lab.profile.subnet_v4
    );
    assert_eq!(
        made["gate"]["bridge"],
        lab.profile.bridge.as_str(),
        "{made}"
    );
    let resolv = corral(&["exec", &box1, "-n", "--", "cat", "/etc/resolv.conf"]).expect_code(0);
    assert!(
        resolv
            .stdout
            .contains(&lab.profile.gateway_v4().to_string()),
        "the lease must name the gateway as resolver: {}",
        resolv.stdout
    );

    // Control: the same probes with corral's tables removed behind its back
    // (the gateway still serves DHCP): both destinations answer, so a block
    // below is the rules' doing.
    for family in ["inet", "bridge"] {
        let out = Command::new("nft")
            .args(["delete", "table", family, "corral"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for to in [lab.dns_allowed(), lab.dns_unlisted()] {
        assert!(
            reached(&box1, to),
            "control: {to} must answer without corral's rules"
        );
    }

    // With the tables gone, the start gate refuses, names what is missing,
    // and nothing starts.
    let run = new(&box2).expect_code(1);
    assert!(run.stderr.contains("table inet corral"), "{}", run.stderr);
    assert!(run.stderr.contains("corral host apply"), "{}", run.stderr);
    assert_eq!(
        incus_status(&client, &box2),
        None,
        "a refused new created it"
    );
    corral(&["stop", "--force", &box1]).expect_code(0);
    let run = in_lab(&lab, &["start", &box1]).expect_code(1);
    assert!(
        run.stderr.contains("profile `e2e` is not enforced"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("table bridge corral"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &box1).as_deref(), Some("Stopped"));
    let run = in_lab(&lab, &["restart", &box1]).expect_code(1);
    assert!(run.stderr.contains("corral host apply"), "{}", run.stderr);
    assert_eq!(incus_status(&client, &box1).as_deref(), Some("Stopped"));

    // Restored by apply: the sandbox starts and holds its lease again.
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    in_lab(&lab, &["start", &box1]).expect_code(0);
    assert_eq!(incus_status(&client, &box1).as_deref(), Some("Running"));

    // Through the gateway resolver: the allowlisted name answers (and its
    // address enters the profile's set), the unlisted one does not.
    let ok = resolve(&box1, ALLOWED_NAME);
    assert!(
        ok.stdout.contains(&lab.dns_allowed().ip().to_string()),
        "{ALLOWED_NAME} must resolve through the gateway: {ok:?}"
    );
    let refused = resolve(&box1, UNLISTED_NAME);
    assert!(
        !refused
            .stdout
            .contains(&lab.dns_unlisted().ip().to_string()),
        "{UNLISTED_NAME} must not resolve: {refused:?}"
    );
    assert!(
        reached(&box1, lab.dns_allowed()),
        "the allowlisted name must be reachable"
    );
    assert!(
        !reached(&box1, lab.dns_unlisted()),
        "an unlisted address must be blocked"
    );

    let gone = Command::new(CORRAL)
        .args(["rm", "--force", &box1])
        .output()
        .unwrap();
    assert_eq!(gone.status.code(), Some(0));
    assert_eq!(incus_status(&client, &box1), None);
}
