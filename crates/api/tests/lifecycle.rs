//! The lifecycle routes beyond create/start/stop/exec/delete, over real
//! HTTP against the real corrald binary and the real Incus daemon:
//! templates, clones, snapshots and restore, rename, backups (export and
//! import) and files. Bad input answers the documented codes in the one
//! error shape; an instance without corral's stamp is refused by every
//! route. A guard force-deletes every instance a test names.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::incus::{Cleanup, incus_socket, raw_client, runtime, server, unique};
use common::{Server, assert_error};
use corral_provider_incus::IncusClient;
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_provider_incus::api::Instance;
use serde_json::{Value, json};

const BYTES: &str = "application/octet-stream";

fn instance(client: &IncusClient, name: &str) -> Option<Instance> {
    runtime()
        .block_on(client.get::<Instance>(&format!("/1.0/instances/{name}")))
        .ok()
}

/// PUT a file's bytes; the status and the answer body.
fn push(srv: &Server, name: &str, path: &str, bytes: &[u8]) -> (u16, Vec<u8>) {
    let (s, _, body) = srv.bytes(
        "PUT",
        &format!("/v1/sandboxes/{name}/files?path={path}"),
        Some(BYTES),
        bytes,
    );
    (s, body)
}

/// GET a file's bytes.
fn pull(srv: &Server, name: &str, path: &str) -> (u16, Vec<u8>) {
    let (s, _, body) = srv.bytes(
        "GET",
        &format!("/v1/sandboxes/{name}/files?path={path}"),
        None,
        b"",
    );
    (s, body)
}

fn error_of(status: u16, body: &[u8], want_status: u16, want_code: &str) {
    let json: Value = serde_json::from_slice(body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(body)));
    assert_error(status, &json, want_status, want_code);
}

#[test]
fn templates_snapshots_clones_rename_and_files_through_the_api() {
    let Some(socket) = incus_socket("templates_snapshots") else {
        return;
    };
    let (name, copy, renamed) = (unique("life"), unique("copy"), unique("renamed"));
    let client = raw_client(&socket);
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone(), copy.clone(), renamed.clone()],
    };
    let srv = server(&socket);

    let (s, list) = srv.get("/v1/templates");
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["schema"], "corral.templates.v1", "{list}");
    let names: Vec<&str> = list["templates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["blank", "claude", "codex"]);

    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "template": "nope", "image": TEST_IMAGE_ALIAS})),
    );
    assert_error(s, &body, 400, "unknown_template");
    let (s, info) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "template": "codex", "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{info}");
    let (s, info) = srv.call("POST", &format!("/v1/sandboxes/{name}/start"), None);
    assert_eq!(s, 200, "{info}");
    // The image has no cloud-init: the context file came through the file API.
    let (s, context) = pull(&srv, &name, "/home/agent/.codex/AGENTS.md");
    assert_eq!(s, 200);
    let context = String::from_utf8(context).unwrap();
    assert!(context.contains("Credential-free."), "{context}");
    assert!(context.contains("no network at all"), "{context}");

    // Files: bytes in and out; JSON is not a file body.
    let bytes: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
    assert_eq!(push(&srv, &name, "/root/data/f.bin", &bytes).0, 204);
    let (s, back) = pull(&srv, &name, "/root/data/f.bin");
    assert_eq!(s, 200);
    assert_eq!(back, bytes);
    let (s, _, body) = srv.bytes(
        "PUT",
        &format!("/v1/sandboxes/{name}/files?path=/root/x"),
        Some("application/json"),
        b"{}",
    );
    error_of(s, &body, 415, "unsupported_media_type");
    let (s, body) = push(&srv, &name, "relative", b"x");
    error_of(s, &body, 400, "invalid_spec");
    let (s, body) = pull(&srv, &name, "/no/such/file");
    error_of(s, &body, 404, "not_found");
    let (s, body) = pull(&srv, &name, "/tmp");
    error_of(s, &body, 400, "invalid_spec");

    // Snapshots and restore.
    push(&srv, &name, "/root/f", b"one");
    let at = format!("/v1/sandboxes/{name}");
    let (s, snap) = srv.call("POST", &format!("{at}/snapshots"), None);
    assert_eq!(s, 201, "{snap}");
    assert_eq!(snap["name"], "snap0");
    assert_eq!(snap["sandbox"], name.as_str());
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/snapshots"),
        Some(&json!({"name": "snap0"})),
    );
    assert_error(s, &body, 409, "already_exists");
    let (s, snaps) = srv.get(&format!("{at}/snapshots"));
    assert_eq!(s, 200, "{snaps}");
    assert_eq!(snaps.as_array().unwrap().len(), 1, "{snaps}");
    push(&srv, &name, "/root/f", b"two");
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/restore"),
        Some(&json!({"snapshot": "nope"})),
    );
    assert_error(s, &body, 404, "not_found");
    assert_eq!(instance(&client, &name).unwrap().status, "Running");
    let (s, info) = srv.call(
        "POST",
        &format!("{at}/restore"),
        Some(&json!({"snapshot": "snap0"})),
    );
    assert_eq!(s, 200, "{info}");
    assert_eq!(info["schema"], "corral.sandbox-restore.v1", "{info}");
    assert_eq!(info["info"]["state"], "running");
    assert_eq!(pull(&srv, &name, "/root/f").1, b"one");

    // A clone of the snapshot: created stopped with a fresh stamp; a clone
    // request naming what it takes from its source is refused.
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": copy, "from": format!("{name}/snap0"), "image": "x"})),
    );
    assert_error(s, &body, 400, "invalid_spec");
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": copy, "from": format!("{name}/nope")})),
    );
    assert_error(s, &body, 404, "not_found");
    let (s, info) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": copy, "from": format!("{name}/snap0")})),
    );
    assert_eq!(s, 201, "{info}");
    assert_eq!(info["info"]["state"], "stopped");
    assert_eq!(info["from"], format!("{name}/snap0"));
    let (a, b) = (
        instance(&client, &name).unwrap(),
        instance(&client, &copy).unwrap(),
    );
    assert_ne!(
        a.config.get("user.corral.id"),
        b.config.get("user.corral.id")
    );
    let (s, info) = srv.call("POST", &format!("/v1/sandboxes/{copy}/start"), None);
    assert_eq!(s, 200, "{info}");
    assert_eq!(pull(&srv, &copy, "/root/f").1, b"one");

    // Rename: not while running; then under the new name only.
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/rename"),
        Some(&json!({"name": renamed})),
    );
    assert_error(s, &body, 409, "invalid_state");
    srv.call("POST", &format!("{at}/stop"), Some(&json!({"force": true})));
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/rename"),
        Some(&json!({"name": copy})),
    );
    assert_error(s, &body, 409, "already_exists");
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/rename"),
        Some(&json!({"name": "Bad Name"})),
    );
    assert_error(s, &body, 400, "invalid_spec");
    let (s, info) = srv.call(
        "POST",
        &format!("{at}/rename"),
        Some(&json!({"name": renamed})),
    );
    assert_eq!(s, 200, "{info}");
    assert_eq!(info["name"], renamed.as_str());
    assert_eq!(info["from"], name.as_str(), "{info}");
    let (s, body) = srv.get(&at);
    assert_error(s, &body, 404, "not_found");

    let (s, events) = srv.get(&format!("/v1/events?sandbox={renamed}"));
    assert_eq!(s, 200);
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "renamed" && e["from"] == name.as_str()),
        "{events}"
    );
    let (_, events) = srv.get(&format!("/v1/events?sandbox={name}"));
    for kind in [
        "created",
        "snapshotted",
        "restored",
        "file_pushed",
        "file_pulled",
    ] {
        assert!(
            events["events"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["event"] == kind),
            "{kind}: {events}"
        );
    }
}

#[test]
fn backups_stream_out_with_a_warning_and_come_back_as_new_sandboxes() {
    let Some(socket) = incus_socket("backups") else {
        return;
    };
    let (name, back) = (unique("bk"), unique("bk-back"));
    let client = raw_client(&socket);
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone(), back.clone()],
    };
    let srv = server(&socket);
    let (s, _) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201);
    srv.call("POST", &format!("/v1/sandboxes/{name}/start"), None);
    push(&srv, &name, "/root/kept", b"kept");

    let (s, head, backup) = srv.bytes("GET", &format!("/v1/sandboxes/{name}/backup"), None, b"");
    assert_eq!(s, 200, "{head}");
    assert!(head.contains("content-type: application/gzip"), "{head}");
    assert!(head.contains("x-corral-warning:"), "{head}");
    assert!(head.contains("credential"), "{head}");
    assert_eq!(&backup[..2], &[0x1f, 0x8b], "gzip");
    let state = srv.state.as_ref().unwrap().path().join("transfers");
    assert_eq!(
        std::fs::read_dir(&state).map(|d| d.count()).unwrap_or(0),
        0,
        "no transfer file is left behind"
    );

    let at = format!("/v1/sandboxes/{back}/backup");
    let (s, _, body) = srv.bytes("PUT", &at, Some("application/json"), b"{}");
    error_of(s, &body, 415, "unsupported_media_type");
    let (s, _, body) = srv.bytes("PUT", &at, Some(BYTES), b"not a backup");
    error_of(s, &body, 400, "invalid_spec");
    assert!(instance(&client, &back).is_none());
    let (s, _, body) = srv.bytes("PUT", &at, Some(BYTES), &backup);
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&body));
    let info: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(info["state"], "stopped", "{info}");
    let (s, _, body) = srv.bytes("PUT", &at, Some(BYTES), &backup);
    error_of(s, &body, 409, "already_exists");
    let (s, info) = srv.call("POST", &format!("/v1/sandboxes/{back}/start"), None);
    assert_eq!(s, 200, "{info}");
    assert_eq!(pull(&srv, &back, "/root/kept").1, b"kept");
    assert_eq!(
        std::fs::read_dir(&state).map(|d| d.count()).unwrap_or(0),
        0,
        "uploads are removed after the import"
    );
}

#[test]
fn every_new_route_refuses_an_instance_corral_did_not_stamp() {
    let Some(socket) = incus_socket("unstamped") else {
        return;
    };
    let (name, clone) = (unique("foreign"), unique("foreign-clone"));
    let client = raw_client(&socket);
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone(), clone.clone()],
    };
    let srv = server(&socket);
    let (s, _) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201);
    srv.call("POST", &format!("/v1/sandboxes/{name}/snapshots"), None);
    runtime().block_on(async {
        let path = format!("/1.0/instances/{name}");
        let inst: Instance = client.get(&path).await.unwrap();
        let config: std::collections::BTreeMap<String, String> = inst
            .config
            .iter()
            .filter(|(k, _)| !k.starts_with("user.corral."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        client
            .run(
                axum::http::Method::PUT,
                &path,
                Some(&inst.put_body(&config, &inst.devices)),
                std::time::Duration::from_secs(30),
            )
            .await
            .unwrap();
    });
    let at = format!("/v1/sandboxes/{name}");
    for (method, path, body) in [
        ("GET", format!("{at}/snapshots"), None),
        ("POST", format!("{at}/snapshots"), None),
        (
            "POST",
            format!("{at}/restore"),
            Some(json!({"snapshot": "snap0"})),
        ),
        ("POST", format!("{at}/rename"), Some(json!({"name": clone}))),
        (
            "POST",
            "/v1/sandboxes".to_owned(),
            Some(json!({"name": clone, "from": name})),
        ),
    ] {
        let (s, answer) = srv.call(method, &path, body.as_ref());
        assert_error(s, &answer, 403, "not_owned");
    }
    for (method, path, ctype, body) in [
        ("GET", format!("{at}/backup"), None, &b""[..]),
        ("GET", format!("{at}/files?path=/etc/hostname"), None, b""),
        ("PUT", format!("{at}/files?path=/tmp/x"), Some(BYTES), b"x"),
    ] {
        let (s, _, answer) = srv.bytes(method, &path, ctype, body);
        error_of(s, &answer, 403, "not_owned");
    }
    assert!(instance(&client, &clone).is_none());
}

/// A shell over corrald: the streamed exec with `tty` runs the command on
/// a pseudo-terminal (its output on stream 1), takes input as it is
/// typed, and ends with the shell's exit status; the buffered exec refuses
/// a terminal; the event log records the shell.
#[test]
fn a_shell_runs_on_a_terminal_through_the_streamed_exec() {
    use futures::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

    let Some(socket) = incus_socket("shell") else {
        return;
    };
    let name = unique("tty");
    let client = raw_client(&socket);
    let _guard = Cleanup {
        client,
        names: vec![name.clone()],
    };
    let srv = server(&socket);
    let at = format!("/v1/sandboxes/{name}");
    let (s, _) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201);
    srv.call("POST", &format!("{at}/start"), None);
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/exec"),
        Some(&json!({"argv": ["sh"], "tty": {"width": 80, "height": 24}})),
    );
    assert_error(s, &body, 400, "invalid_spec");

    runtime().block_on(async {
        let tcp = tokio::net::TcpStream::connect(&srv.addr).await.unwrap();
        let mut req = format!("ws://{}{at}/exec/stream", srv.addr)
            .into_client_request()
            .unwrap();
        req.headers_mut().insert(
            "Authorization",
            format!("Bearer {}", common::TOKEN).parse().unwrap(),
        );
        let mut ws = tokio_tungstenite::client_async(req, tcp).await.unwrap().0;
        ws.send(Message::text(
            json!({"argv": ["sh"], "tty": {"width": 100, "height": 30}}).to_string(),
        ))
        .await
        .unwrap();
        ws.send(Message::binary(
            b"echo marker-$((6*7)); stty size; tty; exit 3\n".to_vec(),
        ))
        .await
        .unwrap();
        let mut output = Vec::new();
        let ending = loop {
            let msg = tokio::time::timeout(std::time::Duration::from_secs(60), ws.next())
                .await
                .expect("no message within a minute")
                .expect("the stream ended early")
                .expect("a WebSocket error");
            match msg {
                Message::Binary(b) => {
                    assert_eq!(b.first(), Some(&1), "a terminal's output is stream 1");
                    output.extend_from_slice(&b[1..]);
                }
                Message::Text(t) => break serde_json::from_str::<Value>(t.as_str()).unwrap(),
                other => panic!("unexpected {other:?}"),
            }
        };
        let text = String::from_utf8_lossy(&output);
        assert!(text.contains("marker-42"), "{text}");
        assert!(text.contains("30 100"), "the terminal's size: {text}");
        assert!(text.contains("/dev/pts/"), "a pseudo-terminal: {text}");
        assert_eq!(ending, json!({"type": "exit", "exit_code": 3}));
    });
    let (_, events) = srv.get(&format!("/v1/events?sandbox={name}"));
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "shell"),
        "{events}"
    );
}
