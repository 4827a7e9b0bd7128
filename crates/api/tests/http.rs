//! corrald end to end: the real binary on a loopback port (and a unix
//! socket), real HTTP requests; as root, host routes against a network
//! namespace the test made and applied through the library.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};

use corral_egress::host::{AppliedInputs, Host, StateStore, plan_settings};
use corral_egress::netns::Netns;
use corral_egress::plan::HostPlan;
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;
use serde_json::Value;

/// A running corrald, killed on drop.
struct Server {
    child: Child,
    addr: String,
}

impl Server {
    fn start(extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_corrald"))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .rsplit(' ')
            .next()
            .unwrap_or_else(|| panic!("no address in `{line}`"))
            .to_owned();
        assert!(line.contains("listening on"), "{line}");
        Self { child, addr }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HTTP/1.0 (no chunking) GET; returns status and parsed body.
fn get_over(mut stream: impl Read + Write, path: &str) -> (u16, Value) {
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("bad answer: {raw}"));
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
    };
    (status, json)
}

fn get(server: &Server, path: &str) -> (u16, Value) {
    get_over(TcpStream::connect(&server.addr).unwrap(), path)
}

#[test]
fn health_matrix_profiles_and_errors_over_tcp() {
    let server = Server::start(&["--listen", "127.0.0.1:0"]);
    let (s, health) = get(&server, "/v1/health");
    assert_eq!(s, 200);
    assert_eq!(health["status"], "ok");
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));

    let (s, matrix) = get(&server, "/v1/matrix");
    assert_eq!(s, 200);
    assert_eq!(matrix.as_array().unwrap().len(), 24);
    let (s, mac) = get(&server, "/v1/matrix?host=macos");
    assert_eq!(s, 200);
    assert!(
        mac.as_array()
            .unwrap()
            .iter()
            .all(|e| e["host_os"] == "macos")
    );
    let (s, bad) = get(&server, "/v1/matrix?host=beos");
    assert_eq!(s, 400);
    assert!(bad["error"].as_str().unwrap().contains("linux"), "{bad}");

    let (s, profiles) = get(&server, "/v1/profiles");
    assert_eq!(s, 200);
    let names: Vec<&str> = profiles["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["isolated", "internet", "allowlist"]);

    let (s, _) = get(&server, "/v1/nope");
    assert_eq!(s, 404);
}

#[test]
fn unix_socket_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("corrald.sock");
    let server = Server::start(&["--socket", sock.to_str().unwrap()]);
    assert_eq!(server.addr, sock.to_str().unwrap());
    let (s, health) = get_over(UnixStream::connect(&sock).unwrap(), "/v1/health");
    assert_eq!(s, 200);
    assert_eq!(health["status"], "ok");

    let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no authentication"));

    std::fs::write(
        dir.path().join("bad.conf"),
        "a corral-a 10.80.0.0/24 - extra\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .args([
            "--networks-conf",
            dir.path().join("bad.conf").to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.conf:1"));
}

fn require_root(test: &str) -> bool {
    match Netns::new() {
        Ok(_) => true,
        Err(e) => {
            let msg = format!("{test}: needs root to create a network namespace: {e}");
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
            eprintln!("skipped: {msg}");
            false
        }
    }
}

#[test]
fn host_routes_read_a_namespace_the_test_applied() {
    if !require_root("host_routes_read_a_namespace_the_test_applied") {
        return;
    }
    // A process holds the namespace; corrald opens it by path. The guard
    // kills it even when an assertion fails; the kernel frees the rest.
    struct Holder(Child);
    impl Drop for Holder {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let holder = Holder(
        Command::new("unshare")
            .args(["--net", "sleep", "120"])
            .spawn()
            .unwrap(),
    );
    let ns_path = format!("/proc/{}/ns/net", holder.0.id());
    // Wait until the holder has left our namespace.
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    for _ in 0..100 {
        if std::fs::read_link(&ns_path).is_ok_and(|l| l != ours) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_ne!(std::fs::read_link(&ns_path).unwrap(), ours);
    let state = tempfile::tempdir().unwrap();
    let server = Server::start(&[
        "--listen",
        "127.0.0.1:0",
        "--netns",
        &ns_path,
        "--state-dir",
        state.path().to_str().unwrap(),
    ]);

    let (s, plan) = get(&server, "/v1/host/plan");
    assert_eq!(s, 200, "{plan}");
    assert_eq!(plan["in_sync"], false);
    assert!(plan["nft"].as_str().unwrap().contains("table inet corral"));
    let (s, verify) = get(&server, "/v1/host/verify");
    assert_eq!(s, 200);
    assert_eq!(verify["in_sync"], false);
    assert_eq!(verify["basis"], "configuration");

    // Apply through the library, record it, and the API sees it.
    let config = Config::builtin_default();
    let plan = HostPlan::build(
        &config.profiles,
        &plan_settings(&config.host),
        &Resolution::new(),
    )
    .unwrap();
    Host::in_netns(Netns::open(&ns_path).unwrap())
        .apply(&plan)
        .unwrap();
    StateStore::new(state.path())
        .save(&AppliedInputs::new(&config, Resolution::new()))
        .unwrap();

    let (s, verify) = get(&server, "/v1/host/verify");
    assert_eq!(s, 200);
    assert_eq!(verify["in_sync"], true, "{verify}");
    assert_eq!(verify["basis"], "applied");
    let (s, status) = get(&server, "/v1/host/status");
    assert_eq!(s, 200, "{status}");
    assert_eq!(status["drift"], 0);
    assert!(
        status["bridges"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["present"] == true && b["up"] == true),
        "{status}"
    );
    drop(server);
    drop(holder);
}
