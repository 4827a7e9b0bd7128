//! The audit trail end to end: a real container on an allowlist profile
//! applied by `corral host apply` in the host namespace, `corral log
//! --follow --json` as the collector, and real queries and packets from
//! inside the sandbox. Each decision must come out as exactly one record
//! naming the sandbox.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::sandboxes::{Cleanup, in_lab, incus, reached_with, unique};
use common::{CORRAL, corral, schema};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_tests::hostlab::{ALLOWED_NAME, HostLab, UNLISTED_NAME};
use serde_json::Value;

/// `corral log --follow --json` on the lab, its records (with the instant
/// each line arrived) on a channel; killed on drop.
struct Follow {
    child: Child,
    lines: mpsc::Receiver<(Instant, Value)>,
}

impl Follow {
    fn start(lab: &HostLab) -> Self {
        let mut child = Command::new(CORRAL)
            .args(["log", "--follow", "--json", "--since", "0s"])
            .arg("--config")
            .arg(lab.config_path())
            .arg("--state-dir")
            .arg(lab.state_dir())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { return };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if tx.send((Instant::now(), v)).is_err() {
                    return;
                }
            }
        });
        Self { child, lines }
    }

    /// Every record that arrives within `wait`.
    fn collect(&self, wait: Duration) -> Vec<(Instant, Value)> {
        let deadline = Instant::now() + wait;
        let mut out = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(r) => out.push(r),
                Err(_) => break,
            }
        }
        out
    }
}

impl Drop for Follow {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn of_event<'a>(records: &'a [(Instant, Value)], event: &str) -> Vec<&'a Value> {
    records
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["event"] == event)
        .collect()
}

#[test]
fn decisions_are_recorded_once_naming_the_sandbox() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let Some(client) = incus() else { return };
    let lab = HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let name = unique("audit");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    in_lab(
        &lab,
        &[
            "new",
            &name,
            "--profile",
            "e2e",
            "--image",
            TEST_IMAGE_ALIAS,
        ],
    )
    .expect_code(0);
    let follow = Follow::start(&lab);
    // The collector starts at the end of each gateway's log and re-reads
    // the applied gateways every few seconds: let it settle first.
    let settled = follow.collect(Duration::from_secs(6));
    assert!(
        of_event(&settled, "dns_refused").is_empty(),
        "no query was made yet: {settled:?}"
    );

    let refused = corral(&["exec", &name, "-n", "--", "nslookup", UNLISTED_NAME]);
    assert!(
        !refused
            .stdout
            .contains(&lab.dns_unlisted().ip().to_string()),
        "{refused:?}"
    );
    let answered = corral(&["exec", &name, "-n", "--", "nslookup", ALLOWED_NAME]);
    assert!(
        answered
            .stdout
            .contains(&lab.dns_allowed().ip().to_string()),
        "{answered:?}"
    );
    let records = follow.collect(Duration::from_secs(3));
    for (_, r) in &records {
        if ["blocked", "suppressed", "dns_answered", "dns_refused"]
            .contains(&r["event"].as_str().unwrap_or_default())
        {
            schema::check_as(r, "corral.audit.v1");
        }
    }
    let unlisted: Vec<&Value> = of_event(&records, "dns_refused")
        .into_iter()
        .filter(|v| v["name"] == UNLISTED_NAME && v["qtype"] == "A")
        .collect();
    assert_eq!(unlisted.len(), 1, "{records:#?}");
    assert_eq!(unlisted[0]["sandbox"], name.as_str(), "{records:#?}");
    assert_eq!(unlisted[0]["profile"], "e2e");
    let allowed: Vec<&Value> = of_event(&records, "dns_answered")
        .into_iter()
        .filter(|v| v["name"] == ALLOWED_NAME && v["qtype"] == "A")
        .collect();
    assert_eq!(allowed.len(), 1, "{records:#?}");
    assert_eq!(allowed[0]["sandbox"], name.as_str());
    assert_eq!(
        allowed[0]["addresses"],
        serde_json::json!([lab.dns_allowed().ip().to_string()]),
        "{records:#?}"
    );
    // Blocked packets: a TCP connect to the unlisted address (rejected:
    // one packet), none for the allowlisted one. Measured: how long from
    // starting the probe (corral exec included) to the record on stdout.
    let started = Instant::now();
    assert!(
        !reached_with(None, &name, lab.dns_unlisted()),
        "the unlisted address must be blocked"
    );
    assert!(
        reached_with(None, &name, lab.dns_allowed()),
        "the allowlisted address must answer"
    );
    let records = follow.collect(Duration::from_secs(3));
    let blocked: Vec<&(Instant, Value)> = records
        .iter()
        .filter(|(_, v)| v["event"] == "blocked")
        .collect();
    let to_unlisted: Vec<&Value> = blocked
        .iter()
        .map(|(_, v)| v)
        .filter(|v| v["dst"] == lab.dns_unlisted().ip().to_string())
        .collect();
    assert_eq!(to_unlisted.len(), 1, "{records:#?}");
    let b = to_unlisted[0];
    schema::check_as(b, "corral.audit.v1");
    assert_eq!(b["sandbox"], name.as_str(), "{b}");
    assert_eq!(b["profile"], "e2e");
    assert_eq!(b["rule"], "e2e-out/unlisted", "{b}");
    assert_eq!(b["protocol"], "tcp");
    assert_eq!(b["dport"], lab.dns_unlisted().port());
    assert_eq!(b["verdict"], "reject");
    assert!(
        !blocked
            .iter()
            .any(|(_, v)| v["dst"] == lab.dns_allowed().ip().to_string()),
        "an allowed connection makes no record: {records:#?}"
    );
    let seen = blocked
        .iter()
        .find(|(_, v)| v["dst"] == lab.dns_unlisted().ip().to_string())
        .map(|(at, _)| at.duration_since(started))
        .unwrap();
    println!("blocked connect -> record on `corral log --follow`: {seen:?} (probe start to line)");

    // The same records are in the trail for later readers.
    let trail = in_lab(
        &lab,
        &["log", "--json", "--kind", "dns", "--sandbox", &name],
    )
    .expect_code(0);
    assert!(trail.stdout.contains(UNLISTED_NAME), "{trail:?}");

    // The sandbox's whole trail as OCSF events, checked against the OCSF
    // schema itself: the real records of this run (its lifecycle, its
    // verification, its DNS decisions, its blocked connection).
    let ocsf = in_lab(&lab, &["log", "--format", "ocsf", "--sandbox", &name]).expect_code(0);
    let classes: std::collections::BTreeSet<u64> = ocsf
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["class_uid"]
                .as_u64()
                .unwrap()
        })
        .collect();
    for class in [4001, 4003, 6002, 2003] {
        assert!(
            classes.contains(&class),
            "no class {class}: {}",
            ocsf.stdout
        );
    }
    if let Some(checker) = corral_test_support::ocsf::checker() {
        let v = checker.check(&ocsf.stdout).unwrap();
        assert!(v.valid, "{}\n{}", v.report, ocsf.stdout);
        println!("corral log --format ocsf: {}", v.report.trim());
    }
    corral(&["rm", "--force", &name]).expect_code(0);
}
