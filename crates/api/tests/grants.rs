//! Tiers from `corral grant` / `corral revoke`, end to end: the `corral`
//! binary records grants in the state directory a real corrald serves,
//! real second Unix users call corrald's socket (curl under their uids),
//! and the real Incus daemon shows where each sandbox lands: a granted
//! user's in their own project, an admin's in corral's.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use axum::http::Method;
use common::incus::{PrefixCleanup, raw_client, runtime};
use common::{Server, as_user, corral_bin, request};
use corral_provider_incus::{IncusClient, TEST_IMAGE_ALIAS};
use corral_service::Store;
use corral_test_support::TestUser;
use serde_json::{Value, json};

/// `corral ARGS… --state-dir STATE --incus-socket SOCKET`: exit code,
/// stdout, stderr.
fn corral(state: &Path, socket: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(corral_bin())
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .arg("--incus-socket")
        .arg(socket)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn as_root(sock: &Path, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    request(UnixStream::connect(sock).unwrap(), method, path, body)
}

/// The instance names Incus holds in `project` (`None`: no such project).
fn instances_in(client: &IncusClient, project: &str) -> Option<Vec<String>> {
    let urls: Vec<String> = match runtime()
        .block_on(client.get::<Vec<String>>(&format!("/1.0/instances?project={project}")))
    {
        Ok(u) => u,
        Err(e) if e.is_not_found() => return None,
        Err(e) => panic!("{e}"),
    };
    if !project_exists(client, project) {
        return None;
    }
    Some(
        urls.iter()
            .filter_map(|u| u.split('?').next()?.rsplit('/').next().map(str::to_owned))
            .collect(),
    )
}

fn project_exists(client: &IncusClient, project: &str) -> bool {
    runtime()
        .block_on(client.get::<Value>(&format!("/1.0/projects/{project}")))
        .is_ok()
}

fn project_config(client: &IncusClient, project: &str) -> Value {
    runtime()
        .block_on(client.get::<Value>(&format!("/1.0/projects/{project}")))
        .unwrap()["config"]
        .clone()
}

/// Removes the users' projects (and whatever is in them) however the
/// test ends.
struct ProjectsCleanup {
    client: IncusClient,
    projects: Vec<String>,
}

impl Drop for ProjectsCleanup {
    fn drop(&mut self) {
        let wait = Duration::from_secs(60);
        for project in &self.projects {
            let names = instances_in(&self.client, project).unwrap_or_default();
            runtime().block_on(async {
                for name in names {
                    let path = format!("/1.0/instances/{name}?project={project}");
                    let stop = json!({"action": "stop", "force": true});
                    let _ = self
                        .client
                        .run(
                            Method::PUT,
                            &format!("/1.0/instances/{name}/state?project={project}"),
                            Some(&stop),
                            wait,
                        )
                        .await;
                    let _ = self.client.run(Method::DELETE, &path, None, wait).await;
                }
                let _ = self
                    .client
                    .call(Method::DELETE, &format!("/1.0/projects/{project}"), None)
                    .await;
            });
        }
    }
}

fn names_with(list: &Value, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = list["sandboxes"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .filter_map(|i| i["name"].as_str())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_owned)
        .collect();
    v.sort();
    v
}

#[test]
fn granted_users_work_in_their_own_project_and_revoke_holds_at_once() {
    if !corral_test_support::gate::tool("curl", "curl") {
        return;
    }
    let Some(socket) = corral_test_support::gate::incus() else {
        return;
    };
    let (Some(alice), Some(bob)) = (TestUser::create(), TestUser::create()) else {
        return;
    };
    let client = raw_client(socket.to_str().unwrap());
    let prefix = format!("t-grant-{}-", std::process::id());
    let (pa, pb) = (
        format!("corral-u-{}", alice.name),
        format!("corral-u-{}", bob.name),
    );
    let _projects = ProjectsCleanup {
        client: client.clone(),
        projects: vec![pa.clone(), pb.clone()],
    };
    let _corral_project = PrefixCleanup {
        client: client.clone(),
        prefix: prefix.clone(),
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("corrald.sock");
    let srv = Server::start(&[
        "--socket",
        sock.to_str().unwrap(),
        "--incus-socket",
        socket.to_str().unwrap(),
    ]);
    // Both users may connect (as members of a shared socket group would);
    // what they may do is their tier's business.
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();
    let state = srv.state.as_ref().unwrap().path().to_owned();
    let (a1, b1, root1) = (
        format!("{prefix}a1"),
        format!("{prefix}b1"),
        format!("{prefix}root"),
    );

    // Not granted: refused.
    let (s, body) = as_user(&alice, &sock, "GET", "/v1/sandboxes", None);
    common::assert_error(s, &body, 403, "forbidden");

    // Bad input: exit 2, nothing recorded, no project made.
    for (who, says) in [
        ("corral-no-such-user-zz", "there is no user"),
        ("root", "is root"),
        ("0", "is root"),
    ] {
        let (code, _, err) = corral(&state, &socket, &["grant", who]);
        assert_eq!(code, 2, "grant {who}: {err}");
        assert!(err.contains(says), "grant {who}: {err}");
    }
    let (code, _, err) = corral(&state, &socket, &["revoke", "corral-no-such-user-zz"]);
    assert_eq!(code, 2, "{err}");
    assert!(Store::open(&state).unwrap().grants().unwrap().is_empty());
    assert!(!project_exists(&client, &pa));

    // Grant: the project is made, restricted like corral's, NIC parents
    // limited to the configured bridges; a second grant changes nothing.
    let (code, out, err) = corral(&state, &socket, &["grant", &alice.name, "--json"]);
    assert_eq!(code, 0, "{err}");
    let g: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(g["schema"], "corral.grant.v1");
    assert_eq!(
        (g["project"].as_str(), g["changed"].as_bool()),
        (Some(pa.as_str()), Some(true))
    );
    assert_eq!(g["tier"], "restricted");
    let (code, out, _) = corral(&state, &socket, &["grant", &alice.name, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["changed"],
        false
    );
    let uid = bob.uid.to_string();
    let (code, _, err) = corral(&state, &socket, &["grant", &uid]);
    assert_eq!(code, 0, "grant by uid: {err}");
    let config = project_config(&client, &pa);
    assert_eq!(config["restricted"], "true");
    assert_eq!(config["restricted.devices.nic"], "allow");
    assert_eq!(config["restricted.containers.privilege"], "unprivileged");
    let access = config["restricted.networks.access"].as_str().unwrap();
    assert!(
        !access.is_empty() && access.split(',').all(|b| b.starts_with("corral-")),
        "{access}"
    );

    // Each creates through the socket; Incus shows where each one went.
    let (s, body) = as_root(
        &sock,
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": root1, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = as_user(
        &alice,
        &sock,
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": a1, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = as_user(
        &bob,
        &sock,
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": b1, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{body}");
    assert_eq!(
        instances_in(&client, &pa).unwrap(),
        std::slice::from_ref(&a1)
    );
    assert_eq!(
        instances_in(&client, &pb).unwrap(),
        std::slice::from_ref(&b1)
    );
    let in_corral = instances_in(&client, "corral").unwrap();
    assert!(
        in_corral.contains(&root1) && !in_corral.contains(&a1),
        "{in_corral:?}"
    );

    // Incus itself refuses a NIC on anything but corral's bridges in a
    // user's project (here: the loopback device as a bridge parent).
    let nic = json!({"type": "nic", "nictype": "bridged", "parent": "lo"});
    let mut inst: Value = runtime()
        .block_on(client.get(&format!("/1.0/instances/{a1}?project={pa}")))
        .unwrap();
    inst["devices"]["eth9"] = nic;
    let refused = runtime().block_on(client.run(
        Method::PUT,
        &format!("/1.0/instances/{a1}?project={pa}"),
        Some(&inst),
        Duration::from_secs(60),
    ));
    let e = refused.expect_err("Incus took a NIC on `lo` in a user's project");
    assert!(
        e.to_string().contains("Network not allowed in project"),
        "{e}"
    );

    // A name is corral-wide: alice cannot take root's, though Incus would
    // allow it in her project.
    let (s, body) = as_user(
        &alice,
        &sock,
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": root1, "image": TEST_IMAGE_ALIAS})),
    );
    common::assert_error(s, &body, 409, "already_exists");

    // Alice sees and acts on hers only; bob's and root's are not_owner.
    let (s, list) = as_user(&alice, &sock, "GET", "/v1/sandboxes", None);
    assert_eq!(s, 200, "{list}");
    assert_eq!(names_with(&list, &prefix), std::slice::from_ref(&a1));
    let (s, body) = as_user(
        &alice,
        &sock,
        "POST",
        &format!("/v1/sandboxes/{a1}/start"),
        None,
    );
    assert_eq!(s, 200, "{body}");
    let (s, body) = as_user(
        &alice,
        &sock,
        "POST",
        &format!("/v1/sandboxes/{a1}/exec"),
        Some(&json!({"argv": ["echo", "mine"]})),
    );
    assert_eq!(
        (s, body["stdout"].as_str()),
        (200, Some("mine\n")),
        "{body}"
    );
    for other in [&b1, &root1] {
        for (method, path) in [
            ("GET", format!("/v1/sandboxes/{other}")),
            ("POST", format!("/v1/sandboxes/{other}/start")),
            ("DELETE", format!("/v1/sandboxes/{other}")),
        ] {
            let (s, body) = as_user(&alice, &sock, method, &path, None);
            common::assert_error(s, &body, 403, "not_owner");
        }
    }

    // The admin sees every project's sandboxes, through corrald and the CLI.
    let (s, list) = as_root(&sock, "GET", "/v1/sandboxes", None);
    assert_eq!(s, 200);
    assert_eq!(
        names_with(&list, &prefix),
        [a1.clone(), b1.clone(), root1.clone()]
    );
    let (code, out, err) = corral(&state, &socket, &["ls", "--json"]);
    assert_eq!(code, 0, "{err}");
    let ls: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(ls["schema"], list["schema"], "one shape: {ls} {list}");
    assert_eq!(
        names_with(&ls, &prefix),
        [a1.clone(), b1.clone(), root1.clone()]
    );

    // Revoke: refused from the next request; the sandbox stays for admins.
    let (code, out, err) = corral(&state, &socket, &["revoke", &alice.name, "--json"]);
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["schema"], "corral.revoke.v1");
    assert_eq!(
        (r["revoked"].as_bool(), r["tier"].as_str()),
        (Some(true), Some("none"))
    );
    assert_eq!(r["remaining"], json!([a1]));
    let (s, body) = as_user(&alice, &sock, "GET", "/v1/sandboxes", None);
    common::assert_error(s, &body, 403, "forbidden");
    let (s, body) = as_root(&sock, "GET", &format!("/v1/sandboxes/{a1}"), None);
    assert_eq!(s, 200, "{body}");
    // Again: nothing to revoke, still fine.
    let (code, out, _) = corral(&state, &socket, &["revoke", &alice.name, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["revoked"],
        false
    );

    // --purge without a terminal needs --force (exit 2, nothing deleted).
    let (code, _, err) = corral(&state, &socket, &["revoke", &alice.name, "--purge"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        instances_in(&client, &pa).unwrap(),
        std::slice::from_ref(&a1)
    );
    let (code, out, err) = corral(
        &state,
        &socket,
        &["revoke", &alice.name, "--purge", "--force", "--json"],
    );
    assert_eq!(code, 0, "{err}");
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["deleted"], json!([a1]));
    assert_eq!(r["project_removed"], true);
    assert!(
        !project_exists(&client, &pa),
        "the project went with the purge"
    );
    let db = Store::open(&state).unwrap();
    assert!(db.sandbox(&a1).unwrap().is_none(), "the record went too");
    assert!(db.grant_of(alice.uid).unwrap().is_none());

    // Bob is untouched; then he goes the same way.
    let (s, body) = as_user(&bob, &sock, "GET", &format!("/v1/sandboxes/{b1}"), None);
    assert_eq!(s, 200, "{body}");
    let (code, _, err) = corral(
        &state,
        &socket,
        &["revoke", &bob.name, "--purge", "--force"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!project_exists(&client, &pb));
    let (s, body) = as_user(&bob, &sock, "GET", "/v1/sandboxes", None);
    common::assert_error(s, &body, 403, "forbidden");

    // Every change of rights is on the audit trail, once: alice granted
    // (twice asked, once changed), revoked, revoked again with --purge;
    // bob granted, then purged.
    let (code, out, err) = corral(&state, &socket, &["log", "--kind", "access", "--json"]);
    assert_eq!(code, 0, "{err}");
    let trail: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let of = |user: &str| -> Vec<(String, bool)> {
        trail
            .iter()
            .filter(|r| r["user"] == user)
            .map(|r| (r["event"].as_str().unwrap().to_owned(), r["purged"] == true))
            .collect()
    };
    assert_eq!(
        of(&alice.name),
        [
            ("granted".to_owned(), false),
            ("revoked".to_owned(), false),
            ("revoked".to_owned(), true)
        ],
        "{trail:#?}"
    );
    assert_eq!(
        of(&bob.name),
        [("granted".to_owned(), false), ("revoked".to_owned(), true)],
        "{trail:#?}"
    );
    let purge = trail
        .iter()
        .find(|r| r["user"] == alice.name.as_str() && r["purged"] == true)
        .unwrap();
    assert_eq!(purge["deleted"], json!([a1]), "{purge}");
    drop(srv);
}
