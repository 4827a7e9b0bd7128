//! How corrald bounds the work the sandbox routes start, against the REAL
//! Incus daemon through the real corrald binary: memory and errors under
//! load, streamed exec live both ways, 429 with Retry-After when saturated,
//! and a client going away that does not unbound its command. Names are
//! unique per run; a guard force-deletes every instance a test named.
//! Without a daemon the tests fail under `CI=true` and skip otherwise.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::incus::{Cleanup, incus_socket, raw_client, runtime, server, unique};
use common::{Server, assert_error};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use serde_json::{Value, json};
use std::time::Duration;

/// corrald's peak resident memory (`VmHWM`), in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap()
}

#[test]
fn work_is_bounded_and_errors_say_what_happened() {
    let Some(socket) = incus_socket("work_is_bounded_and_errors_say_what_happened") else {
        return;
    };
    let name = unique("bound");
    let _guard = Cleanup {
        client: raw_client(&socket),
        names: vec![name.clone()],
    };
    // A short default exec timeout, so the kill of a whole process tree
    // can be seen.
    let srv = Server::start(&[
        "--listen",
        "127.0.0.1:0",
        "--incus-socket",
        &socket,
        "--exec-timeout",
        "3",
    ]);
    let at = format!("/v1/sandboxes/{name}");

    // More CPUs than the host has: refused before anything is made.
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS, "resources": {"cpus": 100_000}})),
    );
    assert_error(s, &body, 400, "invalid_spec");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("resources.cpus") && msg.contains("this host has"),
        "{msg}"
    );

    let (s, info) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{info}");
    let (s, info) = srv.call("POST", &format!("{at}/start"), None);
    assert_eq!(s, 200, "{info}");

    // 20 MB of output: the answer holds the first 1 MiB of it and says so,
    // and corrald never holds the whole of it.
    let (s, out) = srv.call(
        "POST",
        &format!("{at}/exec"),
        Some(&json!({"argv": ["head", "-c", "20000000", "/dev/zero"]})),
    );
    assert_eq!(
        s,
        200,
        "{}",
        &out.to_string()[..200.min(out.to_string().len())]
    );
    assert_eq!(out["truncated"], true);
    assert_eq!(out["exit_code"], 0);
    let b64 = out["stdout_base64"].as_str().unwrap();
    assert_eq!(b64.len(), (1usize << 20).div_ceil(3) * 4, "the stdout cap");
    let rss = peak_rss_kib(srv.pid());
    assert!(rss < 64 * 1024, "corrald's peak RSS was {rss} KiB");

    // A command that does not exist is the caller's mistake.
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/exec"),
        Some(&json!({"argv": ["/no/such/program"]})),
    );
    assert_error(s, &body, 400, "invalid_spec");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("command not found") && msg.contains("/no/such/program"),
        "{msg}"
    );

    // No timeout given: the default one kills the command and its children.
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/exec"),
        Some(&json!({"argv": ["sh", "-c", "sleep 301 & sleep 302; wait"]})),
    );
    assert_error(s, &body, 504, "timeout");
    let (s, out) = srv.call(
        "POST",
        &format!("{at}/exec"),
        Some(&json!({"argv": ["sh", "-c", "ps -o args | grep -c '^sleep 30[12]' || true"]})),
    );
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["stdout"], "0\n", "the timed-out tree survived: {out}");

    // An exec may not ask for more than the maximum.
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/exec"),
        Some(&json!({"argv": ["true"], "timeout_secs": 10_000_000})),
    );
    assert_error(s, &body, 400, "invalid_spec");

    // A clean stop that cannot finish in 2 s reports how long it took,
    // never more than the caller waited.
    let asked = std::time::Instant::now();
    let (s, body) = srv.call(
        "POST",
        &format!("{at}/stop"),
        Some(&json!({"timeout_secs": 2})),
    );
    let waited = asked.elapsed();
    if s == 504 {
        assert_error(s, &body, 504, "timeout");
        let msg = body["error"]["message"].as_str().unwrap();
        let reported: f64 = msg
            .rsplit("after ")
            .next()
            .and_then(|t| t.strip_suffix('s'))
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("no elapsed time in {msg}"));
        assert!(
            reported <= waited.as_secs_f64(),
            "{msg} but the client waited {waited:?}"
        );
        assert!(reported >= 2.0, "{msg}");
        assert!(msg.contains("force"), "{msg}");
    } else {
        // The image's init did shut down in time: nothing to report.
        assert_eq!(s, 200, "{body}");
    }

    // Ten deletes at once: one deletes, the others find nothing.
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..10)
            .map(|_| scope.spawn(|| srv.call("DELETE", &at, None).0))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let deleted = statuses.iter().filter(|s| **s == 200).count();
    let missing = statuses.iter().filter(|s| **s == 404).count();
    assert_eq!((deleted, missing), (1, 9), "{statuses:?}");
}

/// The next message of a streamed exec, or a failure after a minute (a
/// stream that stopped being live would otherwise hang the test).
async fn next_message(
    ws: &mut tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
) -> tokio_tungstenite::tungstenite::Message {
    use futures::StreamExt as _;
    tokio::time::timeout(Duration::from_secs(60), ws.next())
        .await
        .expect("no message from the streamed exec within a minute")
        .expect("the stream ended early")
        .expect("a WebSocket error")
}

#[test]
fn streamed_exec_is_live_both_ways() {
    use futures::SinkExt as _;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

    let Some(socket) = incus_socket("streamed_exec_is_live_both_ways") else {
        return;
    };
    let name = unique("stream");
    let _guard = Cleanup {
        client: raw_client(&socket),
        names: vec![name.clone()],
    };
    let srv = server(&socket);
    let at = format!("/v1/sandboxes/{name}");
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = srv.call("POST", &format!("{at}/start"), None);
    assert_eq!(s, 200, "{body}");

    // A plain GET is told to speak WebSocket, in the error shape.
    let (s, body) = srv.get(&format!("{at}/exec/stream"));
    assert_error(s, &body, 400, "not_websocket");

    let connect = || async {
        let tcp = tokio::net::TcpStream::connect(&srv.addr).await.unwrap();
        let mut req = format!("ws://{}{at}/exec/stream", srv.addr)
            .into_client_request()
            .unwrap();
        req.headers_mut().insert(
            "Authorization",
            format!("Bearer {}", common::TOKEN).parse().unwrap(),
        );
        tokio_tungstenite::client_async(req, tcp).await.unwrap().0
    };
    runtime().block_on(async {
        let mut ws = connect().await;
        let script = "read a; echo got-$a; read b; echo got-$b >&2; exit 7";
        ws.send(Message::text(
            json!({"argv": ["sh", "-c", script]}).to_string(),
        ))
        .await
        .unwrap();
        ws.send(Message::binary(b"one\n".to_vec())).await.unwrap();
        // The answer to the first line arrives while the command still
        // waits for the second: output and input are both live.
        let first = next_message(&mut ws).await.into_data();
        assert_eq!(&first[..], b"\x01got-one\n");
        ws.send(Message::binary(b"two\n".to_vec())).await.unwrap();
        ws.send(Message::text(r#"{"type":"eof"}"#)).await.unwrap();
        let mut stderr = Vec::new();
        let ending = loop {
            match next_message(&mut ws).await {
                Message::Binary(b) if b.first() == Some(&2) => stderr.extend_from_slice(&b[1..]),
                Message::Text(t) => break serde_json::from_str::<Value>(t.as_str()).unwrap(),
                other => panic!("unexpected {other:?}"),
            }
        };
        assert_eq!(stderr, b"got-two\n");
        assert_eq!(ending, json!({"type": "exit", "exit_code": 7}));

        // A first message that is not an exec body ends with the error shape.
        let mut ws = connect().await;
        ws.send(Message::text(r#"{"argv": []}"#)).await.unwrap();
        let Message::Text(t) = next_message(&mut ws).await else {
            panic!("expected the ending");
        };
        let ending: Value = serde_json::from_str(t.as_str()).unwrap();
        assert_eq!(ending["type"], "error", "{ending}");
        assert_eq!(ending["error"]["code"], "invalid_spec", "{ending}");
    });
}

#[test]
fn a_saturated_corrald_answers_429_with_retry_after() {
    let Some(socket) = incus_socket("a_saturated_corrald_answers_429_with_retry_after") else {
        return;
    };
    let name = unique("busy");
    let _guard = Cleanup {
        client: raw_client(&socket),
        names: vec![name.clone()],
    };
    // One provider operation at a time, nobody waits.
    let srv = Server::start(&[
        "--listen",
        "127.0.0.1:0",
        "--incus-socket",
        &socket,
        "--max-operations",
        "1",
        "--queue",
        "0",
    ]);
    let at = format!("/v1/sandboxes/{name}");
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = srv.call("POST", &format!("{at}/start"), None);
    assert_eq!(s, 200, "{body}");
    std::thread::scope(|scope| {
        // A long exec holds the only turn for 31 s (retried while the
        // lists below hold it); longer than the Incus client's 30 s request
        // bound, which once cut every exec at 30 s...
        let long = scope.spawn(|| {
            loop {
                let answer = srv.call(
                    "POST",
                    &format!("{at}/exec"),
                    Some(&json!({"argv": ["sleep", "31"]})),
                );
                if answer.0 != 429 {
                    return answer;
                }
            }
        });
        // ...so once it has it, a list is told to come back.
        let auth = format!("Bearer {}", common::TOKEN);
        let mut refused = None;
        for _ in 0..2500 {
            if long.is_finished() {
                break;
            }
            let (s, head, body) = common::send(
                std::net::TcpStream::connect(&srv.addr).unwrap(),
                &common::Req {
                    method: "GET",
                    path: "/v1/sandboxes",
                    host: &srv.addr,
                    headers: &[("Authorization", &auth)],
                    body: None,
                    content_type: None,
                },
            );
            if s == 429 {
                refused = Some((head, body));
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let (head, body) = refused.expect("no 429 while the only turn was taken");
        assert_error(429, &body, 429, "busy");
        assert!(
            head.to_ascii_lowercase().contains("retry-after: 1"),
            "{head}"
        );
        let (s, out) = long.join().unwrap();
        assert_eq!(s, 200, "{out}");
    });
}

/// How many guest processes run `sleep <secs>` for the given values.
fn sleepers(srv: &Server, at: &str, pattern: &str) -> u64 {
    let (s, out) = srv.call(
        "POST",
        &format!("{at}/exec"),
        Some(&json!({"argv": ["sh", "-c", format!("ps -o args | grep -c '^sleep {pattern}' || true")]})),
    );
    assert_eq!(s, 200, "{out}");
    out["stdout"].as_str().unwrap().trim().parse().unwrap()
}

/// Poll (at most a minute: the timeouts below are 3 s) until `pattern`'s
/// sleepers reach `want`.
fn wait_for_sleepers(srv: &Server, at: &str, pattern: &str, want: u64) {
    for _ in 0..120 {
        if sleepers(srv, at, pattern) == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("`sleep {pattern}` processes never reached {want}");
}

#[test]
fn a_client_that_goes_away_does_not_unbound_its_command() {
    use std::io::Write as _;

    use futures::SinkExt as _;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

    let Some(socket) = incus_socket("a_client_that_goes_away_does_not_unbound_its_command") else {
        return;
    };
    let name = unique("gone");
    let _guard = Cleanup {
        client: raw_client(&socket),
        names: vec![name.clone()],
    };
    let srv = server(&socket);
    let at = format!("/v1/sandboxes/{name}");
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{body}");
    let (s, body) = srv.call("POST", &format!("{at}/start"), None);
    assert_eq!(s, 200, "{body}");

    // A buffered exec whose client hangs up at once: the timeout still
    // fires and kills the command's whole tree.
    let exec =
        json!({"argv": ["sh", "-c", "sleep 311 & sleep 312; wait"], "timeout_secs": 3}).to_string();
    let mut tcp = std::net::TcpStream::connect(&srv.addr).unwrap();
    write!(
        tcp,
        "POST {at}/exec HTTP/1.1\r\nHost: {}\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{exec}",
        srv.addr,
        common::TOKEN,
        exec.len()
    )
    .unwrap();
    wait_for_sleepers(&srv, &at, "31[12]", 2);
    drop(tcp);
    wait_for_sleepers(&srv, &at, "31[12]", 0);

    // A streamed exec whose client goes away: the same.
    runtime().block_on(async {
        let tcp = tokio::net::TcpStream::connect(&srv.addr).await.unwrap();
        let mut req = format!("ws://{}{at}/exec/stream", srv.addr)
            .into_client_request()
            .unwrap();
        req.headers_mut().insert(
            "Authorization",
            format!("Bearer {}", common::TOKEN).parse().unwrap(),
        );
        let (mut ws, _) = tokio_tungstenite::client_async(req, tcp).await.unwrap();
        let body = json!({"argv": ["sh", "-c", "sleep 321 & sleep 322; yes"], "timeout_secs": 3});
        ws.send(Message::text(body.to_string())).await.unwrap();
        // Output flows (`yes`), then the client vanishes without a word.
        let _ = next_message(&mut ws).await;
        drop(ws);
    });
    wait_for_sleepers(&srv, &at, "32[12]", 0);
}
