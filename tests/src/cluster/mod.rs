//! A real two-member Incus cluster on this machine, for tests of corral
//! across members. Each member is its own `incusd` with its own directory,
//! in its own named network namespace; the two namespaces are joined by a
//! veth pair (the cluster link). Member `m2` has a destination namespace
//! behind it, so a sandbox placed there can send real packets.
//!
//! ```text
//!  ccl-m1 (incusd m1)            ccl-m2 (incusd m2)              ccl-d
//!  ccl1 10.231.0.1/24 ── link ── ccl2 10.231.0.2/24
//!                                ccld0 203.0.113.253/30 ── ccld1 .254
//!                                                  lo: 203.0.113.10 (allowed)
//!                                                      198.51.100.7 (unlisted)
//! ```
//!
//! The host's own Incus daemon is never touched. Names are fixed (so a
//! killed run's leftovers can be found): [`ClusterLab::new`] first sweeps
//! them (daemons shut down, namespaces and directories removed), and
//! [`Drop`] does the same, even while a test unwinds. The `incus` client
//! runs inside a member's namespace: a member's address is only reachable
//! there.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use corral_drill::lab::{Listeners, Transport};
use corral_egress::netns::Netns;

mod corral;
pub use corral::{Enforced, LabAttester, MemberCorral};

/// The destination the built-in `allowlist` profile allows (its first entry).
pub const ALLOWED: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 10)), 443);
/// A destination on no allowlist, behind the same member.
pub const UNLISTED: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)), 443);

/// The destination namespace.
const DEST_NS: &str = "ccl-d";
/// How long a member daemon may take to answer.
const READY: Duration = Duration::from_secs(60);

/// Why the lab could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClusterLabError {
    /// A command failed.
    #[error("cluster lab: `{command}` failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Exit status and standard error.
        detail: String,
    },
    /// Spawning or I/O failed.
    #[error("cluster lab: {0}")]
    Io(#[from] std::io::Error),
    /// corral's configuration, apply or backend failed for a member.
    #[error("cluster lab: {0}")]
    Corral(String),
}

/// One cluster member.
#[derive(Debug)]
pub struct Member {
    /// Its Incus name (`m1`), what `target=` takes.
    pub name: String,
    /// Its network namespace (`ccl-m1`): where its containers' NICs are,
    /// where corral applies for it.
    pub netns: String,
    /// Its `INCUS_DIR`.
    pub dir: PathBuf,
    /// Its cluster address.
    pub address: Ipv4Addr,
    /// Its cluster-link interface (inside [`Self::netns`]).
    pub link: String,
    daemon: Option<Child>,
}

impl Member {
    fn new(i: u8) -> Self {
        Self {
            name: format!("m{i}"),
            netns: format!("ccl-m{i}"),
            dir: PathBuf::from(format!("/var/lib/incus-ccl-m{i}")),
            address: Ipv4Addr::new(10, 231, 0, i),
            link: format!("ccl{i}"),
            daemon: None,
        }
    }

    /// The daemon's unix socket: from the root namespace it reaches this
    /// member's daemon, and through it the whole cluster.
    pub fn socket(&self) -> PathBuf {
        self.dir.join("unix.socket")
    }

    /// `incus ARGS` against this member, run inside its namespace.
    pub fn incus(&self, args: &[&str]) -> Result<String, ClusterLabError> {
        self.incus_with_input(args, None)
    }

    fn incus_with_input(
        &self,
        args: &[&str],
        input: Option<&str>,
    ) -> Result<String, ClusterLabError> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.netns, "incus"])
            .args(args)
            .env("INCUS_DIR", &self.dir);
        run(cmd, input)
    }
}

/// Two members, their link, the destination behind `m2`, and the guard
/// that removes all of it.
#[derive(Debug)]
pub struct ClusterLab {
    /// `m1` and `m2`.
    pub members: Vec<Member>,
    _listeners: Option<Listeners>,
    /// Held for the lab's life: the names are fixed, so two labs (two
    /// test binaries, a bench) would sweep each other away.
    _lock: std::fs::File,
}

/// The lock that serialises labs across processes.
const LOCK: &str = "/run/lock/corral-tests-cluster-lab.lock";

impl ClusterLab {
    /// Sweep leftovers, then build the namespaces, start both daemons, form
    /// the cluster on `m1` and join `m2` with a token.
    pub fn new() -> Result<Self, ClusterLabError> {
        let lock = std::fs::File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(LOCK)?;
        lock.lock()?;
        sweep();
        let mut lab = Self {
            members: vec![Member::new(1), Member::new(2)],
            _listeners: None,
            _lock: lock,
        };
        // From here on `lab` is dropped (and cleans up) on any error.
        for m in &lab.members {
            sh(&["ip", "netns", "add", &m.netns])?;
            sh(&["ip", "-n", &m.netns, "link", "set", "lo", "up"])?;
            std::fs::create_dir_all(&m.dir)?;
        }
        let (a, b) = (&lab.members[0], &lab.members[1]);
        sh(&[
            "ip", "link", "add", &a.link, "netns", &a.netns, "type", "veth", "peer", "name",
            &b.link, "netns", &b.netns,
        ])?;
        for m in &lab.members {
            sh(&[
                "ip",
                "-n",
                &m.netns,
                "addr",
                "add",
                &format!("{}/24", m.address),
                "dev",
                &m.link,
            ])?;
            sh(&["ip", "-n", &m.netns, "link", "set", &m.link, "up"])?;
        }
        for m in &mut lab.members {
            let log = std::fs::File::create(m.dir.join("lab-incusd.log"))?;
            // Not `ip netns exec`: its fresh /sys hides the cgroup
            // mounts, and LXC then cannot set a container's limits. A
            // private mount namespace gets the member's sysfs (so Incus
            // sees the member's bridges) with the cgroup tree moved back
            // beneath it.
            let stash = format!("/run/ccl-cg-{}", m.name);
            let script = format!(
                "mkdir -p {stash} && mount --rbind /sys/fs/cgroup {stash} && mount -t sysfs sysfs /sys && mount --move {stash} /sys/fs/cgroup && exec /usr/libexec/incus/incusd --group root"
            );
            let child = Command::new("nsenter")
                .arg(format!("--net=/run/netns/{}", m.netns))
                .args([
                    "unshare",
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-c",
                    &script,
                ])
                .env("INCUS_DIR", &m.dir)
                .stdin(Stdio::null())
                .stdout(log.try_clone()?)
                .stderr(log)
                .spawn()?;
            std::fs::write(m.dir.join("lab.pid"), child.id().to_string())?;
            m.daemon = Some(child);
        }
        for m in &lab.members {
            m.incus(&[
                "admin",
                "waitready",
                "--timeout",
                &READY.as_secs().to_string(),
            ])?;
        }
        let (a, b) = (&lab.members[0], &lab.members[1]);
        a.incus_with_input(
            &["admin", "init", "--preseed"],
            Some(&format!(
                "config:\n  core.https_address: {}:8443\nstorage_pools:\n- name: default\n  driver: dir\ncluster:\n  server_name: {}\n  enabled: true\n",
                a.address, a.name
            )),
        )?;
        let token = a.incus(&["cluster", "add", &b.name, "--quiet"])?;
        b.incus_with_input(
            &["admin", "init", "--preseed"],
            Some(&format!(
                "cluster:\n  enabled: true\n  server_name: {}\n  server_address: {}:8443\n  cluster_token: {}\n  member_config:\n  - entity: storage-pool\n    name: default\n    key: source\n    value: \"\"\n",
                b.name,
                b.address,
                token.trim()
            )),
        )?;
        lab.build_destination()?;
        Ok(lab)
    }

    /// The member named `name` (`m1`, `m2`).
    pub fn member(&self, name: &str) -> &Member {
        match self.members.iter().find(|m| m.name == name) {
            Some(m) => m,
            None => panic!("the lab has members m1 and m2, not {name}"),
        }
    }

    /// Copy image `alias` of the host daemon's project `from_project` into
    /// the cluster's project `to_project` under the same alias (an image
    /// imported once is usable on every member).
    pub fn import_image(
        &self,
        alias: &str,
        from_project: &str,
        to_project: &str,
    ) -> Result<(), ClusterLabError> {
        let dir = tempfile::tempdir()?;
        let base = dir.path().join("image");
        let base_s = base.display().to_string();
        sh(&[
            "incus",
            "image",
            "export",
            alias,
            &base_s,
            "--project",
            from_project,
        ])?;
        let file = std::fs::read_dir(dir.path())?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .find(|p| p.is_file())
            .ok_or_else(|| ClusterLabError::Command {
                command: "incus image export".into(),
                detail: "wrote no file".into(),
            })?;
        let file_s = file.display().to_string();
        self.members[0].incus(&[
            "image",
            "import",
            &file_s,
            "--alias",
            alias,
            "--project",
            to_project,
        ])?;
        Ok(())
    }

    /// Take member `name`'s cluster link down (`up: false`) or bring it back.
    pub fn set_link(&self, name: &str, up: bool) -> Result<(), ClusterLabError> {
        let m = self.member(name);
        sh(&[
            "ip",
            "-n",
            &m.netns,
            "link",
            "set",
            &m.link,
            if up { "up" } else { "down" },
        ])?;
        Ok(())
    }

    /// `ccl-d` behind `m2`: listeners on [`ALLOWED`] and [`UNLISTED`],
    /// routes both ways (m2 forwards once corral's sysctls are applied).
    fn build_destination(&mut self) -> Result<(), ClusterLabError> {
        let m2 = self.members[1].netns.clone();
        sh(&["ip", "netns", "add", DEST_NS])?;
        sh(&["ip", "-n", DEST_NS, "link", "set", "lo", "up"])?;
        sh(&[
            "ip", "link", "add", "ccld0", "netns", &m2, "type", "veth", "peer", "name", "ccld1",
            "netns", DEST_NS,
        ])?;
        sh(&[
            "ip",
            "-n",
            &m2,
            "addr",
            "add",
            "203.0.113.253/30",
            "dev",
            "ccld0",
        ])?;
        sh(&["ip", "-n", &m2, "link", "set", "ccld0", "up"])?;
        sh(&[
            "ip",
            "-n",
            DEST_NS,
            "addr",
            "add",
            "203.0.113.254/30",
            "dev",
            "ccld1",
        ])?;
        sh(&["ip", "-n", DEST_NS, "link", "set", "ccld1", "up"])?;
        for to in [ALLOWED, UNLISTED] {
            sh(&[
                "ip",
                "-n",
                DEST_NS,
                "addr",
                "add",
                &format!("{}/32", to.ip()),
                "dev",
                "lo",
            ])?;
        }
        sh(&[
            "ip",
            "-n",
            DEST_NS,
            "route",
            "add",
            "default",
            "via",
            "203.0.113.253",
        ])?;
        sh(&[
            "ip",
            "-n",
            &m2,
            "route",
            "add",
            "198.51.100.0/24",
            "via",
            "203.0.113.254",
        ])?;
        sh(&[
            "ip",
            "-n",
            &m2,
            "route",
            "add",
            "203.0.113.0/28",
            "via",
            "203.0.113.254",
        ])?;
        let ns = Netns::open(DEST_NS)?;
        let listeners = Listeners::start(&ns)?;
        for to in [ALLOWED, UNLISTED] {
            listeners.add(to, Transport::Tcp)?;
        }
        self._listeners = Some(listeners);
        Ok(())
    }
}

impl Drop for ClusterLab {
    fn drop(&mut self) {
        self._listeners = None;
        // Stopped first, by force: the busybox test image ignores the
        // clean shutdown request, and `incus admin shutdown` would wait
        // out its timeout for each.
        for m in &self.members {
            let _ = m.incus(&["stop", "--all", "--force", "--project", "corral"]);
        }
        for m in &mut self.members {
            shutdown(&m.dir);
            if let Some(mut child) = m.daemon.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        remove_all();
    }
}

/// Leftovers of an earlier run (killed before its guard ran) are removed.
fn sweep() {
    for i in [1u8, 2] {
        let m = Member::new(i);
        if m.socket().exists() {
            shutdown(&m.dir);
        }
        // The daemon the earlier run started, by the pid it recorded.
        if let Ok(pid) = std::fs::read_to_string(m.dir.join("lab.pid"))
            && let Ok(pid) = pid.trim().parse::<i32>()
            && std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.contains("incusd"))
        {
            kill(pid);
        }
    }
    remove_all();
}

/// SIGKILL for the daemon pid this lab recorded.
fn kill(pid: i32) {
    let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
}

/// `incus admin shutdown` for the daemon in `dir`, bounded.
fn shutdown(dir: &Path) {
    let _ = Command::new("timeout")
        .args(["60", "incus", "admin", "shutdown", "--timeout", "30"])
        .env("INCUS_DIR", dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn remove_all() {
    for ns in ["ccl-m1", "ccl-m2", DEST_NS] {
        let _ = Command::new("ip")
            .args(["netns", "del", ns])
            .stderr(Stdio::null())
            .status();
    }
    for i in [1u8, 2] {
        let m = Member::new(i);
        let _ = std::fs::remove_dir(format!("/run/ccl-cg-{}", m.name));
        let dir = m.dir;
        if dir.exists() {
            // Anything the daemon left mounted beneath its directory first.
            let _ = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "grep -o ' {0}[^ ]*' /proc/mounts | sort -r | xargs -r -n1 umount -l",
                    dir.display()
                ))
                .status();
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                eprintln!("cleanup: cannot remove {}: {e}", dir.display());
            }
        }
    }
}

fn sh(args: &[&str]) -> Result<String, ClusterLabError> {
    let mut cmd = Command::new(args[0]);
    cmd.args(&args[1..]);
    run(cmd, None)
}

fn run(mut cmd: Command, input: Option<&str>) -> Result<String, ClusterLabError> {
    use std::io::Write as _;
    let line = format!("{cmd:?}");
    let started = Instant::now();
    cmd.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    if !out.status.success() {
        return Err(ClusterLabError::Command {
            command: line,
            detail: format!(
                "{} after {} ms: {}",
                out.status,
                started.elapsed().as_millis(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
