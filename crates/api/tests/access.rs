//! Who may call corrald, over real HTTP against the real binary: the unix
//! socket's peer credentials sorted into tiers (with a real second Unix
//! user), the socket claimed and released, and TCP's token, Host, Origin,
//! body type and size checks.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::TcpStream;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::Command;

use common::{Req, Server, TOKEN, assert_error, request, send};
use corral_test_support::TestUser;
use serde_json::Value;

/// A directory every user may traverse, for a socket another user reaches.
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `GET path` on the socket as `user` (with curl, a real client process
/// running under that uid); the status and the JSON body.
fn get_as(user: &TestUser, sock: &Path, path: &str) -> (u16, Value) {
    let out = user
        .command("curl")
        .args(["-sS", "-o", "-", "-w", "\n%{http_code}", "--unix-socket"])
        .arg(sock)
        .arg(format!("http://localhost{path}"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    let status: u16 = status
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("curl said: {text} {}", String::from_utf8_lossy(&out.stderr)));
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
    };
    (status, json)
}

#[test]
fn socket_callers_are_sorted_into_tiers() {
    if !corral_test_support::gate::tool("curl", "curl") {
        return;
    }
    let Some(user) = TestUser::create() else {
        return;
    };
    let dir = open_dir();
    let sock = dir.path().join("corrald.sock");
    let sock_arg = sock.display().to_string();

    // Tier none: the socket's group lets the user connect, the tier refuses.
    let srv = Server::start(&["--socket", &sock_arg, "--socket-group", &user.name]);
    assert_eq!(std::fs::metadata(&sock).unwrap().gid(), user.gid);
    assert_eq!(
        std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777,
        0o660
    );
    let (s, body) = get_as(&user, &sock, "/v1/matrix");
    assert_error(s, &body, 403, "forbidden");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains(&format!("uid {}", user.uid)), "{msg}");
    assert!(msg.contains("admins are root"), "{msg}");
    // Root (this process) is an admin.
    let (s, _) = request(
        UnixStream::connect(&sock).unwrap(),
        "GET",
        "/v1/verification",
        None,
    );
    assert_eq!(s, 200);
    drop(srv);

    // A member of the admin group is an admin: admin-only routes answer.
    let _srv = Server::start(&[
        "--socket",
        &sock_arg,
        "--socket-group",
        &user.name,
        "--admin-group",
        &user.name,
    ]);
    let (s, body) = get_as(&user, &sock, "/v1/verification");
    assert_eq!(s, 200, "{body}");
    let (s, body) = get_as(&user, &sock, "/v1/matrix");
    assert_eq!(s, 200, "{body}");
    drop(_srv);

    // A restricted caller explains its own sandboxes only: never a
    // profile, never another's (or nobody's) sandbox.
    let _srv = Server::start(&[
        "--socket",
        &sock_arg,
        "--socket-group",
        &user.name,
        "--users-group",
        &user.name,
    ]);
    let (s, body) = get_as(
        &user,
        &sock,
        "/v1/explain?profile=internet&dest=198.51.100.1:443",
    );
    assert_error(s, &body, 403, "forbidden");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("sandbox=NAME"), "{msg}");
    let (s, body) = get_as(
        &user,
        &sock,
        "/v1/explain?sandbox=someone-else&dest=198.51.100.1:443",
    );
    assert_error(s, &body, 403, "not_owner");
}

#[test]
fn a_second_corrald_on_a_live_socket_is_address_in_use_and_the_socket_goes_with_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("corrald.sock");
    let sock_arg = sock.display().to_string();
    let first = Server::start(&["--socket", &sock_arg]);

    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .args(["--socket", &sock_arg, "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("address in use"), "{err}");
    // The first still answers on its socket.
    let (s, _) = request(
        UnixStream::connect(&sock).unwrap(),
        "GET",
        "/v1/matrix",
        None,
    );
    assert_eq!(s, 200);

    // SIGTERM: a clean exit that takes the socket with it.
    let status = first.terminate();
    assert!(status.success(), "{status}");
    assert!(!sock.exists(), "the socket outlived the server");

    // A stale socket (its server died without cleaning up) is replaced.
    drop(UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let again = Server::start(&["--socket", &sock_arg]);
    let (s, _) = request(
        UnixStream::connect(&sock).unwrap(),
        "GET",
        "/v1/matrix",
        None,
    );
    assert_eq!(s, 200);
    drop(again);

    // Something that is not a socket is never replaced.
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "keep").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .args(["--socket"])
        .arg(&plain)
        .arg("--state-dir")
        .arg(state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a socket"));
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "keep");
}

#[test]
fn tcp_needs_the_token_the_right_host_and_json() {
    // Without a token file, TCP is refused before anything starts.
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .args(["--listen", "127.0.0.1:0", "--state-dir"])
        .arg(state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token-file"));

    let srv = Server::start(&["--listen", "127.0.0.1:0"]);
    let auth = format!("Bearer {TOKEN}");
    let call = |req: Req<'_>| send(TcpStream::connect(&srv.addr).unwrap(), &req);
    let base = Req {
        method: "GET",
        path: "/v1/matrix",
        host: &srv.addr,
        headers: &[],
        body: None,
        content_type: None,
    };

    let (s, head, body) = call(Req { ..base });
    assert_error(s, &body, 401, "unauthorized");
    assert!(head.contains("www-authenticate: Bearer"), "{head}");
    let (s, _, body) = call(Req {
        headers: &[("Authorization", "Bearer not-the-token-at-all")],
        ..base
    });
    assert_error(s, &body, 401, "unauthorized");
    let (s, _, body) = call(Req {
        headers: &[("Authorization", &auth)],
        ..base
    });
    assert_eq!(s, 200, "{body}");

    // DNS rebinding: the right token under another name is still refused.
    let (s, _, body) = call(Req {
        host: "rebind.example:80",
        headers: &[("Authorization", &auth)],
        ..base
    });
    assert_error(s, &body, 403, "bad_host");
    let (s, _, body) = call(Req {
        headers: &[("Authorization", &auth), ("Origin", "http://evil.example")],
        ..base
    });
    assert_error(s, &body, 403, "bad_origin");

    // A cross-site form post: 415, before the body is even parsed.
    let (s, _, body) = call(Req {
        method: "POST",
        path: "/v1/sandboxes",
        headers: &[("Authorization", &auth)],
        body: Some("name=x&image=y"),
        content_type: Some("application/x-www-form-urlencoded"),
        ..base
    });
    assert_error(s, &body, 415, "unsupported_media_type");

    // 10 MB is over the default 1 MiB cap: 413 in the JSON shape.
    let big = format!("{{\"name\":\"{}\"}}", "a".repeat(10_000_000));
    let (s, _, body) = call(Req {
        method: "POST",
        path: "/v1/sandboxes",
        headers: &[("Authorization", &auth)],
        body: Some(&big),
        content_type: Some("application/json"),
        ..base
    });
    assert_error(s, &body, 413, "body_too_large");
}
