//! A granted user's sandbox on a built-in profile, end to end: the
//! built-in profiles applied for real in the host namespace (the built-in
//! lab), a real second Unix user granted by the `corral` binary and
//! creating through corrald's socket (curl under their uid), the sandbox
//! in the user's own Incus project. It reaches the allowlisted destination
//! and not the canary (real packets; the host reaching the canary is the
//! control), the canary of an admin's sandbox on the same profile finds
//! it as the sibling it must not reach, and the escape hatch acts on it in
//! its own project.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{SocketAddr, TcpStream};
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use axum::http::Method;
use common::incus::{raw_client, runtime};
use common::{Server, as_user, corral_bin, request};
use corral_provider_incus::{IncusClient, TEST_IMAGE_ALIAS};
use corral_test_support::TestUser;
use corral_tests::builtin_lab::{ALLOWED, BuiltinLab, CANARY};
use serde_json::{Value, json};

const TOKEN: &str = "corral-grant-lab-token";

/// `corral VERB --config C --state-dir S --incus-socket SOCKET ARGS…`
/// (the options before any `--` in ARGS).
fn corral(lab: &BuiltinLab, socket: &Path, verb: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(corral_bin())
        .arg(verb)
        .arg("--config")
        .arg(lab.config_path())
        .arg("--state-dir")
        .arg(lab.state_dir())
        .arg("--incus-socket")
        .arg(socket)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Force-deletes the instances of each `(project, name)` however the test
/// ends, then the user projects.
struct Cleanup {
    client: IncusClient,
    instances: Vec<(String, String)>,
    projects: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let wait = Duration::from_secs(60);
        runtime().block_on(async {
            for (project, name) in &self.instances {
                let path = format!("/1.0/instances/{name}?project={project}");
                let state = format!("/1.0/instances/{name}/state?project={project}");
                let stop = json!({"action": "stop", "force": true});
                let _ = self
                    .client
                    .run(Method::PUT, &state, Some(&stop), wait)
                    .await;
                let _ = self.client.run(Method::DELETE, &path, None, wait).await;
            }
            for project in &self.projects {
                let _ = self
                    .client
                    .call(Method::DELETE, &format!("/1.0/projects/{project}"), None)
                    .await;
            }
        });
    }
}

/// Does `sandbox` (through corrald as `user`) get the echo back from `to`?
fn reached(user: &TestUser, sock: &Path, sandbox: &str, to: SocketAddr) -> bool {
    let script = format!("echo {TOKEN} | timeout 5 nc -w 3 \"$0\" \"$1\"");
    let (s, body) = as_user(
        user,
        sock,
        "POST",
        &format!("/v1/sandboxes/{sandbox}/exec"),
        Some(&json!({"argv": ["sh", "-c", script, to.ip().to_string(), to.port().to_string()]})),
    );
    assert_eq!(s, 200, "the probe to {to} did not run: {body}");
    body["stdout"].as_str().unwrap_or_default().contains(TOKEN)
}

#[test]
fn a_granted_users_profiled_sandbox_is_enforced_seen_as_a_sibling_and_reached_by_the_hatch() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("nft", "nftables")
        || !corral_test_support::gate::tool("curl", "curl")
    {
        return;
    }
    let Some(socket) = corral_test_support::gate::incus() else {
        return;
    };
    let Some(alice) = TestUser::create() else {
        return;
    };
    let client = raw_client(socket.to_str().unwrap());
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let project = format!("corral-u-{}", alice.name);
    let (mine, admins) = (
        format!("t-glab-a-{}", std::process::id()),
        format!("t-glab-r-{}", std::process::id()),
    );
    // Declared after the lab: dropped first, before the bridges go.
    let _cleanup = Cleanup {
        client: client.clone(),
        instances: vec![
            (project.clone(), mine.clone()),
            ("corral".to_owned(), admins.clone()),
        ],
        projects: vec![project.clone()],
    };
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let (code, _, err) = corral(&lab, &socket, "grant", &[&alice.name]);
    assert_eq!(code, 0, "grant: {err}");

    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("corrald.sock");
    let _srv = Server::start_exact(&[
        "--socket".into(),
        sock.display().to_string(),
        "--incus-socket".into(),
        socket.display().to_string(),
        "--config".into(),
        lab.config_path().display().to_string(),
        "--state-dir".into(),
        lab.state_dir().display().to_string(),
    ]);
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o666)).unwrap();

    // Alice's sandbox on the allowlist profile, in her own project.
    let (s, body) = as_user(
        &alice,
        &sock,
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": mine, "image": TEST_IMAGE_ALIAS, "profile": "allowlist"})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = as_user(
        &alice,
        &sock,
        "POST",
        &format!("/v1/sandboxes/{mine}/start"),
        None,
    );
    assert_eq!(s, 200, "the canary passes at start: {body}");
    let inst: Value = runtime()
        .block_on(client.get(&format!("/1.0/instances/{mine}?project={project}")))
        .unwrap_or_else(|e| panic!("{mine} is not in {project}: {e}"));
    assert_eq!(inst["status"], "Running", "{inst}");

    // Real packets: the allowlisted destination answers, the canary does
    // not, though it answers the host (the control).
    let control = TcpStream::connect_timeout(&CANARY, Duration::from_secs(3));
    assert!(control.is_ok(), "control: the host must reach {CANARY}");
    assert!(
        reached(&alice, &sock, &mine, ALLOWED),
        "the allowlisted {ALLOWED} must answer"
    );
    assert!(
        !reached(&alice, &sock, &mine, CANARY),
        "the unlisted {CANARY} must be blocked"
    );

    // An admin's sandbox on the same profile: its canary finds alice's as
    // the sibling it must not reach (in another project, on the same
    // bridge), and the host's reach of that sibling is the control.
    let (s, body) = request(
        UnixStream::connect(&sock).unwrap(),
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": admins, "image": TEST_IMAGE_ALIAS, "profile": "allowlist"})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = request(
        UnixStream::connect(&sock).unwrap(),
        "POST",
        &format!("/v1/sandboxes/{admins}/start"),
        None,
    );
    assert_eq!(s, 200, "{body}");
    let (s, report) = request(
        UnixStream::connect(&sock).unwrap(),
        "POST",
        &format!("/v1/sandboxes/{admins}/verify"),
        None,
    );
    assert_eq!(s, 200, "{report}");
    let sibling = report["event"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == "sibling-blocked")
        .unwrap_or_else(|| panic!("no sibling check: {report:#}"));
    assert_eq!(sibling["passed"], true, "{sibling:#}");
    assert_eq!(sibling["control"]["reached"], true, "{sibling:#}");

    // The escape hatch runs Incus's client in the sandbox's own project:
    // the command's exit status comes back from inside alice's sandbox.
    let (code, _, err) = corral(
        &lab,
        &socket,
        "incus",
        &[&mine, "--", "exec", &mine, "--", "sh", "-c", "exit 7"],
    );
    assert_eq!(code, 7, "hatch in {project}: {err}");
    // Control: Incus's client in corral's project does not find it.
    let out = Command::new("incus")
        .args(["exec", &mine, "--project", "corral", "--", "true"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "{mine} found in corral's project");
}
