//! A real Prometheus (Debian's `prometheus`) scrapes corrald's `/metrics`
//! every second over loopback, with the bearer token from a file as its
//! scrape configuration gives it, and one series of each family is read
//! back through Prometheus's own HTTP API (`/api/v1/query`). corrald runs
//! on the built-in profiles applied for real in the host namespace
//! (`corral_tests::builtin_lab`) against the real Incus daemon, with the
//! kernel watch on.
//!
//! Controls, each the same query before the change: no running sandbox,
//! no canary run and no blocked packet on `isolated`, no refused name on
//! `allowlist`, before their sandboxes start (then one sandbox, a passed
//! run, blocked packets from its canary; a refusal of the canary's
//! unlisted name); no heal before an accept rule is slipped into corral's
//! table behind its back (then one, and the drift gauge back at 0); no
//! sysctl drift before a bridge's sysctl is changed (then 1, then 0 once
//! it is put back). A scrape without the token is refused (401); with it,
//! the answer names no sandbox.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::incus::{Cleanup, incus_socket, raw_client};
use common::{Req, Server, send, token_file};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_tests::builtin_lab::{BuiltinLab, CANARY};
use serde_json::{Value, json};

/// The watchdog's interval (also read back as a family).
const INTERVAL_SECS: u64 = 30;
/// A generous bound for a series to show up (1 s scrapes on a loaded machine).
const PATIENCE: Duration = Duration::from_secs(90);

/// A Prometheus server, killed on drop.
struct Prometheus {
    child: Child,
    addr: String,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Prometheus {
    /// Scrape `target` (`127.0.0.1:port`) every second with the token in
    /// `token_file`.
    fn start(target: &str, token_file: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: corrald\n    metrics_path: /metrics\n    \
                 authorization:\n      type: Bearer\n      credentials_file: {}\n    \
                 static_configs:\n      - targets: ['{target}']\n",
                token_file.display()
            ),
        )
        .unwrap();
        let addr = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(dir.path().join("prometheus.log")).unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let p = Self {
            child,
            addr,
            _dir: dir,
        };
        let started = Instant::now();
        while !p.ready() {
            assert!(
                started.elapsed() < PATIENCE,
                "prometheus not ready after {PATIENCE:?}: {}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }

    fn ready(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(&self.addr) else {
            return false;
        };
        use std::io::{Read as _, Write as _};
        let head = format!("GET /-/ready HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr);
        let mut raw = String::new();
        s.write_all(head.as_bytes()).is_ok()
            && s.read_to_string(&mut raw).is_ok()
            && raw.starts_with("HTTP/1.0 200")
    }

    /// The instant vector `promql` selects now: `(labels, value)` each.
    fn query(&self, promql: &str) -> Vec<(Value, f64)> {
        let path = format!("/api/v1/query?query={}", encode(promql));
        let (status, _, body) = send(
            TcpStream::connect(&self.addr).unwrap(),
            &Req {
                method: "GET",
                path: &path,
                host: &self.addr,
                headers: &[],
                body: None,
                content_type: None,
            },
        );
        assert_eq!(status, 200, "{promql}: {body}");
        assert_eq!(body["status"], "success", "{promql}: {body}");
        body["data"]["result"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let v: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
                (r["metric"].clone(), v)
            })
            .collect()
    }

    /// Wait until `promql` selects at least one series whose value
    /// `want` accepts; that series' value.
    fn wait_for(&self, promql: &str, want: impl Fn(f64) -> bool) -> f64 {
        let started = Instant::now();
        loop {
            let got = self.query(promql);
            if let Some((_, v)) = got.iter().find(|(_, v)| want(*v)) {
                eprintln!("prometheus: {promql} = {v}");
                return *v;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "`{promql}` after {PATIENCE:?}: {got:?}\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// Percent-encoding of a query string value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[test]
fn a_real_prometheus_scrapes_every_family() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("nft", "nftables")
        || !corral_test_support::gate::tool("prometheus", "prometheus")
    {
        return;
    }
    let Some(socket) = incus_socket("prometheus") else {
        return;
    };
    let client = raw_client(&socket);
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let name = format!("t-api-prom-{}", std::process::id());
    let listed = format!("t-api-prom2-{}", std::process::id());
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone(), listed.clone()],
    };
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let (_token_dir, token) = token_file();
    let srv = Server::start_with(
        &[
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--token-file".into(),
            token.display().to_string(),
            "--incus-socket".into(),
            socket.clone(),
            "--config".into(),
            lab.config_path().display().to_string(),
            "--state-dir".into(),
            lab.state_dir().display().to_string(),
            "--reverify-interval-secs".into(),
            INTERVAL_SECS.to_string(),
        ],
        // The kernel watch heals the drift this test makes.
        &[("CORRALD_NO_KERNEL_WATCH", "false")],
        None,
    );

    // Without the token: refused, like every other admin route.
    let (status, _, body) = send(
        TcpStream::connect(&srv.addr).unwrap(),
        &Req {
            method: "GET",
            path: "/metrics",
            host: &srv.addr,
            headers: &[],
            body: None,
            content_type: None,
        },
    );
    assert_eq!(status, 401, "{body}");

    let prom = Prometheus::start(&srv.addr, &token);
    prom.wait_for(r#"up{job="corrald"}"#, |v| v == 1.0);

    // Controls: nothing on `isolated` yet.
    let running = r#"corral_sandboxes{profile="isolated",state="running",kind="incus"}"#;
    assert!(prom.query(running).is_empty(), "{:?}", prom.query(running));
    prom.wait_for(
        r#"corral_canary_runs_total{profile="isolated",outcome="passed"}"#,
        |v| v == 0.0,
    );
    assert!(
        prom.query(r#"corral_blocked_packets_total{profile="isolated"}"#)
            .is_empty()
    );
    let refused = r#"corral_dns_decisions_total{profile="allowlist",decision="refused"}"#;
    prom.wait_for(refused, |v| v == 0.0);

    // The canaries make the events: blocked probes on `isolated`, a
    // lookup of a name on no list through `allowlist`'s gateway.
    for (n, profile) in [(&name, "isolated"), (&listed, "allowlist")] {
        let (s, body) = srv.call(
            "POST",
            "/v1/sandboxes",
            Some(&json!({"name": n, "image": TEST_IMAGE_ALIAS, "profile": profile})),
        );
        assert_eq!(s, 201, "{body}");
        let (s, body) = srv.call("POST", &format!("/v1/sandboxes/{n}/start"), None);
        assert_eq!(s, 200, "the canary passes at start: {body}");
    }

    // One series of each family, through Prometheus.
    prom.wait_for(running, |v| v == 1.0);
    prom.wait_for(
        r#"corral_canary_runs_total{profile="isolated",outcome="passed"}"#,
        |v| v >= 1.0,
    );
    prom.wait_for("corral_canary_duration_seconds_count", |v| v >= 1.0);
    // The canary's own probe of the canary address was dropped and logged.
    prom.wait_for(r#"corral_blocked_packets_total{profile="isolated"}"#, |v| {
        v >= 1.0
    });
    prom.wait_for(
        r#"corral_kernel_packets_total{profile="isolated",verdict="blocked"}"#,
        |v| v >= 1.0,
    );
    prom.wait_for(
        r#"corral_blocked_unlogged_packets_total{profile="isolated"}"#,
        |v| v >= 0.0,
    );
    prom.wait_for(refused, |v| v >= 1.0);
    prom.wait_for(r#"corral_gateway_up{profile="isolated"}"#, |v| v == 1.0);
    prom.wait_for(r#"corral_sandbox_verdicts{verdict="passed"}"#, |v| v >= 2.0);
    prom.wait_for("corral_watchdog_interval_seconds", |v| {
        v == INTERVAL_SECS as f64
    });
    prom.wait_for(r#"corral_cluster_members{standing="in_rotation"}"#, |v| {
        v == 0.0
    });
    // Off a cluster there is no member to name.
    assert!(prom.query("corral_cluster_member_in_rotation").is_empty());
    prom.wait_for("corral_host_applied_timestamp_seconds", |v| v > 0.0);
    prom.wait_for("corral_host_verify_duration_seconds_count", |v| v >= 1.0);
    prom.wait_for(r#"corral_host_drift{area="nft_inet"}"#, |v| v == 0.0);
    prom.wait_for("corral_host_drift_items", |v| v == 0.0);
    for source in ["sandboxes", "host", "gateways", "store", "cluster"] {
        prom.wait_for(
            &format!(r#"corral_scrape_source_up{{source="{source}"}}"#),
            |v| v == 1.0,
        );
    }
    prom.wait_for("corral_audit_records_total", |v| v >= 1.0);

    // Control, then the change: no heal yet; an accept slipped in front
    // of corral's rules is healed by the kernel watch.
    prom.wait_for(
        r#"corral_host_reaction_duration_seconds_count{reaction="healed"}"#,
        |v| v == 0.0,
    );
    common::nft_accept_first("isolated-out", CANARY.ip());
    prom.wait_for(
        r#"corral_host_reaction_duration_seconds_count{reaction="healed"}"#,
        |v| v == 1.0,
    );
    prom.wait_for(r#"corral_host_drift{area="nft_inet"}"#, |v| v == 0.0);

    // Drift the scrape sees before the watch does: a sysctl of the lab's
    // bridge changes without a kernel notification, so the watch meets it
    // only at its 30 s safety read-back (its timer restarted by the heal's
    // own events); the scrape's read-back sees it within a second or two.
    let knob = "/proc/sys/net/ipv4/conf/corral-iso/accept_local";
    let sysctl = r#"corral_host_drift{area="sysctl"}"#;
    prom.wait_for(sysctl, |v| v == 0.0);
    std::fs::write(knob, "1").unwrap();
    prom.wait_for(sysctl, |v| v == 1.0);
    std::fs::write(knob, "0").unwrap();
    prom.wait_for(sysctl, |v| v == 0.0);

    // What Prometheus read, as corrald serves it: no sandbox is named.
    let (s, head, text) = srv.bytes("GET", "/metrics", None, &[]);
    let text = String::from_utf8(text).unwrap();
    assert_eq!(s, 200, "{text}");
    assert!(
        head.contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    assert!(!text.contains(&name) && !text.contains(&listed), "{text}");
    eprintln!("--- GET /metrics ---\n{text}");
    drop(prom);
    drop(srv);
}
