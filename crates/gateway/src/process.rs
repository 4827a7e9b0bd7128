//! Supervising one dnsmasq per bridge: write its configuration, start it
//! (replacing a running one), stop it, and say whether it runs.
//!
//! dnsmasq daemonises: the process we spawn exits once the daemon has bound
//! its sockets (its exit status reports start-up errors), and the daemon
//! writes its pid file. A pid is only ever trusted after checking that the
//! process runs the dnsmasq executable corral started, as root or dnsmasq's
//! unprivileged user, with *this* gateway's configuration file, so a stale
//! pid file that now names someone else's process (even one dressed up as
//! dnsmasq by a local user) is never signalled.
//!
//! Every file lives in the trusted state directory (`corral-state-files`):
//! written atomically, read without following symlinks.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corral_sandbox_core::BridgeName;
use corral_state_files::StateDir;
use serde::Serialize;

use super::error::GatewayError;
use super::exit_watch::ExitWatch;
use super::paths::{CONF_FILE, GATEWAY_DIR, GatewayPaths, PID_FILE};
use super::render::{RUN_AS_USER, render};
use super::spec::GatewaySpec;
use corral_egress::netns::Netns;

/// The dnsmasq binary used unless told otherwise (found on `PATH`).
pub const DEFAULT_DNSMASQ: &str = "dnsmasq";

/// How long a daemon gets to exit after SIGTERM before SIGKILL.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(3);

/// Whether a gateway's dnsmasq runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum GatewayStatus {
    /// Our dnsmasq runs with this pid.
    Running {
        /// Its pid.
        pid: u32,
    },
    /// No pid file: not started, or stopped cleanly.
    Stopped,
    /// No dnsmasq, by design: corral's own gateway serves the bridge
    /// (`dns = "corral"`: resolver, DHCP server and router advertisements
    /// in the process of corrald or `corral host watch`, from the record
    /// the apply wrote). Whether it answers is the start gate's to ask.
    Hosted,
    /// A pid file names a process that is gone or is not our dnsmasq.
    Stale {
        /// The pid in the file (0 when unreadable).
        pid: u32,
        /// What was found instead.
        reason: String,
    },
}

impl GatewayStatus {
    /// Whether the bridge is served: our dnsmasq runs, or corral's own
    /// gateway has it (whether that answers is the start gate's and the
    /// resolver probe's to ask).
    pub fn is_up(&self) -> bool {
        matches!(self, GatewayStatus::Running { .. } | GatewayStatus::Hosted)
    }
}

impl std::fmt::Display for GatewayStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GatewayStatus::Running { pid } => write!(f, "running (pid {pid})"),
            GatewayStatus::Stopped => f.write_str("stopped"),
            GatewayStatus::Hosted => f.write_str(
                "served by corral's gateway (corrald or `corral host watch`), no dnsmasq",
            ),
            GatewayStatus::Stale { pid, reason } => write!(f, "stale pid file ({pid}): {reason}"),
        }
    }
}

/// What [`Gateway::ensure`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    /// No daemon ran: one was started.
    Started,
    /// A daemon ran with another configuration (or had to restart): it
    /// was replaced.
    Restarted,
    /// Our daemon runs with exactly this configuration: left alone.
    Kept,
    /// No daemon: corral's own gateway serves the bridge (a dnsmasq that
    /// ran there was stopped).
    Hosted,
}

/// The gateway (dnsmasq) of one bridge.
#[derive(Debug, Clone)]
pub struct Gateway {
    bridge: BridgeName,
    paths: GatewayPaths,
    binary: PathBuf,
}

impl Gateway {
    /// The gateway of `bridge`, with its files under `state_dir`.
    pub fn new(state_dir: &Path, bridge: &BridgeName) -> Self {
        Self {
            bridge: bridge.clone(),
            paths: GatewayPaths::new(state_dir, bridge),
            binary: PathBuf::from(DEFAULT_DNSMASQ),
        }
    }

    /// Uses another dnsmasq binary.
    pub fn with_binary(mut self, binary: impl Into<PathBuf>) -> Self {
        self.binary = binary.into();
        self
    }

    /// Its state files.
    pub fn paths(&self) -> &GatewayPaths {
        &self.paths
    }

    /// The bridge it serves.
    pub fn bridge(&self) -> &BridgeName {
        &self.bridge
    }

    /// Asks our dnsmasq `pid` to re-read its reservations (SIGHUP).
    pub(crate) fn hangup(&self, pid: u32) -> Result<(), GatewayError> {
        // Re-check ownership right before signalling.
        if is_ours(pid, &self.paths.conf(), &self.binary).is_ok() {
            self.signal(pid, libc::SIGHUP)?;
        }
        Ok(())
    }

    fn signal(&self, pid: u32, sig: i32) -> Result<(), GatewayError> {
        signal(pid, sig).map_err(|source| GatewayError::Signal {
            bridge: self.bridge.to_string(),
            pid,
            signal: signal_name(sig),
            source,
        })
    }

    /// Writes the configuration for `spec` and (re)starts dnsmasq in the
    /// current network namespace. Returns the daemon's pid.
    pub fn start(&self, spec: &GatewaySpec) -> Result<u32, GatewayError> {
        self.start_with(spec, |mut cmd| cmd.spawn())
    }

    /// Like [`Gateway::start`], with the daemon inside `ns` (tests, drill).
    pub fn start_in(&self, spec: &GatewaySpec, ns: &Netns) -> Result<u32, GatewayError> {
        self.start_with(spec, |cmd| ns.spawn(cmd))
    }

    /// Makes the gateway run with `spec`, touching a running daemon only
    /// when it must: our dnsmasq already running with exactly this
    /// configuration file is kept (its leases, cache and sockets live on),
    /// unless `force` (its bridge was created anew, so the sockets it bound
    /// to the old one serve nothing). Otherwise as [`Gateway::start`].
    /// `ns` as in [`Gateway::start_in`].
    pub fn ensure(
        &self,
        spec: &GatewaySpec,
        force: bool,
        ns: Option<&Netns>,
    ) -> Result<(u32, Change), GatewayError> {
        let text = render(spec)?;
        let before = self.status();
        // A daemon an older corral started writes a log its own user owns:
        // it is restarted so that the log becomes corral's.
        if let (GatewayStatus::Running { pid }, false) = (&before, force)
            && self.current_config()?.as_deref() == Some(text.as_bytes())
            && super::files::all_private(&self.dir()?)
        {
            super::reservations::ensure_file(self)?;
            return Ok((*pid, Change::Kept));
        }
        let pid = match ns {
            Some(ns) => self.start_in(spec, ns)?,
            None => self.start(spec)?,
        };
        let change = match before {
            GatewayStatus::Running { .. } => Change::Restarted,
            _ => Change::Started,
        };
        Ok((pid, change))
    }

    /// The configuration file as written last (`None`: none yet).
    fn current_config(&self) -> Result<Option<Vec<u8>>, GatewayError> {
        match self.existing_dir()? {
            Some(dir) => Ok(dir.read(CONF_FILE)?),
            None => Ok(None),
        }
    }

    /// Starts dnsmasq again inside `ns` with the configuration and
    /// reservations recorded by the last start (what a supervisor does
    /// when the daemon died): nothing is rendered anew, so the daemon
    /// serves exactly what the last apply gave it. Replaces a running one.
    pub fn restart_recorded(&self, ns: &Netns) -> Result<u32, GatewayError> {
        if self.current_config()?.is_none() {
            return Err(GatewayError::NoRecord {
                bridge: self.bridge.to_string(),
                conf: self.paths.conf(),
            });
        }
        super::reservations::ensure_file(self)?;
        self.launch(|cmd| ns.spawn(cmd))
    }

    /// Our running dnsmasq with a watch on its exit; its status when it
    /// does not run. The pid is checked again after the pidfd is open, so
    /// the watch is on our daemon, never on a process that reused its pid.
    pub fn watch(&self) -> Result<ExitWatch, GatewayStatus> {
        let pid = match self.status() {
            GatewayStatus::Running { pid } => pid,
            other => return Err(other),
        };
        let watch = ExitWatch::open(pid).map_err(|e| GatewayStatus::Stale {
            pid,
            reason: format!("process {pid} cannot be watched: {e}"),
        })?;
        match is_ours(pid, &self.paths.conf(), &self.binary) {
            Ok(()) => Ok(watch),
            Err(reason) => Err(GatewayStatus::Stale { pid, reason }),
        }
    }

    fn start_with(
        &self,
        spec: &GatewaySpec,
        spawn: impl FnOnce(Command) -> io::Result<std::process::Child>,
    ) -> Result<u32, GatewayError> {
        self.write_config(spec)?;
        super::reservations::ensure_file(self)?;
        self.launch(spawn)
    }

    /// Replaces a running daemon by one started from the configuration
    /// file as it stands.
    fn launch(
        &self,
        spawn: impl FnOnce(Command) -> io::Result<std::process::Child>,
    ) -> Result<u32, GatewayError> {
        self.stop()?;
        let conf = self.paths.conf();
        let dir = self.dir()?;
        super::files::prepare_leases(&dir)?;
        // The log is corral's file, given to dnsmasq as its stderr: handed
        // a path, dnsmasq would make the file its unprivileged user's.
        let (log, mark) = super::files::open_log(&dir)?;
        let mut cmd = Command::new(&self.binary);
        // Paths go to dnsmasq as arguments of their own, never into the
        // configuration text, so no path can add a directive.
        cmd.arg(conf_arg(&conf))
            .arg(path_arg("--pid-file", &self.paths.pidfile()))
            .arg(path_arg("--dhcp-leasefile", &self.paths.leases()))
            .arg(path_arg("--dhcp-hostsfile", &self.paths.reservations()))
            .arg("--log-facility=-")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        let mut child = spawn(cmd).map_err(|source| GatewayError::Spawn {
            binary: self.binary.clone(),
            source,
        })?;
        let status = child.wait().map_err(|source| GatewayError::Spawn {
            binary: self.binary.clone(),
            source,
        })?;
        if !status.success() {
            return Err(GatewayError::Startup {
                bridge: self.bridge.to_string(),
                code: status.code().unwrap_or(-1),
                // A failed start says why on its stderr: the log.
                stderr: super::files::log_since(&dir, mark),
                conf,
            });
        }
        // The daemon writes its pid file before the launcher exits, but read
        // it with a short retry so a slow disk is not a failure.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match self.status() {
                GatewayStatus::Running { pid } => return Ok(pid),
                other if Instant::now() >= deadline => {
                    return Err(GatewayError::NotRunning {
                        bridge: self.bridge.to_string(),
                        reason: format!("its state is {other:?}"),
                        log: self.paths.log(),
                    });
                }
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// Writes the configuration atomically, mode 0600, in this gateway's
    /// directory (0700) of the trusted state directory. Not fsynced: it is
    /// rendered from the profile on every start, and after a crash no
    /// dnsmasq runs until an apply has written it again
    /// (`StateDir::write_regenerated`).
    pub fn write_config(&self, spec: &GatewaySpec) -> Result<(), GatewayError> {
        let text = render(spec)?;
        self.dir()?
            .write_regenerated(CONF_FILE, text.as_bytes(), corral_state_files::FILE_MODE)?;
        Ok(())
    }

    /// This gateway's directory, created if missing, checked.
    pub(crate) fn dir(&self) -> Result<StateDir, GatewayError> {
        Ok(StateDir::open(self.paths.state_dir())?
            .subdir(GATEWAY_DIR)?
            .subdir(self.paths.dir_name())?)
    }

    /// This gateway's directory if it exists, checked; creates nothing.
    fn existing_dir(&self) -> Result<Option<StateDir>, GatewayError> {
        let Some(state) = StateDir::open_existing(self.paths.state_dir())? else {
            return Ok(None);
        };
        let Some(root) = state.subdir_existing(GATEWAY_DIR)? else {
            return Ok(None);
        };
        Ok(root.subdir_existing(self.paths.dir_name())?)
    }

    /// Stops our dnsmasq if it runs (SIGTERM, then SIGKILL after a grace
    /// period) and removes a stale pid file. Leases and configuration stay.
    /// Returns the pid that was stopped, if any.
    pub fn stop(&self) -> Result<Option<u32>, GatewayError> {
        let stopped = match self.status() {
            GatewayStatus::Stopped | GatewayStatus::Hosted => return Ok(None),
            GatewayStatus::Stale { .. } => None,
            GatewayStatus::Running { pid } => {
                self.signal(pid, libc::SIGTERM)?;
                if !wait_gone(pid, STOP_GRACE) {
                    // Re-check ownership right before the harder signal.
                    if is_ours(pid, &self.paths.conf(), &self.binary).is_ok() {
                        self.signal(pid, libc::SIGKILL)?;
                    }
                    if !wait_gone(pid, STOP_GRACE) {
                        return Err(GatewayError::WontStop {
                            bridge: self.bridge.to_string(),
                            pid,
                        });
                    }
                }
                Some(pid)
            }
        };
        if let Some(dir) = self.existing_dir()? {
            dir.remove(PID_FILE)?;
        }
        Ok(stopped)
    }

    /// Stops the daemon and deletes every file of this gateway (teardown).
    pub fn purge(&self) -> Result<Option<u32>, GatewayError> {
        let stopped = self.stop()?;
        if let Some(state) = StateDir::open_existing(self.paths.state_dir())?
            && let Some(root) = state.subdir_existing(GATEWAY_DIR)?
        {
            root.remove_subdir(self.paths.dir_name())?;
        }
        Ok(stopped)
    }

    /// Whether corral's own gateway serves this bridge: the apply
    /// recorded corral's resolver for it.
    pub fn is_hosted(&self) -> bool {
        self.paths
            .dir()
            .join(crate::resolver::RESOLVER_FILE)
            .exists()
    }

    /// Whether our dnsmasq runs (or, with no dnsmasq, whether corral's
    /// own gateway has the bridge).
    pub fn status(&self) -> GatewayStatus {
        // dnsmasq hands its pid file to the user it drops to.
        let owners: Vec<u32> = user_uid(RUN_AS_USER).into_iter().collect();
        let read = self.existing_dir().and_then(|dir| {
            Ok(dir
                .map(|d| d.read_owned_by(PID_FILE, &owners))
                .transpose()?
                .flatten())
        });
        let text = match read {
            Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(None) if self.is_hosted() => return GatewayStatus::Hosted,
            Ok(None) => return GatewayStatus::Stopped,
            Err(e) => {
                return GatewayStatus::Stale {
                    pid: 0,
                    reason: format!("the pid file is unreadable: {e}"),
                };
            }
        };
        let pid = match text.trim().parse::<u32>() {
            Ok(pid) if pid > 0 => pid,
            _ => {
                return GatewayStatus::Stale {
                    pid: 0,
                    reason: format!("the pid file holds `{}`, not a pid", text.trim()),
                };
            }
        };
        match is_ours(pid, &self.paths.conf(), &self.binary) {
            Ok(()) => GatewayStatus::Running { pid },
            Err(reason) => GatewayStatus::Stale { pid, reason },
        }
    }
}

/// Every gateway with files under `state_dir`, with its status.
/// A state directory that fails the trust rule lists nothing (every
/// operation on it reports the problem).
pub(crate) fn list(state_dir: &Path) -> Vec<(BridgeName, GatewayStatus)> {
    let names = crate::paths::open_gateway_root(state_dir)
        .and_then(|d| d.names().ok())
        .unwrap_or_default();
    let mut out: Vec<(BridgeName, GatewayStatus)> = names
        .into_iter()
        .filter_map(|n| BridgeName::new(n).ok())
        .map(|b| {
            let status = Gateway::new(state_dir, &b).status();
            (b, status)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn path_arg(option: &str, path: &Path) -> std::ffi::OsString {
    let mut arg = std::ffi::OsString::from(format!("{option}="));
    arg.push(path.as_os_str());
    arg
}

fn conf_arg(conf: &Path) -> String {
    format!("--conf-file={}", conf.display())
}

/// Ok when `pid` is a live process of the dnsmasq executable `binary`,
/// running as root or dnsmasq's unprivileged user, started with
/// `--conf-file=<conf>`. The command line alone is not enough: any local
/// user can start a process whose arguments look like that.
pub(crate) fn is_ours(pid: u32, conf: &Path, binary: &Path) -> Result<(), String> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    let cmdline = match fs::read(proc_dir.join("cmdline")) {
        Ok(c) => c,
        Err(_) => return Err(format!("process {pid} is gone")),
    };
    if is_zombie(pid) {
        return Err(format!("process {pid} has exited"));
    }
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let is_dnsmasq = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .is_some_and(|n| n == "dnsmasq");
    let wanted = conf_arg(conf);
    if !is_dnsmasq || !args.contains(&wanted) {
        return Err(format!(
            "process {pid} is `{}`, not dnsmasq with {wanted}",
            args.join(" ").escape_debug()
        ));
    }
    let exe = fs::read_link(proc_dir.join("exe"))
        .map_err(|e| format!("the executable of process {pid} cannot be read: {e}"))?;
    // An upgraded package leaves the running daemon on a deleted inode.
    let exe_text = exe.to_string_lossy();
    let exe = PathBuf::from(exe_text.strip_suffix(" (deleted)").unwrap_or(&exe_text));
    match executable(binary) {
        Some(want) if want == exe => {}
        want => {
            return Err(format!(
                "process {pid} runs {}, not the dnsmasq executable {}",
                exe.display(),
                want.map_or_else(|| binary.display().to_string(), |w| w.display().to_string())
            ));
        }
    }
    let uids = process_uids(pid).ok_or_else(|| format!("process {pid} has no readable uids"))?;
    let allowed = [Some(0), user_uid(RUN_AS_USER)];
    if let Some(uid) = uids.iter().find(|u| !allowed.contains(&Some(**u))) {
        return Err(format!(
            "process {pid} runs as uid {uid}, not as root or {RUN_AS_USER}"
        ));
    }
    Ok(())
}

/// `binary` as the kernel names a process's executable: searched on
/// `PATH` when it is a bare name, symlinks resolved.
pub(crate) fn executable(binary: &Path) -> Option<PathBuf> {
    let found = if binary.components().count() > 1 {
        Some(binary.to_owned())
    } else {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join(binary))
                .find(|p| p.is_file())
        })
    };
    found.and_then(|p| fs::canonicalize(p).ok())
}

/// The real, effective, saved and filesystem uids of `pid`.
fn process_uids(pid: u32) -> Option<Vec<u32>> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().map(|u| u.parse().ok()).collect()
}

/// The uid of the local user `name`, from `/etc/passwd`.
pub(crate) fn user_uid(name: &str) -> Option<u32> {
    let passwd = fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next() == Some(name))
            .then(|| fields.nth(1).and_then(|u| u.parse().ok()))
            .flatten()
    })
}

/// A daemon we did not spawn is reaped by init; until then it is a zombie.
fn is_zombie(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // The state follows the parenthesised command name.
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next().map(|st| st == "Z"))
        })
        .unwrap_or(false)
}

pub(crate) fn wait_gone(pid: u32, grace: Duration) -> bool {
    let deadline = Instant::now() + grace;
    loop {
        if !Path::new(&format!("/proc/{pid}")).exists() || is_zombie(pid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends `sig` to `pid`. A process already gone (ESRCH) is what the caller
/// wanted anyway; any other failure (EPERM: not ours to signal) is an error,
/// since the daemon then keeps running as it was.
pub(crate) fn signal(pid: u32, sig: i32) -> io::Result<()> {
    let Ok(raw) = i32::try_from(pid) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("pid {pid} is out of range"),
        ));
    };
    // SAFETY: kill(2) takes plain integers; `pid` was just verified to be
    // our dnsmasq (a positive pid, never 0 or -1, which would broadcast).
    let rc = unsafe { libc::kill(raw, sig) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        return Ok(());
    }
    Err(e)
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGTERM => "SIGTERM",
        libc::SIGKILL => "SIGKILL",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process already gone is fine (ESRCH); any other failure of
    /// kill(2) is reported. Control: the same call on a live process
    /// with a valid signal succeeds.
    #[test]
    fn kill_failures_other_than_gone_are_errors() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id();
        assert!(
            signal(pid, 0).is_ok(),
            "control: a live child takes signal 0"
        );
        let invalid = signal(pid, 9999).unwrap_err();
        assert_eq!(invalid.raw_os_error(), Some(libc::EINVAL), "{invalid}");
        signal(pid, libc::SIGKILL).unwrap();
        child.wait().unwrap();
        assert!(
            signal(pid, libc::SIGTERM).is_ok(),
            "a reaped child is ESRCH: fine"
        );
        assert!(signal(u32::MAX, libc::SIGTERM).is_err());
    }

    fn gateway(dir: &Path) -> Gateway {
        Gateway::new(dir, &BridgeName::new("cb-test").unwrap())
    }

    #[test]
    fn status_without_pidfile_is_stopped_and_stop_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let gw = gateway(dir.path());
        assert_eq!(gw.status(), GatewayStatus::Stopped);
        assert_eq!(gw.stop().unwrap(), None);
        assert!(list(dir.path()).is_empty());
    }

    #[test]
    fn a_pidfile_naming_another_process_is_stale_and_never_signalled() {
        let dir = tempfile::tempdir().unwrap();
        let gw = gateway(dir.path());
        fs::create_dir_all(gw.paths().dir()).unwrap();
        // Our own test process is alive but is not dnsmasq.
        fs::write(gw.paths().pidfile(), format!("{}\n", std::process::id())).unwrap();
        match gw.status() {
            GatewayStatus::Stale { pid, reason } => {
                assert_eq!(pid, std::process::id());
                assert!(reason.contains("not dnsmasq"), "{reason}");
            }
            other => panic!("expected stale, got {other:?}"),
        }
        // Stopping removes the stale file and leaves the process alone.
        assert_eq!(gw.stop().unwrap(), None);
        assert!(!gw.paths().pidfile().exists());
        assert_eq!(gw.status(), GatewayStatus::Stopped);
        assert_eq!(gw.status().to_string(), "stopped");
        let listed = list(dir.path());
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].1, GatewayStatus::Stopped);
    }

    #[test]
    fn garbage_and_dead_pids_are_stale() {
        let dir = tempfile::tempdir().unwrap();
        let gw = gateway(dir.path());
        fs::create_dir_all(gw.paths().dir()).unwrap();
        fs::write(gw.paths().pidfile(), "not-a-pid").unwrap();
        assert!(matches!(gw.status(), GatewayStatus::Stale { pid: 0, .. }));
        // pid_max is at most 2^22, so this pid cannot exist.
        fs::write(gw.paths().pidfile(), "99999999").unwrap();
        match gw.status() {
            GatewayStatus::Stale { reason, .. } => assert!(reason.contains("gone"), "{reason}"),
            other => panic!("expected stale, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_binary_is_reported_with_the_package() {
        let dir = tempfile::tempdir().unwrap();
        let gw = gateway(dir.path()).with_binary("/nonexistent/dnsmasq");
        let p =
            crate::spec::tests::profile(corral_sandbox_core::EgressMode::None, &[], "10.99.1.0/24");
        let spec = GatewaySpec::from_profile(&p, &[], crate::spec::DnsTiming::default()).unwrap();
        let err = gw.start(&spec).unwrap_err();
        assert!(err.to_string().contains("dnsmasq-base"), "{err}");
        // The configuration was written before the spawn failed.
        assert!(gw.paths().conf().exists());
    }
}
