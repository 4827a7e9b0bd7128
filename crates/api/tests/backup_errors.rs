//! What a failed import tells its caller, against the real binary and the
//! real Incus daemon, with a real second Unix user (a restricted caller):
//! Incus's own words reach admins only; the user gets the code and an
//! error id that finds the whole text in corrald's log. corral's own
//! refusal (a record that is a symlink) names the entry to everyone.
//! Control: root, an admin, sends the same bytes and reads Incus's words.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use common::Server;
use common::incus::{PrefixCleanup, incus_socket, raw_client};
use corral_test_support::TestUser;
use serde_json::Value;

/// `PUT /v1/sandboxes/NAME/backup` with `file`'s bytes, through curl run
/// as `user` (or root): the status and the JSON body.
fn put_backup(user: Option<&TestUser>, sock: &Path, name: &str, file: &Path) -> (u16, Value) {
    let mut cmd = match user {
        Some(u) => u.command("curl"),
        None => Command::new("curl"),
    };
    let out = cmd
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "-X", "PUT"])
        .args([
            "-H",
            "Content-Type: application/octet-stream",
            "--data-binary",
        ])
        .arg(format!("@{}", file.display()))
        .arg("--unix-socket")
        .arg(sock)
        .arg(format!("http://localhost/v1/sandboxes/{name}/backup"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    let status: u16 = status
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("curl said: {text} {}", String::from_utf8_lossy(&out.stderr)));
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// A gzip tar of `entries` (path, content; a `->` content is a symlink).
fn archive(dir: &Path, file: &str, entries: &[(&str, &str)]) -> std::path::PathBuf {
    let tree = dir.join(format!("{file}.d"));
    for (path, content) in entries {
        let at = tree.join(path);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        match content.strip_prefix("->") {
            Some(target) => std::os::unix::fs::symlink(target, &at).unwrap(),
            None => std::fs::write(&at, content).unwrap(),
        }
    }
    let out = dir.join(file);
    let ran = Command::new("tar")
        .arg("-czf")
        .arg(&out)
        .arg("-C")
        .arg(&tree)
        .arg("backup")
        .status()
        .unwrap();
    assert!(ran.success());
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o644)).unwrap();
    out
}

#[test]
fn incus_words_about_a_failed_import_reach_admins_only() {
    if !corral_test_support::gate::tool("curl", "curl") {
        return;
    }
    let Some(socket) = incus_socket("backup_errors") else {
        return;
    };
    let Some(user) = TestUser::create() else {
        return;
    };
    let prefix = format!("t-bkerr-{}-", std::process::id());
    let _cleanup = PrefixCleanup {
        client: raw_client(&socket),
        prefix: prefix.clone(),
    };
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let sock = dir.path().join("corrald.sock");
    let log = dir.path().join("corrald.log");
    let state = tempfile::tempdir().unwrap();
    let args: Vec<String> = [
        "--socket",
        sock.to_str().unwrap(),
        "--socket-group",
        &user.name,
        "--users-group",
        &user.name,
        "--incus-socket",
        &socket,
        "--state-dir",
        state.path().to_str().unwrap(),
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let _srv = Server::start_with(&args, &[("RUST_LOG", "warn")], Some(log.clone()));

    // Passes corral's check (a plain record, no setting outside the
    // allowlist), and Incus cannot make an instance of it.
    let record = "name: x\ntype: container\nconfig:\n  container:\n    config: {}\n";
    let broken = archive(
        dir.path(),
        "broken.tar.gz",
        &[
            ("backup/index.yaml", record),
            ("backup/container/backup.yaml", record),
        ],
    );
    let (s, admin) = put_backup(None, &sock, &format!("{prefix}root"), &broken);
    assert!(s >= 500, "{s} {admin}");
    let admin_says = admin["error"]["message"].as_str().unwrap().to_owned();
    // Incus's words, as Incus wrote them.
    let words = "Unexpected instance type";
    assert!(admin_says.contains(words), "{admin_says}");

    let (s, body) = put_backup(Some(&user), &sock, &format!("{prefix}user"), &broken);
    assert_eq!(s, 502, "{body}");
    assert_eq!(body["error"]["code"], "backend", "{body}");
    let says = body["error"]["message"].as_str().unwrap();
    assert!(
        !says.contains(words) && !says.to_lowercase().contains("incus"),
        "the backend's words reached the user: {says}"
    );
    let id = says
        .split("error id ")
        .nth(1)
        .unwrap_or_else(|| panic!("no error id: {says}"))
        .trim();
    let logged = std::fs::read_to_string(&log).unwrap();
    let line = logged
        .lines()
        .find(|l| l.contains(id))
        .unwrap_or_else(|| panic!("{id} is not in corrald's log:\n{logged}"));
    assert!(line.contains(words), "{line}");

    // corral's own refusal is the same for everyone: it names the entry.
    let linked = archive(
        dir.path(),
        "linked.tar.gz",
        &[
            ("backup/index.yaml", record),
            ("backup/container/backup.yaml", "->/etc/shadow"),
        ],
    );
    let (s, body) = put_backup(Some(&user), &sock, &format!("{prefix}link"), &linked);
    assert_eq!(s, 400, "{body}");
    let says = body["error"]["message"].as_str().unwrap();
    assert!(
        says.contains("entry backup/container/backup.yaml is a symlink"),
        "{says}"
    );
}
