//! Lifetimes enforced by a running corrald on real Incus containers. A
//! sandbox made with a 3 s
//! time to live is deleted (`expired`, then `deleted`) while its control,
//! made the same way without one, runs on. Of two sandboxes with the same
//! 4 s idle limit, the one with nothing running in it is stopped
//! (`idle_stopped`, then `stopped`), while the one with a command running
//! through corrald's exec all that time keeps running; once its command
//! ends it is stopped in turn (no network there: idle is exec sessions
//! alone). On a real profile, a sandbox sending packets runs on while a
//! silent one with the same limit is stopped, and is stopped in turn once
//! it falls silent. Deadlines are
//! generous bounds for a loaded machine, never the measure.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::Server;
use common::incus::{Cleanup, incus_socket, raw_client, server, status, unique};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use serde_json::{Value, json};

const PATIENCE: Duration = Duration::from_secs(120);

fn make(srv: &Server, name: &str, extra: Value) {
    let mut body = json!({"name": name, "image": TEST_IMAGE_ALIAS});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let (s, out) = srv.call("POST", "/v1/sandboxes", Some(&body));
    assert_eq!(s, 201, "{out}");
    let (s, out) = srv.call("POST", &format!("/v1/sandboxes/{name}/start"), None);
    assert_eq!(s, 200, "{out}");
}

fn event_names(srv: &Server, name: &str) -> Vec<String> {
    let (s, body) = srv.get(&format!("/v1/events?sandbox={name}"));
    assert_eq!(s, 200, "{body}");
    body["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap_or_default().to_owned())
        .collect()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(
            started.elapsed() < PATIENCE,
            "{what}: not within {PATIENCE:?}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!("{what}: after {} ms", started.elapsed().as_millis());
}

#[test]
fn a_sandbox_past_its_time_to_live_is_deleted_and_one_without_runs_on() {
    let Some(socket) = incus_socket("lifetimes-ttl") else {
        return;
    };
    let client = raw_client(&socket);
    let (short, control) = (unique("ttl"), unique("ttl-ctl"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![short.clone(), control.clone()],
    };
    let srv = server(&socket);
    make(&srv, &short, json!({"ttl_secs": 3}));
    make(&srv, &control, json!({}));
    // The list says when it ends; the control has no lifetime.
    let (s, list) = srv.get("/v1/sandboxes");
    assert_eq!(s, 200, "{list}");
    if status(&client, &short).is_some() {
        assert_eq!(list["lifetimes"][&short]["ttl_secs"], 3, "{list:#}");
        assert!(
            list["lifetimes"][&short]["expires_at"].is_string(),
            "{list:#}"
        );
    }
    assert!(list["lifetimes"].get(&control).is_none(), "{list:#}");
    wait_for("the expired sandbox is gone", || {
        status(&client, &short).is_none()
    });
    let names = event_names(&srv, &short);
    let expired = names.iter().position(|e| e == "expired");
    let deleted = names.iter().position(|e| e == "deleted");
    assert!(
        matches!((expired, deleted), (Some(a), Some(b)) if a < b),
        "expired, then deleted: {names:?}"
    );
    assert_eq!(status(&client, &control).as_deref(), Some("Running"));
    assert!(
        !event_names(&srv, &control).iter().any(|e| e == "expired"),
        "the control did not expire"
    );
    // Counted in /metrics, from the trail (folded in as it is followed).
    wait_for("the expiry in /metrics", || {
        let (s, _, body) = srv.bytes("GET", "/metrics", None, b"");
        s == 200
            && String::from_utf8_lossy(&body)
                .lines()
                .any(|l| l == r#"corral_sandbox_lifetime_ends_total{event="expired"} 1"#)
    });
}

#[test]
fn an_idle_sandbox_is_stopped_and_one_running_a_command_is_not() {
    let Some(socket) = incus_socket("lifetimes-idle") else {
        return;
    };
    let client = raw_client(&socket);
    let (idle, busy) = (unique("idle"), unique("busy"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![idle.clone(), busy.clone()],
    };
    let srv = server(&socket);
    make(&srv, &busy, json!({"idle_stop_secs": 4}));
    std::thread::scope(|scope| {
        // A command that runs longer than the idle sandbox takes to stop.
        let exec = scope.spawn(|| {
            srv.call(
                "POST",
                &format!("/v1/sandboxes/{busy}/exec"),
                Some(&json!({"argv": ["sleep", "60"]})),
            )
        });
        make(&srv, &idle, json!({"idle_stop_secs": 4}));
        wait_for("the idle sandbox's idle_stopped event", || {
            event_names(&srv, &idle).iter().any(|e| e == "idle_stopped")
        });
        // The premise: the busy one's command still runs (it was made
        // first, so its own limit has passed too).
        assert!(
            !exec.is_finished(),
            "the command ended too soon to prove anything"
        );
        assert_eq!(
            status(&client, &busy).as_deref(),
            Some("Running"),
            "a sandbox running a command is not idle"
        );
        assert!(
            !event_names(&srv, &busy).iter().any(|e| e == "idle_stopped"),
            "the busy sandbox was not idle-stopped"
        );
        wait_for("the idle sandbox is stopped", || {
            status(&client, &idle).as_deref() == Some("Stopped")
        });
        let names = event_names(&srv, &idle);
        let (a, b) = (
            names.iter().position(|e| e == "idle_stopped"),
            names.iter().rposition(|e| e == "stopped"),
        );
        assert!(
            matches!((a, b), (Some(a), Some(b)) if a < b),
            "idle_stopped, then stopped: {names:?}"
        );
        let (s, out) = exec.join().unwrap();
        assert_eq!(s, 200, "{out}");
        assert_eq!(out["exit_code"], 0, "{out}");
    });
    // Its command done, the busy one goes idle and is stopped in turn.
    wait_for("the busy sandbox, idle at last, is stopped", || {
        status(&client, &busy).as_deref() == Some("Stopped")
    });
}

/// The packet half of idle, with real packets: two sandboxes on the
/// built-in `isolated` profile (applied for real in the host namespace),
/// the same 6 s idle limit; one runs a `ping` of its gateway in the
/// background (no exec session stays open: only its packets keep it
/// awake), the other sends nothing. The silent one is stopped; the one
/// whose port counts packets from it runs on.
#[test]
fn a_sandbox_sending_packets_stays_and_a_silent_one_stops() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(socket) = incus_socket("lifetimes-traffic") else {
        return;
    };
    let client = raw_client(&socket);
    let lab = corral_tests::builtin_lab::BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let (talker, silent) = (unique("talk"), unique("quiet"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![talker.clone(), silent.clone()],
    };
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let srv = Server::start_exact(&[
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--incus-socket".into(),
        socket.clone(),
        "--config".into(),
        lab.config_path().display().to_string(),
        "--state-dir".into(),
        lab.state_dir().display().to_string(),
    ]);
    make(
        &srv,
        &talker,
        json!({"profile": "isolated", "idle_stop_secs": 6}),
    );
    let (s, info) = srv.get(&format!("/v1/sandboxes/{talker}"));
    assert_eq!(s, 200, "{info}");
    let addr: std::net::Ipv4Addr = info["addresses"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|a| a.as_str()?.parse().ok())
        .unwrap_or_else(|| panic!("no IPv4 address: {info}"));
    // The profile's gateway is the first host of its subnet.
    let o = addr.octets();
    let gateway = std::net::Ipv4Addr::new(o[0], o[1], o[2], 1);
    let (s, out) = srv.call(
        "POST",
        &format!("/v1/sandboxes/{talker}/exec"),
        Some(&json!({"argv": ["sh", "-c", format!("ping -i 1 {gateway} >/dev/null 2>&1 </dev/null &")]})),
    );
    assert_eq!(s, 200, "{out}");
    make(
        &srv,
        &silent,
        json!({"profile": "isolated", "idle_stop_secs": 6}),
    );
    wait_for("the silent sandbox is stopped", || {
        status(&client, &silent).as_deref() == Some("Stopped")
    });
    assert!(
        event_names(&srv, &silent)
            .iter()
            .any(|e| e == "idle_stopped"),
        "{:?}",
        event_names(&srv, &silent)
    );
    // Made first, the talker's limit has passed too: its packets kept it.
    assert_eq!(
        status(&client, &talker).as_deref(),
        Some("Running"),
        "a sandbox sending packets is not idle"
    );
    assert!(
        !event_names(&srv, &talker)
            .iter()
            .any(|e| e == "idle_stopped"),
        "the talker was not idle-stopped"
    );
    // Its ping ended, it falls silent and is stopped in turn: what kept it
    // was its packets, not a counter corral could not read.
    let (s, out) = srv.call(
        "POST",
        &format!("/v1/sandboxes/{talker}/exec"),
        Some(&json!({"argv": ["killall", "ping"]})),
    );
    assert_eq!(s, 200, "{out}");
    wait_for("the talker, silent at last, is stopped", || {
        status(&client, &talker).as_deref() == Some("Stopped")
    });
}
