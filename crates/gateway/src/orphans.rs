//! Gateways nobody has a record of: a dnsmasq corral started for a bridge
//! whose state directory is gone (deleted, or a teardown run with another
//! `--state-dir`). Teardown removes the bridges it finds stamped in a
//! namespace whatever the state directory says, so it must also stop the
//! gateways serving them, or they keep running — bound to nothing, but
//! holding their leases and a root process — with nobody saying so.
//!
//! A process counts as such a gateway only when it passes the same check a
//! recorded one does (the dnsmasq executable, root or dnsmasq's user, its
//! command line naming a corral gateway configuration for one of the
//! bridges: `…/gateway/<bridge>/dnsmasq.conf`) and it lives in the
//! namespace being torn down.

use std::fs;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use corral_egress::netns::Netns;

use super::paths::{CONF_FILE, GATEWAY_DIR};
use super::process::{STOP_GRACE, is_ours, signal, wait_gone};

/// A gateway found running for a bridge, with no record needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoundGateway {
    /// Its pid.
    pub pid: u32,
    /// The bridge its configuration serves.
    pub bridge: String,
    /// Its configuration file.
    pub conf: PathBuf,
}

impl std::fmt::Display for FoundGateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dnsmasq pid {} for bridge {} ({})",
            self.pid,
            self.bridge,
            self.conf.display()
        )
    }
}

/// Every corral gateway running in `ns` for one of `bridges`, found from
/// the processes themselves (see the module docs). `binary` is the dnsmasq
/// executable corral starts.
pub fn find_gateways(ns: &Netns, bridges: &[String], binary: &Path) -> Vec<FoundGateway> {
    let Some(want) = namespace_id(ns) else {
        return Vec::new();
    };
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Some((bridge, conf)) = gateway_conf(pid, bridges) else {
            continue;
        };
        let same_ns =
            fs::metadata(format!("/proc/{pid}/ns/net")).is_ok_and(|m| (m.dev(), m.ino()) == want);
        if same_ns && is_ours(pid, &conf, binary).is_ok() {
            out.push(FoundGateway { pid, bridge, conf });
        }
    }
    out.sort_by_key(|g| g.pid);
    out
}

/// Stops every gateway [`find_gateways`] finds: SIGTERM, then SIGKILL after
/// the grace period once it is checked again. Returns those stopped and,
/// for those that would not stop, why.
pub fn stop_gateways(
    ns: &Netns,
    bridges: &[String],
    binary: &Path,
) -> (Vec<FoundGateway>, Vec<String>) {
    let mut stopped = Vec::new();
    let mut errors = Vec::new();
    for g in find_gateways(ns, bridges, binary) {
        if let Err(e) = signal(g.pid, libc::SIGTERM) {
            errors.push(format!("{g}: SIGTERM failed: {e}"));
            continue;
        }
        if !wait_gone(g.pid, STOP_GRACE) {
            if is_ours(g.pid, &g.conf, binary).is_ok()
                && let Err(e) = signal(g.pid, libc::SIGKILL)
            {
                errors.push(format!("{g}: SIGKILL failed: {e}"));
                continue;
            }
            if !wait_gone(g.pid, STOP_GRACE) {
                errors.push(format!("{g} would not stop"));
                continue;
            }
        }
        stopped.push(g);
    }
    (stopped, errors)
}

/// The bridge and configuration of `pid` when its command line names a
/// corral gateway configuration for one of `bridges`.
fn gateway_conf(pid: u32, bridges: &[String]) -> Option<(String, PathBuf)> {
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut args = cmdline.split(|b| *b == 0).filter(|a| !a.is_empty());
    let first = Path::new(std::str::from_utf8(args.next()?).ok()?);
    if first.file_name()? != "dnsmasq" {
        return None;
    }
    args.filter_map(|a| std::str::from_utf8(a).ok())
        .filter_map(|a| a.strip_prefix("--conf-file="))
        .map(PathBuf::from)
        .find_map(|conf| {
            let bridge = bridge_of(&conf)?;
            bridges.contains(&bridge).then_some((bridge, conf))
        })
}

/// `<bridge>` of `…/gateway/<bridge>/dnsmasq.conf`.
fn bridge_of(conf: &Path) -> Option<String> {
    if conf.file_name()? != CONF_FILE {
        return None;
    }
    let dir = conf.parent()?;
    if dir.parent()?.file_name()? != GATEWAY_DIR {
        return None;
    }
    Some(dir.file_name()?.to_str()?.to_owned())
}

fn namespace_id(ns: &Netns) -> Option<(u64, u64)> {
    let file = fs::File::from(ns.fd().as_fd().try_clone_to_owned().ok()?);
    let m = file.metadata().ok()?;
    Some((m.dev(), m.ino()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_gateway_configuration_path_names_a_bridge() {
        let b = |p: &str| bridge_of(Path::new(p));
        assert_eq!(
            b("/var/lib/corral/gateway/corral-a/dnsmasq.conf").as_deref(),
            Some("corral-a")
        );
        assert_eq!(b("/var/lib/corral/gateway/corral-a/other.conf"), None);
        assert_eq!(b("/var/lib/corral/elsewhere/corral-a/dnsmasq.conf"), None);
        assert_eq!(b("dnsmasq.conf"), None);
    }
}
