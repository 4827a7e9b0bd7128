//! corrald instances attest to each other over mutually authenticated TLS
//! (`corrald --cluster`), with certificates made by
//! scripts/cluster-certs.sh and real corrald binaries, each enforcing
//! corral's built-in profiles in its own network namespace: a peer gets a
//! passing attestation whose hash is its own; rules deleted behind
//! corral's back show as drift; clients without a certificate, with one
//! from another CA or for a name that is not a peer are refused at the
//! handshake (the same client with the right certificate is the control);
//! a server named for another member is refused by the asking side; a
//! stopped or silent listener is "no answer" within the timeout; another
//! configuration on the member is `config_matches == false`.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{HeldNetns, Server};
use corral_sandbox_core::Config;
use corral_service::cluster::settings;
use corral_service::cluster::{Attester as _, RemoteAttester, config_sha256};
use corral_service::config::{ConfigSource, load};
use corral_service::host::plan_config;
use corral_service::{HostService, Target};
use serde_json::Value;

/// One member: its namespace, state directory, corral's enforcement
/// applied there (torn down on drop: the gateways are processes), its
/// cluster.toml and its corrald.
struct Member {
    name: &'static str,
    state: tempfile::TempDir,
    host: HostService,
    cluster_toml: PathBuf,
    server: Option<Server>,
    // Last: the namespace outlives the teardown that runs in it.
    ns: HeldNetns,
}

impl Member {
    fn apply(&self, config: &Path) {
        let loaded = load(&ConfigSource {
            config: Some(config.to_owned()),
            networks_conf: None,
        })
        .unwrap();
        self.host.apply(&plan_config(loaded).unwrap()).unwrap();
    }

    fn start(&mut self, config: &Path, absent_incus: &Path) {
        self.server = Some(Server::start_exact(&[
            "--socket".to_owned(),
            self.state.path().join("corrald.sock").display().to_string(),
            "--incus-socket".to_owned(),
            absent_incus.display().to_string(),
            "--netns".to_owned(),
            self.ns.path(),
            "--state-dir".to_owned(),
            self.state.path().display().to_string(),
            "--config".to_owned(),
            config.display().to_string(),
            "--cluster".to_owned(),
            self.cluster_toml.display().to_string(),
        ]));
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        drop(self.server.take());
        let _ = self.host.teardown();
    }
}

/// `openssl` runs (it has `version`, not `--version`), else a counted skip.
fn openssl() -> bool {
    let ran = Command::new("openssl").arg("version").output();
    if ran.is_ok_and(|o| o.status.success()) {
        return true;
    }
    corral_test_support::gate::skip(
        "needs `openssl` (Debian package openssl) to make certificates",
    );
    false
}

/// A loopback port free now (the kernel's choice, released at once).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn certs(dir: &Path, members: &[&str]) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/cluster-certs.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(dir)
        .args(members)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cluster-certs.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for m in members {
        let mode = std::fs::metadata(dir.join(format!("{m}.key")))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{m}.key");
    }
}

/// A cluster.toml for `member` with its certificate from `certs`.
fn cluster_toml(
    path: &Path,
    member: &str,
    port: u16,
    ca: &Path,
    certs: &Path,
    peers: &[(&str, u16)],
) {
    let mut text = format!(
        "member = \"{member}\"\nlisten = \"127.0.0.1:{port}\"\nca = \"{}\"\ncert = \"{}\"\nkey = \"{}\"\ninterval_secs = 4\n",
        ca.display(),
        certs.join(format!("{member}.pem")).display(),
        certs.join(format!("{member}.key")).display(),
    );
    for (name, port) in peers {
        text.push_str(&format!(
            "\n[[peers]]\nname = \"{name}\"\nurl = \"https://127.0.0.1:{port}\"\n"
        ));
    }
    std::fs::write(path, text).unwrap();
}

/// `curl` as an independent TLS client against `member`'s listener on
/// `port`: the exit code, the body and stderr.
fn curl(member: &str, port: u16, ca: &Path, cert: Option<&Path>, path: &str) -> (i32, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "5", "--cacert"])
        .arg(ca)
        .arg("--resolve")
        .arg(format!("{member}:{port}:127.0.0.1"));
    if let Some(cert) = cert {
        cmd.arg("--cert")
            .arg(cert)
            .arg("--key")
            .arg(cert.with_extension("key"));
    }
    let out = cmd
        .args(["-w", "\n%{http_code}"])
        .arg(format!("https://{member}:{port}{path}"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

fn attester(toml: &Path, expected: &Config) -> RemoteAttester {
    RemoteAttester::new(&settings::load(toml).unwrap(), expected).unwrap()
}

#[test]
fn members_attest_over_mutual_tls_and_strangers_are_refused_at_the_handshake() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("nft", "nftables")
        || !openssl()
        || !corral_test_support::gate::tool("curl", "curl")
    {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let absent_incus = dir.join("no-incus.sock");
    let (pki, other) = (dir.join("pki"), dir.join("other-ca"));
    certs(&pki, &["m1", "m2", "m9"]);
    // Another CA issuing a certificate for a real peer's name.
    certs(&other, &["m1"]);
    let ca = pki.join("ca.pem");
    let config = Config::builtin_default();
    let cfg = dir.join("corral.toml");
    std::fs::write(&cfg, config.to_toml_string()).unwrap();
    let local_sha = config_sha256(&config);

    let (p1, p2) = (free_port(), free_port());
    let mut members = Vec::new();
    for (name, port, peer, peer_port) in [("m1", p1, "m2", p2), ("m2", p2, "m1", p1)] {
        let ns = HeldNetns::new();
        let state = tempfile::tempdir().unwrap();
        let host = HostService::new(
            Target::open(Some(&ns.path())).unwrap(),
            state.path().to_owned(),
        );
        let toml = dir.join(format!("{name}.cluster.toml"));
        cluster_toml(&toml, name, port, &ca, &pki, &[(peer, peer_port)]);
        let mut m = Member {
            name,
            state,
            host,
            cluster_toml: toml,
            server: None,
            ns,
        };
        m.apply(&cfg);
        m.start(&cfg, &absent_incus);
        members.push(m);
    }
    let rt = common::incus::runtime();
    let from_m1 = attester(&members[0].cluster_toml, &config);
    assert_eq!(from_m1.timeout(), Duration::from_secs(2));

    // A peer with a CA-signed certificate: a passing attestation whose hash
    // is the asker's own.
    let started = Instant::now();
    let a = rt.block_on(from_m1.attest("m2")).unwrap();
    let first_ms = started.elapsed().as_millis();
    assert!(a.failures().is_empty(), "{:?}", a.failures());
    assert!(a.config_matches);
    assert_eq!(a.member, "m2");
    let doc = rt.block_on(from_m1.fetch("m2")).unwrap();
    assert_eq!(doc.config_sha256, local_sha);
    assert_eq!(doc.schema, "corral.attestation.v1");
    let started = Instant::now();
    rt.block_on(from_m1.attest("m2")).unwrap();
    let second_ms = started.elapsed().as_millis();
    // m2 asks m1, and m1 checks itself.
    let from_m2 = attester(&members[1].cluster_toml, &config);
    assert!(
        rt.block_on(from_m2.attest("m1"))
            .unwrap()
            .failures()
            .is_empty()
    );
    assert!(
        rt.block_on(from_m1.attest("m1"))
            .unwrap()
            .failures()
            .is_empty()
    );
    eprintln!("MEASURED: attestation m1 -> m2: {first_ms} ms (first), {second_ms} ms (second)");

    // An independent client (curl/OpenSSL) at m2's listener. Control: a
    // peer's certificate gets the document; the same client is refused
    // without one, with another CA's, or with a CA-signed certificate for a
    // name that is not m2's peer.
    let (code, text) = curl(
        "m2",
        p2,
        &ca,
        Some(&pki.join("m1.pem")),
        "/v1/cluster/attestation",
    );
    assert_eq!(code, 0, "{text}");
    assert!(text.ends_with("\n200"), "{text}");
    let body: Value = serde_json::from_str(text.rsplit_once('\n').unwrap().0).unwrap();
    assert_eq!(body["member"], "m2");
    assert_eq!(body["config_sha256"], local_sha.as_str());
    let (code, text) = curl("m2", p2, &ca, Some(&pki.join("m1.pem")), "/v1/health");
    assert!(code == 0 && text.ends_with("\n404"), "{text}");
    for (why, cert) in [
        ("no client certificate", None),
        ("another CA's certificate", Some(other.join("m1.pem"))),
        ("a certificate for m9, not a peer", Some(pki.join("m9.pem"))),
    ] {
        let (code, text) = curl("m2", p2, &ca, cert.as_deref(), "/v1/cluster/attestation");
        assert!(
            code != 0 && text.contains("alert") && !text.contains("corral.attestation"),
            "{why}: curl exit {code}: {text}"
        );
    }
    // The same refusal seen by corral's own client holding another CA's
    // certificate for m1.
    let stranger = dir.join("stranger.cluster.toml");
    cluster_toml(&stranger, "m1", free_port(), &ca, &other, &[("m2", p2)]);
    let e = rt
        .block_on(attester(&stranger, &config).attest("m2"))
        .unwrap_err();
    assert!(e.contains("TLS handshake refused"), "{e}");

    // A server whose certificate names another member: "m2" at m1's
    // listener. And a server the asker's CA did not sign.
    let wrong = dir.join("wrong.cluster.toml");
    cluster_toml(&wrong, "m1", free_port(), &ca, &pki, &[("m2", p1)]);
    let e = rt
        .block_on(attester(&wrong, &config).attest("m2"))
        .unwrap_err();
    assert!(
        e.contains("TLS handshake refused") && e.contains("wrong name"),
        "{e}"
    );
    let distrusting = dir.join("distrusting.cluster.toml");
    cluster_toml(
        &distrusting,
        "m1",
        free_port(),
        &other.join("ca.pem"),
        &other,
        &[("m2", p2)],
    );
    let e = rt
        .block_on(attester(&distrusting, &config).attest("m2"))
        .unwrap_err();
    assert!(e.contains("unknown CA"), "{e}");

    // corral's table deleted behind its back on m2: the next attestation
    // reports it. Re-applied: passing again.
    let out = members[1]
        .ns
        .exec("nft", &["delete", "table", "inet", "corral"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = rt.block_on(from_m1.attest("m2")).unwrap();
    assert!(a.config_matches);
    assert!(
        a.drift
            .iter()
            .any(|d| d.contains("table inet corral is missing")),
        "{:?}",
        a.drift
    );
    assert!(!a.failures().is_empty());
    members[1].apply(&cfg);
    assert!(
        rt.block_on(from_m1.attest("m2"))
            .unwrap()
            .failures()
            .is_empty()
    );

    // Another corral.toml applied on m2: in sync with itself, but not the
    // asker's configuration.
    let text = config.to_toml_string();
    let changed = text.replacen("\"203.0.113.10:443/tcp\"", "\"203.0.113.11:443/tcp\"", 1);
    assert_ne!(changed, text);
    let cfg2 = dir.join("corral-other.toml");
    std::fs::write(&cfg2, &changed).unwrap();
    members[1].apply(&cfg2);
    let doc = rt.block_on(from_m1.fetch("m2")).unwrap();
    assert_eq!(
        doc.config_sha256,
        config_sha256(&Config::from_toml_str(&changed, "x").unwrap())
    );
    let a = rt.block_on(from_m1.attest("m2")).unwrap();
    assert!(!a.config_matches && a.drift.is_empty(), "{a:?}");
    assert!(
        a.failures().join("; ").contains("different configuration"),
        "{:?}",
        a.failures()
    );

    // m2's corrald stopped: no answer, at once (the port refuses).
    members[1].server.take().unwrap().kill();
    let started = Instant::now();
    let e = rt.block_on(from_m1.attest("m2")).unwrap_err();
    let refused_ms = started.elapsed().as_millis();
    assert!(e.contains("no answer from m2"), "{e}");
    assert!(started.elapsed() < from_m1.timeout(), "{e}");
    // A listener that accepts the connection and never speaks: no answer
    // within the timeout, and not much later.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mute = dir.join("mute.cluster.toml");
    let silent_port = silent.local_addr().unwrap().port();
    cluster_toml(&mute, "m1", free_port(), &ca, &pki, &[("m2", silent_port)]);
    let mute = attester(&mute, &config);
    let started = Instant::now();
    let e = rt.block_on(mute.attest("m2")).unwrap_err();
    let silent_elapsed = started.elapsed();
    assert!(
        e.contains("no answer") && e.contains("within 2000 ms"),
        "{e}"
    );
    assert!(
        silent_elapsed >= mute.timeout()
            && silent_elapsed < mute.timeout() + Duration::from_secs(1),
        "{silent_elapsed:?}"
    );
    eprintln!(
        "MEASURED: stopped listener -> Err in {refused_ms} ms; silent listener -> Err in {} ms (timeout {} ms)",
        silent_elapsed.as_millis(),
        mute.timeout().as_millis()
    );
    drop(silent);
    assert_eq!(members[0].name, "m1");
}

#[test]
fn a_bad_cluster_toml_or_an_exposed_key_refuses_to_start() {
    if !openssl() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path();
    let pki = dir.join("pki");
    certs(&pki, &["m1"]);
    let toml = dir.join("cluster.toml");
    let run = |extra: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
            .arg("--socket")
            .arg(dir.join("d.sock"))
            .arg("--incus-socket")
            .arg(dir.join("no-incus.sock"))
            .arg("--state-dir")
            .arg(dir.join("state"))
            .arg("--cluster")
            .arg(&toml)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{extra}: {stderr}");
        assert!(
            !dir.join("state").exists(),
            "a refused start writes nothing"
        );
        stderr
    };
    cluster_toml(&toml, "m1", free_port(), &pki.join("ca.pem"), &pki, &[]);
    let good = std::fs::read_to_string(&toml).unwrap();
    std::fs::write(
        &toml,
        good.replace("interval_secs = 4", "interval_secs = 0"),
    )
    .unwrap();
    let e = run("interval 0");
    assert!(e.contains("cluster.toml:6: `interval_secs`"), "{e}");
    std::fs::write(&toml, &good).unwrap();
    std::fs::set_permissions(pki.join("m1.key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let e = run("key 0644");
    assert!(e.contains("m1.key") && e.contains("chmod 600"), "{e}");
}
