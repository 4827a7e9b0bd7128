//! corrald under 20 concurrent clients, on its unix socket, against the
//! real Incus daemon, each figure next to a baseline measured in the same
//! run:
//! - `GET /v1/sandboxes` requests per second (each client on its own
//!   keep-alive connection) against the same list asked of the Incus
//!   daemon directly (`GET /1.0/instances?recursion=1` on corral's project),
//!   with 10 sandboxes present;
//! - create → start → exec `true` latency (p50, p99) through corrald
//!   against the same sequence through the library corrald calls
//!   (`SandboxService`: create, start, ready, exec), each client deleting
//!   its sandbox after each round.
//!
//! `cargo bench -p corral-api --bench corrald [-- SECONDS ROUNDS]` (root;
//! scripts/incus-setup.sh and scripts/incus-image.sh first). Defaults: 10 s
//! of listing, 5 rounds per client.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::config::Config;
use corral_sandbox_core::sandbox::ExecRequest;
use corral_service::{
    Backend, ConfigSource, CreateOptions, NewSandbox, SandboxService, Settings, config,
};
use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

const CLIENTS: usize = 20;
const INCUS_SOCKET: &str = "/var/lib/incus/unix.socket";

type Conn = http1::SendRequest<Full<Bytes>>;

/// One keep-alive HTTP/1.1 connection on a unix socket.
async fn connect(socket: &str) -> Result<Conn, String> {
    let stream = tokio::net::UnixStream::connect(socket)
        .await
        .map_err(|e| format!("{socket}: {e}"))?;
    let (send, conn) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    Ok(send)
}

/// One request; the status and body.
async fn call(
    conn: &mut Conn,
    method: &str,
    path: &str,
    body: Option<String>,
) -> Result<(u16, Bytes), String> {
    conn.ready().await.map_err(|e| e.to_string())?;
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("Host", "localhost");
    if body.is_some() {
        req = req.header("Content-Type", "application/json");
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| e.to_string())?;
    let res = conn.send_request(req).await.map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    let bytes = res
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, bytes))
}

/// Requests per second of `path` on `socket`, from CLIENTS connections for
/// `secs`; every answer must be 200.
async fn rate(socket: &str, path: &str, secs: u64) -> Result<f64, String> {
    let until = Instant::now() + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (socket, path) = (socket.to_owned(), path.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut conn = connect(&socket).await?;
            let mut n = 0u64;
            while Instant::now() < until {
                let (s, body) = call(&mut conn, "GET", &path, None).await?;
                if s != 200 {
                    return Err(format!("{path}: {s} {}", String::from_utf8_lossy(&body)));
                }
                n += 1;
            }
            Ok::<u64, String>(n)
        }));
    }
    let started = Instant::now();
    let mut total = 0;
    for t in tasks {
        total += t.await.map_err(|e| e.to_string())??;
    }
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// create → start → exec through corrald, then delete: the time until the
/// exec answered.
async fn through_corrald(conn: &mut Conn, name: &str) -> Result<Duration, String> {
    let t = Instant::now();
    let body = format!(r#"{{"name":"{name}","image":"{TEST_IMAGE_ALIAS}"}}"#);
    let steps = [
        ("POST", "/v1/sandboxes".to_owned(), Some(body), 201),
        ("POST", format!("/v1/sandboxes/{name}/start"), None, 200),
        (
            "POST",
            format!("/v1/sandboxes/{name}/exec"),
            Some(r#"{"argv":["true"]}"#.to_owned()),
            200,
        ),
    ];
    for (method, path, body, want) in steps {
        let (s, answer) = call(conn, method, &path, body).await?;
        if s != want {
            return Err(format!(
                "{method} {path}: {s} {}",
                String::from_utf8_lossy(&answer)
            ));
        }
    }
    let took = t.elapsed();
    let (s, answer) = call(conn, "DELETE", &format!("/v1/sandboxes/{name}"), None).await?;
    if s != 204 {
        return Err(format!(
            "DELETE {name}: {s} {}",
            String::from_utf8_lossy(&answer)
        ));
    }
    Ok(took)
}

/// The same through the library.
async fn through_library(service: &SandboxService, name: &str) -> Result<Duration, String> {
    let t = Instant::now();
    let req = NewSandbox::new(name, TEST_IMAGE_ALIAS);
    service
        .create(&req, CreateOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    let out = service
        .exec(name, &ExecRequest::new(["true"]))
        .await
        .map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!("exec exited {}", out.exit_code));
    }
    let took = t.elapsed();
    service.delete(name).await.map_err(|e| e.to_string())?;
    Ok(took)
}

/// Every client runs `rounds` rounds of `one`; all latencies, sorted.
async fn latencies<F, Fut>(rounds: usize, one: F) -> Result<Vec<Duration>, String>
where
    F: Fn(usize, usize) -> Fut,
    Fut: std::future::Future<Output = Result<Duration, String>> + Send + 'static,
{
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let rounds: Vec<Fut> = (0..rounds).map(|r| one(c, r)).collect();
        tasks.push(tokio::spawn(async move {
            let mut v = Vec::new();
            for f in rounds {
                v.push(f.await?);
            }
            Ok::<_, String>(v)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(|e| e.to_string())??);
    }
    all.sort();
    Ok(all)
}

struct Corrald(Child, tempfile::TempDir);

impl Drop for Corrald {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), String> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let secs = args.first().copied().unwrap_or(10);
    let rounds = args.get(1).copied().unwrap_or(5) as usize;
    let pid = std::process::id();

    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let sock = dir.path().join("corrald.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .arg("--socket")
        .arg(&sock)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    {
        use std::io::BufRead as _;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        std::io::BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| e.to_string())?;
        if !line.contains("listening on") {
            return Err(format!("corrald did not start: {line}"));
        }
    }
    let corrald = Corrald(child, dir);
    let sock = sock.display().to_string();

    // The library baseline: the service corrald wraps, same daemon.
    let loaded = config::load(&ConfigSource::default()).map_err(|e| e.to_string())?;
    let backend = Backend::select(
        "linux",
        SandboxKind::Incus,
        &Config::builtin_default().host,
        INCUS_SOCKET.into(),
    )
    .map_err(|e| e.to_string())?;
    let settings = Settings::new(loaded, None, Some(&corrald.1.path().join("lib-state")));
    let service = SandboxService::new(Arc::new(settings), Arc::new(backend))
        .without_canary("the bench measures corrald's answers, not the canary");

    // Ten sandboxes to list.
    let mut conn = connect(&sock).await?;
    let present: Vec<String> = (0..10).map(|i| format!("bench-list-{pid}-{i}")).collect();
    for name in &present {
        let body = format!(r#"{{"name":"{name}","image":"{TEST_IMAGE_ALIAS}"}}"#);
        let (s, b) = call(&mut conn, "POST", "/v1/sandboxes", Some(body)).await?;
        if s != 201 {
            return Err(format!(
                "create {name}: {s} {}",
                String::from_utf8_lossy(&b)
            ));
        }
    }
    let listing = async {
        // Interleaved halves, so load drift hits both alike.
        let half = secs.div_ceil(2);
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..2 {
            ours.push(rate(&sock, "/v1/sandboxes", half).await?);
            theirs.push(
                rate(
                    INCUS_SOCKET,
                    "/1.0/instances?recursion=1&project=corral",
                    half,
                )
                .await?,
            );
        }
        Ok::<_, String>((
            ours.iter().sum::<f64>() / 2.0,
            theirs.iter().sum::<f64>() / 2.0,
        ))
    }
    .await;
    for name in &present {
        let _ = call(&mut conn, "DELETE", &format!("/v1/sandboxes/{name}"), None).await;
    }
    let (ours, theirs) = listing?;
    println!("GET /v1/sandboxes, {CLIENTS} clients, 10 sandboxes, {secs} s each side");
    println!("  corrald: {ours:>8.1} req/s");
    println!("  Incus:   {theirs:>8.1} req/s (GET /1.0/instances?recursion=1 on the socket)");
    println!("  ratio corrald/Incus: {:.2}", ours / theirs);

    let sock2 = sock.clone();
    let http = latencies(rounds, move |c, r| {
        let sock = sock2.clone();
        async move {
            let mut conn = connect(&sock).await?;
            through_corrald(&mut conn, &format!("bench-h-{pid}-{c}-{r}")).await
        }
    })
    .await?;
    let service = Arc::new(service);
    let lib = latencies(rounds, move |c, r| {
        let service = Arc::clone(&service);
        async move { through_library(&service, &format!("bench-l-{pid}-{c}-{r}")).await }
    })
    .await?;
    println!(
        "create -> start -> exec true, {CLIENTS} clients x {rounds} rounds ({} samples each)",
        http.len()
    );
    for (label, v) in [("corrald", &http), ("library", &lib)] {
        println!(
            "  {label}: p50 {:>7.1} ms, p99 {:>7.1} ms",
            ms(percentile(v, 0.5)),
            ms(percentile(v, 0.99))
        );
    }
    println!(
        "  ratio corrald/library: p50 {:.2}, p99 {:.2}",
        ms(percentile(&http, 0.5)) / ms(percentile(&lib, 0.5)),
        ms(percentile(&http, 0.99)) / ms(percentile(&lib, 0.99))
    );
    drop(corrald);
    Ok(())
}
