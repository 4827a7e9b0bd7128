//! Shared by the corrald suites: the real binary started on a loopback port
//! (or a socket), and a minimal HTTP/1.0 client so the tests depend on no
//! HTTP client library.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// A running corrald, killed on drop, with its own state directory.
pub struct Server {
    child: Child,
    /// `host:port`, or the socket path.
    pub addr: String,
    /// The state directory (a temporary one unless the caller gave one).
    pub state: Option<tempfile::TempDir>,
}

impl Server {
    /// Start corrald with `extra` arguments and a fresh `--state-dir`.
    pub fn start(extra: &[&str]) -> Self {
        let state = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
        args.extend(["--state-dir".to_owned(), state.path().display().to_string()]);
        let mut s = Self::start_exact(&args);
        s.state = Some(state);
        s
    }

    /// Start corrald with exactly `args`.
    pub fn start_exact(args: &[String]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_corrald"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(
            line.contains("listening on"),
            "corrald did not start: `{line}`"
        );
        let addr = line
            .trim()
            .rsplit(' ')
            .next()
            .unwrap_or_else(|| panic!("no address in `{line}`"))
            .to_owned();
        Self {
            child,
            addr,
            state: None,
        }
    }

    /// One request over TCP.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        request(TcpStream::connect(&self.addr).unwrap(), method, path, body)
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP/1.0 request (no chunking, the server closes); returns the status
/// and the parsed JSON body (`Null` when empty).
pub fn request(
    mut stream: impl Read + Write,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let body = body.map(Value::to_string).unwrap_or_default();
    let ctype = if body.is_empty() {
        ""
    } else {
        "Content-Type: application/json\r\n"
    };
    write!(
        stream,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\n{ctype}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
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

/// Assert the documented error shape: `{"error": {"code", "message"}}`
/// with exactly those two string fields, and the code wanted.
pub fn assert_error(status: u16, body: &Value, want_status: u16, want_code: &str) {
    assert_eq!(status, want_status, "{body}");
    let err = body["error"]
        .as_object()
        .unwrap_or_else(|| panic!("{body}"));
    assert_eq!(err.len(), 2, "{body}");
    assert_eq!(err["code"], want_code, "{body}");
    assert!(
        !err["message"].as_str().unwrap_or_default().is_empty(),
        "{body}"
    );
}
