//! corrald's durable state over real HTTP against the real Incus daemon:
//! each sandbox's owner and template recorded in corral's database, a
//! restricted Unix user (a real second user, over the socket) acting on its
//! own sandboxes only, and a `kill -9` in the middle of a create after
//! which the database and Incus agree again (the orphan adopted, and said
//! so in the event log).

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use common::incus::{PrefixCleanup, runtime};
use common::{Server, as_user, request};
use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::{SandboxProvider as _, SandboxSpec};
use corral_service::Store;
use corral_test_support::TestUser;
use serde_json::json;

fn provider(socket: &Path) -> IncusProvider {
    let mut config = IncusConfig::local();
    config.endpoint = corral_provider_incus::Endpoint::Unix(socket.to_owned());
    runtime()
        .block_on(IncusProvider::connect(config))
        .unwrap_or_else(|e| panic!("cannot connect to Incus: {e}"))
}

/// The database's sandbox names with the prefix.
fn recorded(state: &Path, prefix: &str) -> BTreeSet<String> {
    Store::open(state)
        .unwrap()
        .sandboxes()
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[test]
fn a_restricted_user_acts_on_its_own_sandboxes_only() {
    if !corral_test_support::gate::tool("curl", "curl") {
        return;
    }
    let Some(socket) = corral_test_support::gate::incus() else {
        return;
    };
    let Some(user) = TestUser::create() else {
        return;
    };
    let prefix = format!("t-own-{}-", std::process::id());
    let guard = PrefixCleanup {
        client: provider(&socket).client().clone(),
        prefix: prefix.clone(),
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("corrald.sock");
    // The user's own group is both who may connect and who holds rights.
    let srv = Server::start(&[
        "--socket",
        sock.to_str().unwrap(),
        "--socket-group",
        &user.name,
        "--users-group",
        &user.name,
        "--incus-socket",
        socket.to_str().unwrap(),
    ]);
    let state = srv.state.as_ref().unwrap().path().to_owned();
    let (mine, roots) = (format!("{prefix}mine"), format!("{prefix}roots"));

    // Root (an admin) makes one; the user makes one.
    let (s, body) = request(
        UnixStream::connect(&sock).unwrap(),
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": roots, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = as_user(
        &user,
        &sock,
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": mine, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{body}");

    // The database holds each one's owner and template.
    let db = Store::open(&state).unwrap();
    let rec = db.sandbox(&mine).unwrap().unwrap();
    assert_eq!(rec.owner, Some(user.uid));
    assert_eq!(
        rec.template.as_deref(),
        Some("blank"),
        "the default template"
    );
    assert_eq!(db.sandbox(&roots).unwrap().unwrap().owner, Some(0));

    // The user sees and acts on its own; the other is refused.
    let (s, list) = as_user(&user, &sock, "GET", "/v1/sandboxes", None);
    assert_eq!(s, 200, "{list}");
    let names: Vec<&str> = list["sandboxes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["name"].as_str())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert_eq!(names, [mine.as_str()]);
    let (s, body) = as_user(&user, &sock, "GET", &format!("/v1/sandboxes/{mine}"), None);
    assert_eq!(s, 200, "{body}");
    for (method, path) in [
        ("GET", format!("/v1/sandboxes/{roots}")),
        ("POST", format!("/v1/sandboxes/{roots}/start")),
        ("DELETE", format!("/v1/sandboxes/{roots}")),
    ] {
        let (s, body) = as_user(&user, &sock, method, &path, None);
        common::assert_error(s, &body, 403, "not_owner");
    }
    // Admin routes stay closed to it.
    let (s, body) = as_user(&user, &sock, "GET", "/v1/events", None);
    common::assert_error(s, &body, 403, "forbidden");
    // Root still sees both; the user deletes its own.
    let (_, list) = request(
        UnixStream::connect(&sock).unwrap(),
        "GET",
        "/v1/sandboxes",
        None,
    );
    assert_eq!(
        list["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["name"].as_str().unwrap_or_default().starts_with(&prefix))
            .count(),
        2
    );
    let (s, body) = as_user(
        &user,
        &sock,
        "DELETE",
        &format!("/v1/sandboxes/{mine}"),
        None,
    );
    assert_eq!(s, 200, "{body}");
    assert!(
        db.sandbox(&mine).unwrap().is_none(),
        "the record went with it"
    );
    drop(srv);
    drop(guard);
}

#[test]
fn after_a_kill_during_create_the_database_and_incus_agree() {
    let Some(socket) = corral_test_support::gate::incus() else {
        return;
    };
    let prefix = format!("t-kill-{}-", std::process::id());
    let incus = provider(&socket);
    let guard = PrefixCleanup {
        client: incus.client().clone(),
        prefix: prefix.clone(),
    };
    let state = tempfile::tempdir().unwrap();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "--listen",
            "127.0.0.1:0",
            "--incus-socket",
            socket.to_str().unwrap(),
            "--state-dir",
            state.path().to_str().unwrap(),
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        v.extend(extra.iter().map(|s| (*s).to_owned()));
        v
    };

    // An orphan for certain: a sandbox corral's provider made (stamped)
    // that no database recorded, as when corrald dies between the two.
    let orphan = format!("{prefix}orphan");
    runtime()
        .block_on(incus.create(&SandboxSpec::new(
            SandboxName::new(&orphan).unwrap(),
            TEST_IMAGE_ALIAS,
        )))
        .unwrap();
    // And a record whose sandbox is gone.
    let ghost = format!("{prefix}ghost");
    Store::open(state.path())
        .unwrap()
        .add_sandbox(&corral_service::store::SandboxRecord {
            name: ghost.clone(),
            kind: corral_sandbox_core::SandboxKind::Incus,
            profile: None,
            created: corral_sandbox_core::verify::Timestamp(1),
            last_verified: None,
            verdict: None,
            owner: Some(0),
            template: None,
        })
        .unwrap();

    // Now a real kill -9 in the middle of a create: the request is sent,
    // and corrald dies as soon as Incus has the instance (before or after
    // the database write, whichever came first).
    let srv = Server::start_exact(&args(&[]));
    let killed = format!("{prefix}killed");
    let addr = srv.addr.clone();
    let body = json!({"name": killed, "image": TEST_IMAGE_ALIAS});
    let sender = std::thread::spawn(move || {
        // The answer may never come: the server dies.
        let _ = std::panic::catch_unwind(|| {
            common::send(
                std::net::TcpStream::connect(&addr).unwrap(),
                &common::Req {
                    method: "POST",
                    path: "/v1/sandboxes",
                    host: &addr,
                    headers: &[("Authorization", &format!("Bearer {}", common::TOKEN))],
                    body: Some(&body.to_string()),
                    content_type: Some("application/json"),
                },
            )
        });
    });
    for _ in 0..600 {
        if guard.instances().contains(&killed) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        guard.instances().contains(&killed),
        "the create never reached Incus"
    );
    srv.kill();
    sender.join().unwrap();

    // Restarted on the same state: it reconciles before serving.
    let log = state.path().parent().unwrap().join(format!(
        "corrald-{}.log",
        state.path().file_name().unwrap().to_string_lossy()
    ));
    let srv = Server::start_with(&args(&[]), &[("RUST_LOG", "info")], Some(log.clone()));
    assert_eq!(
        recorded(state.path(), &prefix),
        guard.instances().into_iter().collect::<BTreeSet<_>>(),
        "database and Incus disagree"
    );
    assert!(recorded(state.path(), &prefix).contains(&orphan));
    assert!(!recorded(state.path(), &prefix).contains(&ghost));
    // And says so: an alert for each, in the log and the event log.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("reconciled the database with the backend"),
        "{text}"
    );
    for (name, word) in [(&orphan, "adopted"), (&ghost, "forgotten")] {
        let (s, events) = srv.get(&format!("/v1/events?sandbox={name}"));
        assert_eq!(s, 200, "{events}");
        assert!(
            events["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["event"] == "alert"
                    && e["reason"].as_str().unwrap_or_default().starts_with(word)),
            "{name}: {events}"
        );
    }
    // The adopted orphan has no owner: an admin sees and deletes it.
    let db = Store::open(state.path()).unwrap();
    assert_eq!(db.sandbox(&orphan).unwrap().unwrap().owner, None);
    let (s, body) = srv.call("DELETE", &format!("/v1/sandboxes/{orphan}"), None);
    assert_eq!(s, 200, "{body}");
    drop(srv);
    let _ = std::fs::remove_file(&log);
    drop(guard);
}
