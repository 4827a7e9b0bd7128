//! The audit trail over HTTP: the real corrald lists what the trail holds
//! with `corral log`'s filters, and streams what is appended as
//! server-sent events.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{HeldNetns, Server, TOKEN, assert_error};
use corral_sandbox_core::audit::{Blocked, NetRecord};
use corral_sandbox_core::verify::Timestamp;
use corral_service::Event;
use corral_service::audit::{AuditLog, Entry};

fn blocked(sandbox: &str, profile: &str, dport: u16) -> Entry {
    Entry::Net(NetRecord::Blocked(Blocked {
        sandbox: Some(sandbox.into()),
        profile: profile.into(),
        rule: format!("{profile}-out/unlisted"),
        src: "10.90.0.5".parse().unwrap(),
        dst: "192.0.2.1".parse().unwrap(),
        protocol: "tcp".into(),
        sport: Some(40000),
        dport: Some(dport),
        verdict: "drop".into(),
    }))
}

fn now() -> Timestamp {
    Timestamp(
        u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap(),
    )
}

#[test]
fn the_trail_is_listed_with_filters_and_streamed_as_it_grows() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let no_incus = "/nonexistent/incus.socket";
    // corrald collects the kernel's drop log of the namespace it enforces
    // in: a namespace of its own, so blocked packets of tests running
    // beside this one (in the host's) never reach this trail.
    let held = HeldNetns::new();
    let ns = held.path();
    let server = Server::start(&[
        "--listen",
        "127.0.0.1:0",
        "--incus-socket",
        no_incus,
        "--netns",
        &ns,
    ]);
    let dir = server.state.as_ref().unwrap().path().to_owned();
    let log = AuditLog::open(&dir).unwrap();
    log.append(now(), blocked("a", "dev", 443)).unwrap();
    log.append(now(), blocked("b", "web", 80)).unwrap();
    log.append(now(), Entry::Sandbox(Event::Started { name: "a".into() }))
        .unwrap();

    let (s, v) = server.get("/v1/audit");
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["records"].as_array().unwrap().len(), 3, "{v}");
    assert_eq!(v["records"][0]["event"], "blocked");
    assert_eq!(v["records"][0]["dport"], 443);
    assert!(v["records"][0]["time"].as_str().unwrap().ends_with('Z'));
    let (_, v) = server.get("/v1/audit?sandbox=a");
    assert_eq!(v["records"].as_array().unwrap().len(), 2, "{v}");
    let (_, v) = server.get("/v1/audit?kind=blocked&profile=web");
    assert_eq!(v["records"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["records"][0]["sandbox"], "b");
    let (_, v) = server.get("/v1/audit?kind=lifecycle&since=1h");
    assert_eq!(v["records"][0]["event"], "started", "{v}");
    let (_, v) = server.get("/v1/audit?last=1");
    assert_eq!(v["records"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["format"], "corral", "{v}");
    // The same records as OCSF events: Network Activity for the blocked
    // packets, Application Lifecycle for the start; valid against the
    // OCSF schema itself.
    let (s, v) = server.get("/v1/audit?format=ocsf");
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["format"], "ocsf", "{v}");
    let records = v["records"].as_array().unwrap();
    let classes: Vec<u64> = records
        .iter()
        .map(|r| r["class_uid"].as_u64().unwrap())
        .collect();
    assert_eq!(classes, [4001, 4001, 6002], "{v}");
    assert_eq!(records[0]["dst_endpoint"]["port"], 443, "{v}");
    assert_eq!(records[0]["unmapped"]["corral"]["event"], "blocked", "{v}");
    if let Some(checker) = corral_test_support::ocsf::checker() {
        let lines: String = records.iter().map(|r| format!("{r}\n")).collect();
        let verdict = checker.check(&lines).unwrap();
        assert!(verdict.valid, "{}", verdict.report);
    }
    for bad in [
        "/v1/audit?kind=nope",
        "/v1/audit?since=yesterday",
        "/v1/audit?last=0",
        "/v1/audit?color=red",
        "/v1/audit?format=xml",
        "/v1/events/stream?last=5",
    ] {
        let (s, v) = server.get(bad);
        assert_error(s, &v, 400, "bad_request");
    }

    // The stream: only records appended after it starts, filtered.
    let mut stream = TcpStream::connect(&server.addr).unwrap();
    write!(
        stream,
        "GET /v1/events/stream?kind=blocked HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n",
        server.addr
    )
    .unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut got = String::new();
    let read_until = |got: &mut String, stream: &mut TcpStream, want: &str| {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !got.contains(want) && Instant::now() < deadline {
            let mut buf = [0u8; 4096];
            if let Ok(n) = stream.read(&mut buf) {
                got.push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        }
    };
    read_until(&mut got, &mut stream, "\r\n\r\n");
    let head = got.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{got}");
    assert!(head.contains("content-type: text/event-stream"), "{got}");
    log.append(now(), Entry::Sandbox(Event::Stopped { name: "a".into() }))
        .unwrap();
    let appended = Instant::now();
    log.append(now(), blocked("a", "dev", 8443)).unwrap();
    read_until(&mut got, &mut stream, "8443");
    assert!(
        appended.elapsed() < Duration::from_secs(5),
        "no event within 5 s: {got}"
    );
    assert!(got.contains("event: blocked"), "{got}");
    assert!(got.contains("\"dport\":8443"), "{got}");
    // Neither the records before the stream nor the filtered-out one.
    assert!(!got.contains("\"dport\":443,"), "{got}");
    assert!(!got.contains("stopped"), "{got}");
}
