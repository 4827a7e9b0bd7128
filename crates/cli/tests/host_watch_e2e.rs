//! `corral host watch` end to end: the real `corral` binary, the real
//! Incus daemon and the built-in profiles applied for real
//! (`corral_tests::builtin_lab`). On a host without corrald the watch is
//! what judges an admin's plain `incus start` of a corral sandbox: it runs
//! the start watcher beside the kernel watch and the gateway supervisor.
//!
//! Control: the same out-of-band start with no watch running is judged by
//! nobody (no `unmanaged_start` on record).
//!
//! The watch also heals: `nft delete table inet corral` is re-applied and
//! the healed profile's running sandbox gets its canary again, recorded in
//! the store (corrald leaves that to its watchdog; `corral host watch` runs
//! it itself). Control: with no watch the table stays deleted and no
//! verification is recorded.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::sandboxes::{Cleanup, in_dirs, incus, incus_status, unique};
use corral_provider_incus::{IncusConfig, TEST_IMAGE_ALIAS};
use corral_sandbox_core::verify::EventOutcome;
use corral_service::Store;
use corral_service::hooks::Event;
use corral_service::store::EventQuery;
use corral_tests::builtin_lab::BuiltinLab;

/// How long the control waits for a judgement that must not come (a
/// judged start is on record in well under this here).
const CONTROL_WAIT: Duration = Duration::from_secs(5);

/// `incus start NAME` in corral's project: an admin's start, not corral's.
fn incus_start(name: &str) {
    let out = Command::new("incus")
        .args(["start", name, "--project", &IncusConfig::local().project])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "incus start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The `unmanaged_start` events of `name`: (alert, admitted).
fn judged(state: &Path, name: &str) -> Vec<(bool, bool)> {
    Store::open(state)
        .unwrap()
        .events(&EventQuery {
            sandbox: Some(name.to_owned()),
            ..EventQuery::default()
        })
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::UnmanagedStart { admitted, .. } => Some((e.alert, admitted)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_host_watch_judges_a_start_behind_corrals_back() {
    let Some(client) = incus() else { return };
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("nft", "nftables")
        || !corral_test_support::gate::tool("incus", "incus-client")
    {
        return;
    }
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let (config, state) = (lab.config_path(), lab.state_dir());
    let name = unique("hw");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    let run = |args: &[&str]| in_dirs(&config, &state, args);
    run(&[
        "new",
        &name,
        "--profile",
        "allowlist",
        "--image",
        TEST_IMAGE_ALIAS,
    ])
    .expect_code(0);

    // Control: no watch, nobody judges the start.
    run(&["stop", &name]).expect_code(0);
    incus_start(&name);
    std::thread::sleep(CONTROL_WAIT);
    assert!(judged(&state, &name).is_empty(), "nobody is watching");
    run(&["stop", &name]).expect_code(0);

    let mut watch = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["host", "watch", "--config", config.to_str().unwrap()])
        .args(["--state-dir", state.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let started = Instant::now();
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|l: &String| l.contains("judging Incus starts"))
    {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(l) => seen.push(l),
            Err(e) => {
                let _ = watch.kill();
                panic!("the watch never said it judges starts ({e}): {seen:#?}");
            }
        }
    }

    incus_start(&name);
    let verdicts = loop {
        let v = judged(&state, &name);
        if !v.is_empty() {
            break v;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = watch.kill();
            panic!("the start was not judged: {seen:#?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    // Enforcement intact: admitted, not an alert, still running.
    assert_eq!(verdicts, vec![(false, true)]);
    assert_eq!(incus_status(&client, &name).as_deref(), Some("Running"));

    // SIGTERM ends the watch cleanly.
    // SAFETY: kill(2) on our own child's pid, which has not been reaped.
    let rc = unsafe { libc::kill(i32::try_from(watch.id()).unwrap(), libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// The outcomes of `name`'s verification runs on record.
fn verifications(state: &Path, name: &str) -> Vec<EventOutcome> {
    Store::open(state)
        .unwrap()
        .events(&EventQuery {
            sandbox: Some(name.to_owned()),
            ..EventQuery::default()
        })
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::Verification(v) => Some(v.outcome),
            _ => None,
        })
        .collect()
}

fn healed(state: &Path) -> usize {
    Store::open(state)
        .unwrap()
        .events(&EventQuery::default())
        .unwrap()
        .into_iter()
        .filter(|e| matches!(&e.event, Event::HostDrift { reaction, .. } if reaction == "healed"))
        .count()
}

fn nft(args: &[&str]) -> bool {
    Command::new("nft")
        .args(args)
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn the_host_watch_heals_a_deleted_table_and_reruns_the_canary() {
    let Some(client) = incus() else { return };
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let (config, state) = (lab.config_path(), lab.state_dir());
    let name = unique("hh");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    let run = |args: &[&str]| in_dirs(&config, &state, args);
    run(&[
        "new",
        &name,
        "--profile",
        "allowlist",
        "--image",
        TEST_IMAGE_ALIAS,
    ])
    .expect_code(0);
    let before = verifications(&state, &name);
    assert_eq!(before.last(), Some(&EventOutcome::Passed), "{before:?}");

    // Control: no watch, the deleted table stays deleted and nothing runs
    // the canary.
    assert!(nft(&["delete", "table", "inet", "corral"]));
    std::thread::sleep(CONTROL_WAIT);
    assert!(!nft(&["list", "table", "inet", "corral"]), "nobody heals");
    assert_eq!(verifications(&state, &name).len(), before.len());
    assert_eq!(healed(&state), 0);
    lab.apply().unwrap_or_else(|e| panic!("{e}"));

    let mut watch = Command::new(env!("CARGO_BIN_EXE_corral"))
        .args(["host", "watch", "--config", config.to_str().unwrap()])
        .args(["--state-dir", state.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.contains("watching ")) {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(l) => seen.push(l),
            Err(e) => {
                let _ = watch.kill();
                panic!("the watch never said it watches ({e}): {seen:#?}");
            }
        }
    }

    assert!(nft(&["delete", "table", "inet", "corral"]));
    let started = Instant::now();
    loop {
        if nft(&["list", "table", "inet", "corral"])
            && healed(&state) == 1
            && verifications(&state, &name).len() > before.len()
        {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            let _ = watch.kill();
            panic!(
                "no heal and canary after 120 s: {:?}; {seen:#?}",
                verifications(&state, &name)
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "healed and re-verified {} ms after the deletion",
        started.elapsed().as_millis()
    );
    let after = verifications(&state, &name);
    assert_eq!(
        &after[before.len()..],
        &[EventOutcome::Passed],
        "one canary after the heal, passed: {after:?}"
    );
    assert_eq!(incus_status(&client, &name).as_deref(), Some("Running"));

    // SAFETY: kill(2) on our own child's pid, which has not been reaped.
    let rc = unsafe { libc::kill(i32::try_from(watch.id()).unwrap(), libc::SIGTERM) };
    assert_eq!(rc, 0);
    let status = watch.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
