//! corrald end to end: the real binary on a loopback port (and a unix
//! socket), real HTTP requests; as root, host routes against a network
//! namespace the test made and applied through the library.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::process::Command;

use common::{HeldNetns, Server, assert_error, request};
use corral_egress::host::{AppliedInputs, Host, StateStore, plan_settings};
use corral_egress::netns::Netns;
use corral_egress::plan::HostPlan;
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;

fn get(server: &Server, path: &str) -> (u16, serde_json::Value) {
    server.get(path)
}

#[test]
fn health_matrix_profiles_and_errors_over_tcp() {
    let server = Server::start(&["--listen", "127.0.0.1:0"]);
    // Nothing was applied to this state directory: degraded, with the
    // answer still describing the server.
    let (s, health) = get(&server, "/v1/health");
    assert_eq!(s, 503, "{health}");
    assert_eq!(health["status"], "degraded");
    assert_eq!(health["checks"]["config"]["ok"], false);
    assert_eq!(health["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(health["provider"]["kind"], "incus");
    assert_eq!(
        health["provider"]["classification"]["enforcement"],
        "enforced"
    );

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
    assert_error(s, &bad, 400, "bad_request");
    assert!(
        bad["error"]["message"].as_str().unwrap().contains("linux"),
        "{bad}"
    );

    let (s, profiles) = get(&server, "/v1/profiles");
    assert_eq!(s, 200);
    let names: Vec<&str> = profiles["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["isolated", "internet", "allowlist"]);
    // The same object the CLI prints for the same configuration.
    let cli = Command::new(common::corral_bin())
        .args(["profiles", "--json"])
        .env_remove("CORRAL_CONFIG")
        .output()
        .unwrap();
    assert!(cli.status.success(), "{cli:?}");
    let cli: serde_json::Value = serde_json::from_slice(&cli.stdout).unwrap();
    assert_eq!(profiles, cli);

    let (s, body) = get(&server, "/v1/nope");
    assert_error(s, &body, 404, "no_route");
    let (s, body) = server.call("PUT", "/v1/health", None);
    assert_error(s, &body, 405, "method_not_allowed");
    let (s, body) = server.call("PATCH", "/v1/sandboxes", None);
    assert_error(s, &body, 405, "method_not_allowed");
}

#[test]
fn the_store_is_opened_and_the_gate_and_events_served() {
    // No Incus behind it: at start corrald reconciles its database with the
    // backend, and the shared daemon may hold other tests' sandboxes.
    let no_incus = "/nonexistent/incus.socket";
    let mut server = Server::start(&["--listen", "127.0.0.1:0", "--incus-socket", no_incus]);
    // Kept beyond this server's life: the next one opens the same store.
    let state = server.state.take().unwrap();
    let dir = state.path().to_owned();
    let db = dir.join("corral.db");
    assert_eq!(
        std::fs::metadata(&db).unwrap().permissions().mode() & 0o7777,
        0o600
    );
    let (s, v) = get(&server, "/v1/verification");
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["path"], db.display().to_string());
    // The built-in configuration opts no kind in; nothing is demoted.
    assert_eq!(v["opted_in"], serde_json::json!([]));
    assert_eq!(v["kinds"], serde_json::json!([]));
    assert_eq!(v["sandboxes"], serde_json::json!([]));
    assert!(v["now"].as_u64().unwrap() > 1_577_836_800_000);
    let (s, e) = get(&server, "/v1/events");
    assert_eq!(s, 200, "{e}");
    assert_eq!(e["events"], serde_json::json!([]));
    let (s, e) = get(&server, "/v1/events?limit=0");
    assert_error(s, &e, 400, "bad_request");
    drop(server);

    // An older corral's gate record is imported once, then removed.
    let legacy = dir.join("verification.json");
    std::fs::write(
        &legacy,
        r#"{"demotions":{"tart":{"until":4102444800000,"reason":"failed: canary destination blocked"}}}"#,
    )
    .unwrap();
    std::fs::set_permissions(&legacy, std::fs::Permissions::from_mode(0o600)).unwrap();
    let again = Server::start_exact(&[
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--incus-socket".into(),
        no_incus.into(),
        "--state-dir".into(),
        dir.display().to_string(),
    ]);
    assert!(!legacy.exists());
    let (_, v) = get(&again, "/v1/verification");
    assert_eq!(v["kinds"][0]["kind"], "tart", "{v}");
    assert_eq!(v["kinds"][0]["status"], "not-opted-in", "{v}");
    assert_eq!(
        v["kinds"][0]["demotion_reason"],
        "failed: canary destination blocked"
    );
    drop(again);

    // A legacy record that does not parse stops the server, naming it.
    std::fs::write(&legacy, "{not json").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .arg("--socket")
        .arg(dir.join("corrald.sock"))
        .arg("--state-dir")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("verification.json"), "{err}");
}

#[test]
fn providers_the_matrix_refuses_are_usage_errors() {
    let state = tempfile::tempdir().unwrap();
    for (kind, words) in [
        ("tart", "tart is not supported on linux"),
        ("process", "does not enforce egress"),
        ("multipass", "corral can drive only incus"),
        ("beos", "unknown sandbox kind"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
            .arg("--socket")
            .arg(state.path().join("corrald.sock"))
            .args(["--provider", kind, "--state-dir"])
            .arg(state.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{kind}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(words), "{kind}: {err}");
    }
}

#[test]
fn unix_socket_and_refusals() {
    let dir = tempfile::tempdir().unwrap();
    // Missing directories are created 0750; the socket is 0660.
    let sock = dir.path().join("run/corral/corrald.sock");
    let server = Server::start(&["--socket", sock.to_str().unwrap()]);
    assert_eq!(server.addr, sock.to_str().unwrap());
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode(&sock), 0o660);
    assert_eq!(mode(&dir.path().join("run/corral")), 0o750);
    assert_eq!(mode(&dir.path().join("run")), 0o750);
    let (s, health) = request(
        UnixStream::connect(&sock).unwrap(),
        "GET",
        "/v1/health",
        None,
    );
    assert_eq!(
        health["version"],
        env!("CARGO_PKG_VERSION"),
        "{s}: {health}"
    );

    let (_tokens, token) = common::token_file();
    let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .args(["--listen", "0.0.0.0:0", "--state-dir"])
        .arg(dir.path())
        .arg("--token-file")
        .arg(&token)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in clear"));
    assert!(
        !dir.path().join("verification.json").exists(),
        "a refused start must write nothing"
    );

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

#[test]
fn host_routes_read_a_namespace_the_test_applied() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // A process holds the namespace; corrald opens it by path; the guard
    // kills it even when an assertion fails; the kernel frees the rest.
    let held = HeldNetns::new();
    let ns_path = held.path();
    let state = tempfile::tempdir().unwrap();
    let server = Server::start_exact(&[
        "--listen".to_owned(),
        "127.0.0.1:0".to_owned(),
        "--netns".to_owned(),
        ns_path.clone(),
        "--state-dir".to_owned(),
        state.path().display().to_string(),
    ]);

    let (s, plan) = get(&server, "/v1/host/plan");
    assert_eq!(s, 200, "{plan}");
    assert_eq!(plan["in_sync"], false);
    assert!(plan["nft"].as_str().unwrap().contains("table inet corral"));
    let (s, verify) = get(&server, "/v1/host/verify");
    assert_eq!(s, 409, "drift must answer 409: {verify}");
    assert_eq!(verify["in_sync"], false);
    assert!(!verify["drift"].as_array().unwrap().is_empty(), "{verify}");
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

    // explain: the plan in force, traced; a block is an answer (200) too.
    let (s, e) = get(
        &server,
        "/v1/explain?profile=allowlist&dest=203.0.113.10:443",
    );
    assert_eq!(s, 200, "{e}");
    assert_eq!(e["verdict"], "allow");
    assert!(
        e["plan"].as_str().unwrap().contains("what was applied"),
        "{e}"
    );
    assert_eq!(
        e["answers"][0]["trace"]["entries"][0],
        "203.0.113.10:443/tcp"
    );
    let (s, e) = get(
        &server,
        "/v1/explain?profile=internet&dest=169.254.169.254:80",
    );
    assert_eq!(s, 200, "{e}");
    assert_eq!(e["verdict"], "block");
    assert_eq!(e["answers"][0]["trace"]["set"]["name"], "reserved4");
    // The verdict is the kernel's: with no drift it is the plan's (the
    // control); an accept inserted behind corral's back turns the block
    // into an allow, with the drift and the plan's verdict beside it.
    let (s, e) = get(
        &server,
        "/v1/explain?profile=allowlist&dest=203.0.113.10:80",
    );
    assert_eq!(s, 200, "{e}");
    assert_eq!(
        (&e["verdict"], &e["plan_verdict"]),
        (&"block".into(), &"block".into()),
        "{e}"
    );
    assert_eq!(e["drift"].as_array().unwrap().len(), 0, "{e}");
    let tamper = Command::new("nsenter")
        .arg(format!("--net={ns_path}"))
        .args(["nft", "insert", "rule", "inet", "corral", "allowlist-out"])
        .args([
            "ip",
            "daddr",
            "203.0.113.10",
            "tcp",
            "dport",
            "80",
            "accept",
        ])
        .output()
        .unwrap();
    assert!(tamper.status.success(), "{tamper:?}");
    let (s, e) = get(
        &server,
        "/v1/explain?profile=allowlist&dest=203.0.113.10:80",
    );
    assert_eq!(s, 200, "{e}");
    assert_eq!(
        (&e["verdict"], &e["plan_verdict"]),
        (&"allow".into(), &"block".into()),
        "{e}"
    );
    assert_eq!(e["drift"][0]["kind"], "extra", "{e}");
    assert_eq!(
        e["answers"][0]["live"]["rule"]["chain"], "allowlist-out",
        "{e}"
    );
    let (s, e) = get(&server, "/v1/explain?profile=nope&dest=203.0.113.10:443");
    assert_error(s, &e, 404, "unknown_profile");
    let (s, e) = get(&server, "/v1/explain?profile=internet&dest=1.2.3.4:0");
    assert_error(s, &e, 400, "bad_request");
    let (s, e) = get(&server, "/v1/explain?dest=1.2.3.4:80");
    assert_error(s, &e, 400, "bad_request");
    assert!(
        status["bridges"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["present"] == true && b["up"] == true),
        "{status}"
    );
    drop(server);
    drop(held);
}

#[test]
fn unresolvable_names_are_422_naming_each_and_client_errors_log_one_plain_line() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("corral.toml");
    std::fs::write(
        &config,
        r#"
[[profile]]
name = "a"
bridge = "corral-t422a"
subnet = "10.81.0.0/24"
mode = "allowlist"
allow = ["first.corral-test.invalid", "second.corral-test.invalid:443"]

[[profile]]
name = "b"
bridge = "corral-t422b"
subnet = "10.82.0.0/24"
mode = "allowlist"
allow = ["third.corral-test.invalid"]
"#,
    )
    .unwrap();
    let log = dir.path().join("corrald.log");
    let state = tempfile::tempdir().unwrap();
    let server = Server::start_with(
        &[
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--config".into(),
            config.display().to_string(),
            "--state-dir".into(),
            state.path().display().to_string(),
        ],
        &[("RUST_BACKTRACE", "1"), ("RUST_LOG", "info")],
        Some(log.clone()),
    );
    let (s, body) = get(&server, "/v1/host/plan");
    assert_error(s, &body, 422, "unresolved_names");
    let msg = body["error"]["message"].as_str().unwrap();
    for name in [
        "first.corral-test.invalid",
        "second.corral-test.invalid",
        "third.corral-test.invalid",
    ] {
        assert!(msg.contains(name), "{name}: {msg}");
    }
    assert!(msg.starts_with("3 allowlisted host name(s)"), "{msg}");

    let (s, body) = get(&server, "/v1/nope");
    assert_error(s, &body, 404, "no_route");
    drop(server);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("request refused"), "{text}");
    assert!(text.contains("INFO"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "ANSI colour in a log file: {text}"
    );
    assert!(
        !text.to_lowercase().contains("backtrace"),
        "a client error logged a backtrace: {text}"
    );
}
