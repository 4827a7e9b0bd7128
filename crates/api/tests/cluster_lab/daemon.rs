//! The cluster lab's corrald (`cluster_lab.rs`): one `corrald --cluster`
//! per lab member, started in the member's namespace, and what the test
//! reads and does through it.

use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use corral_tests::cluster::Member;
use serde_json::Value;

use crate::common::{Server, request};

/// The attestation interval every member's cluster.toml sets: the
/// controllers tick every half of it.
pub const INTERVAL: Duration = Duration::from_secs(2);
/// One controller tick.
pub const TICK: Duration = Duration::from_secs(1);
/// The longest Incus may take to change its view of a member.
pub const INCUS: Duration = Duration::from_secs(90);
/// The cluster listeners' port, on each member's lab address.
pub const PORT: u16 = 7443;

/// `openssl` runs (it has `version`, not `--version`), else a counted skip.
pub fn openssl() -> bool {
    let ran = Command::new("openssl").arg("version").output();
    if ran.is_ok_and(|o| o.status.success()) {
        return true;
    }
    corral_test_support::gate::skip(
        "needs `openssl` (Debian package openssl) to make certificates",
    );
    false
}

/// One member's corrald: started in the member's namespace, answering on a
/// unix socket in its state directory.
pub struct Daemon {
    /// The process (killed on drop).
    pub server: Server,
    /// Its stderr.
    pub log: PathBuf,
    socket: PathBuf,
}

impl Daemon {
    pub fn start(m: &Member, state: &Path, config: &Path, cluster: &Path) -> Self {
        let socket = state.join("corrald.sock");
        let args: Vec<String> = [
            "--socket".to_owned(),
            socket.display().to_string(),
            "--incus-socket".to_owned(),
            m.socket().display().to_string(),
            "--netns".to_owned(),
            m.netns.clone(),
            "--state-dir".to_owned(),
            state.display().to_string(),
            "--config".to_owned(),
            config.display().to_string(),
            "--cluster".to_owned(),
            cluster.display().to_string(),
        ]
        .into();
        // In the member's namespace: its listener binds the member's
        // cluster address, and reaches the peer only over the lab's link.
        let wrapper = [
            "nsenter".to_owned(),
            format!("--net=/run/netns/{}", m.netns),
        ];
        let log = state.with_extension("corrald.log");
        let server =
            Server::start_under(&wrapper, &args, &[("RUST_LOG", "info")], Some(log.clone()));
        Self {
            server,
            log,
            socket,
        }
    }

    pub fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        request(
            UnixStream::connect(&self.socket).unwrap(),
            method,
            path,
            body,
        )
    }

    /// `member`'s row of `GET /v1/cluster`.
    pub fn row(&self, member: &str) -> Value {
        let (s, doc) = self.call("GET", "/v1/cluster", None);
        assert_eq!(s, 200, "{doc}");
        doc["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["member"] == member)
            .cloned()
            .unwrap_or_else(|| panic!("no {member} in {doc}"))
    }

    /// Poll `GET /v1/cluster` every 100 ms until `member`'s row is `what`.
    pub fn wait_row(
        &self,
        member: &str,
        what: &str,
        within: Duration,
        done: impl Fn(&Value) -> bool,
    ) {
        let started = Instant::now();
        loop {
            let row = self.row(member);
            if done(&row) {
                return;
            }
            assert!(
                started.elapsed() < within,
                "{member} not {what} within {within:?}: {row}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Poll `GET /v1/cluster` every 50 ms until `member` stands as
    /// `standing`; the time it took.
    pub fn wait_standing(&self, member: &str, standing: &str, within: Duration) -> Duration {
        let started = Instant::now();
        loop {
            let row = self.row(member);
            if row["standing"] == standing {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < within,
                "{member} not {standing} within {within:?}: {row}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The event log's member events about `member` after event `after`,
    /// oldest first.
    pub fn member_events(&self, member: &str, after: i64) -> Vec<Value> {
        let (s, doc) = self.call(
            "GET",
            &format!("/v1/events?after={after}&limit=10000"),
            None,
        );
        assert_eq!(s, 200, "{doc}");
        doc["events"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["member"] == member)
            .cloned()
            .collect()
    }
}

pub fn certs(dir: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/cluster-certs.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(dir)
        .args(["m1", "m2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cluster-certs.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

pub fn cluster_toml(path: &Path, me: &Member, peer: &Member, pki: &Path) {
    std::fs::write(
        path,
        format!(
            "member = \"{n}\"\nlisten = \"{a}:{PORT}\"\nca = \"{ca}\"\ncert = \"{pki}/{n}.pem\"\nkey = \"{pki}/{n}.key\"\ninterval_secs = {i}\n\n[[peers]]\nname = \"{p}\"\nurl = \"https://{pa}:{PORT}\"\n",
            n = me.name,
            a = me.address,
            ca = pki.join("ca.pem").display(),
            pki = pki.display(),
            i = INTERVAL.as_secs(),
            p = peer.name,
            pa = peer.address,
        ),
    )
    .unwrap();
}

pub fn nft_delete_corral(netns: &str) {
    let out = Command::new("ip")
        .args([
            "netns", "exec", netns, "nft", "delete", "table", "inet", "corral",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// How long a sandbox's re-verification may take (a canary probes with
/// timeouts of seconds).
pub const CANARY: Duration = Duration::from_secs(60);

/// Poll `done` every 100 ms for at most `within`.
pub fn wait_until(what: &str, within: Duration, done: impl Fn() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < within, "not {what} within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
