//! Shared by the corrald suites: the real binary started on a loopback port
//! (with a token) or a socket, and a minimal HTTP/1.0 client so the tests
//! depend on no HTTP client library.
#![allow(dead_code)]

pub mod incus;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use serde_json::Value;

/// The token the suites give a TCP corrald.
pub const TOKEN: &str = "corrald-test-token-0123456789abcdef";

/// A private token file holding [`TOKEN`], in its own directory.
pub fn token_file() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    (dir, file)
}

/// A running corrald, killed on drop, with its own state directory.
pub struct Server {
    child: Child,
    /// `host:port`, or the socket path.
    pub addr: String,
    /// The state directory (a temporary one unless the caller gave one).
    pub state: Option<tempfile::TempDir>,
    /// Where stderr goes, when the caller asked to keep it.
    pub log: Option<PathBuf>,
    token_dir: Option<tempfile::TempDir>,
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

    /// Start corrald with exactly `args` (plus a token file when it
    /// listens on TCP and none is named).
    pub fn start_exact(args: &[String]) -> Self {
        Self::start_with(args, &[], None)
    }

    /// Start corrald with `args`, extra environment `env`, and stderr
    /// appended to `log` (else discarded).
    pub fn start_with(args: &[String], env: &[(&str, &str)], log: Option<PathBuf>) -> Self {
        Self::start_under(&[], args, env, log)
    }

    /// [`Self::start_with`], run through `wrapper` (a program and its
    /// arguments, e.g. `setpriv` dropping capabilities) when not empty.
    pub fn start_under(
        wrapper: &[String],
        args: &[String],
        env: &[(&str, &str)],
        log: Option<PathBuf>,
    ) -> Self {
        Self::start_prepared(wrapper, args, env, log, |_| {})
    }

    /// [`Self::start_under`], with `prepare` given the command before it
    /// is spawned (e.g. a `pre_exec` installing a seccomp filter).
    pub fn start_prepared(
        wrapper: &[String],
        args: &[String],
        env: &[(&str, &str)],
        log: Option<PathBuf>,
        prepare: impl FnOnce(&mut Command),
    ) -> Self {
        let mut args = args.to_vec();
        let mut token_dir = None;
        if args.iter().any(|a| a == "--listen") && !args.iter().any(|a| a == "--token-file") {
            let (dir, file) = token_file();
            args.extend(["--token-file".to_owned(), file.display().to_string()]);
            token_dir = Some(dir);
        }
        let stderr = match &log {
            Some(path) => Stdio::from(std::fs::File::create(path).unwrap()),
            None => Stdio::null(),
        };
        let mut cmd = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(env!("CARGO_BIN_EXE_corrald"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_corrald")),
        };
        cmd.args(&args).stdout(Stdio::piped()).stderr(stderr);
        // These tests make drift on purpose and assert what corrald says
        // about it: the kernel watch would heal it first (its own tests are
        // in corral-tests' kernel_watch). Likewise they kill gateways and
        // start sandboxes behind corral's back on purpose: the supervisors
        // would restart and judge them (their tests: corral-service's
        // gateway_supervise, corral-tests' unmanaged_start).
        cmd.env("CORRALD_NO_KERNEL_WATCH", "true");
        cmd.env("CORRALD_NO_SUPERVISE", "true");
        for (k, v) in env {
            cmd.env(k, v);
        }
        prepare(&mut cmd);
        let mut child = cmd.spawn().unwrap();
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
            log,
            token_dir,
        }
    }

    /// One request over TCP, with the token and `Host` set right.
    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let auth = format!("Bearer {TOKEN}");
        let (status, _, json) = send(
            TcpStream::connect(&self.addr).unwrap(),
            &Req {
                method,
                path,
                host: &self.addr,
                headers: &[("Authorization", &auth)],
                body: body.map(Value::to_string).as_deref(),
                content_type: Some("application/json"),
            },
        );
        (status, json)
    }

    /// One request over TCP whose body (and answer) are bytes: the
    /// status, the response head (lower-cased) and the raw answer body.
    pub fn bytes(
        &self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: &[u8],
    ) -> (u16, String, Vec<u8>) {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        let mut head = format!(
            "{method} {path} HTTP/1.0\r\nHost: {}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if let Some(t) = content_type {
            head.push_str(&format!("Content-Type: {t}\r\n"));
        }
        head.push_str("\r\n");
        let _ = stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body));
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("bad answer: {}", String::from_utf8_lossy(&raw)));
        let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
        let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, head, raw[split + 4..].to_vec())
    }

    /// `GET path`.
    pub fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None)
    }

    /// Stop with SIGTERM and wait; the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        self.child.wait().unwrap()
    }

    /// Kill with SIGKILL (no clean-up of any kind) and wait.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A request for [`send`].
pub struct Req<'a> {
    /// The method.
    pub method: &'a str,
    /// The path.
    pub path: &'a str,
    /// The `Host` header.
    pub host: &'a str,
    /// More headers.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body.
    pub body: Option<&'a str>,
    /// The body's type (sent only with a body).
    pub content_type: Option<&'a str>,
}

/// An HTTP/1.0 request (no chunking, the server closes); returns the
/// status, the response head and the parsed JSON body (`Null` when empty).
pub fn send(mut stream: impl Read + Write, req: &Req<'_>) -> (u16, String, Value) {
    let body = req.body.unwrap_or_default();
    let mut head = format!(
        "{} {} HTTP/1.0\r\nHost: {}\r\n",
        req.method, req.path, req.host
    );
    if req.body.is_some()
        && let Some(t) = req.content_type
    {
        head.push_str(&format!("Content-Type: {t}\r\n"));
    }
    for (k, v) in req.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    // A server may answer (413, 415) and close before the body is sent:
    // a failed write still leaves its answer to read.
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()));
    let mut raw = Vec::new();
    if let Err(e) = stream.read_to_end(&mut raw)
        && raw.is_empty()
    {
        panic!("no answer to {} {}: {e}", req.method, req.path);
    }
    let raw = String::from_utf8_lossy(&raw);
    let (head, body) = raw
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("bad answer: {raw}"));
    let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
    };
    (status, head.to_owned(), json)
}

/// A JSON request without credentials (the unix socket's caller is the
/// process itself); returns the status and the parsed JSON body.
pub fn request(
    stream: impl Read + Write,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let (status, _, json) = send(
        stream,
        &Req {
            method,
            path,
            host: "localhost",
            headers: &[],
            body: body.map(Value::to_string).as_deref(),
            content_type: Some("application/json"),
        },
    );
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

/// The `corral` binary, built beside corrald (`cargo test --workspace`
/// builds both; alone: `cargo build -p corral-cli` first).
#[allow(dead_code)]
pub fn corral_bin() -> PathBuf {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_corrald")).with_file_name("corral");
    assert!(
        bin.is_file(),
        "{} is missing: build it first (cargo build -p corral-cli)",
        bin.display()
    );
    bin
}

/// `method path [body]` on the socket as `user`, through curl (a real
/// client process under that uid); the status and the JSON body.
#[allow(dead_code)]
pub fn as_user(
    user: &corral_test_support::TestUser,
    sock: &std::path::Path,
    method: &str,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut cmd = user.command("curl");
    cmd.args([
        "-sS",
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
        "-X",
        method,
        "--unix-socket",
    ])
    .arg(sock);
    if let Some(b) = body {
        cmd.args(["-H", "Content-Type: application/json", "--data-binary"])
            .arg(b.to_string());
    }
    let out = cmd.arg(format!("http://localhost{path}")).output().unwrap();
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

/// A network namespace held by a `sleep`, for a corrald run with
/// `--netns` (its listener stays in the test's namespace); the kernel frees
/// the namespace (and the rules in it) once the holder and every process
/// in it are gone. A corrald that enforces or collects in a namespace of
/// its own sees none of the blocked packets of tests that run beside it.
pub struct HeldNetns {
    holder: Child,
}

impl HeldNetns {
    /// Unshares a fresh namespace and waits until its holder is in it.
    pub fn new() -> Self {
        let holder = Command::new("unshare")
            .args(["--net", "sleep", "600"])
            .spawn()
            .unwrap();
        let ns = Self { holder };
        let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
        for _ in 0..200 {
            if std::fs::read_link(ns.path()).is_ok_and(|l| l != ours) {
                return ns;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the namespace holder did not leave this namespace");
    }

    /// The namespace's path, for `--netns`.
    pub fn path(&self) -> String {
        format!("/proc/{}/ns/net", self.holder.id())
    }

    /// Runs `program` inside the namespace.
    pub fn exec(&self, program: &str, args: &[&str]) -> std::process::Output {
        Command::new("nsenter")
            .arg(format!("--net={}", self.path()))
            .arg(program)
            .args(args)
            .output()
            .unwrap()
    }
}

impl Drop for HeldNetns {
    fn drop(&mut self) {
        let _ = self.holder.kill();
        let _ = self.holder.wait();
    }
}

/// Sabotage with `nft` (the real tool, not corral's code): an accept for
/// `dst`, first in corral's inet chain `chain`.
pub fn nft_accept_first(chain: &str, dst: std::net::IpAddr) {
    let out = Command::new("nft")
        .args([
            "insert",
            "rule",
            "inet",
            "corral",
            chain,
            "ip",
            "daddr",
            &dst.to_string(),
            "accept",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
