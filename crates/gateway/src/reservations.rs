//! DHCP reservations: one lease per bound port.
//!
//! Each gateway serves only the MAC addresses in its reservations file
//! (`dhcp-hostsfile`, one `MAC,address` line per port bound on its bridge;
//! `dhcp-ignore=tag:!known` for the rest). Changing the file and sending
//! dnsmasq SIGHUP makes it re-read the file without a restart: leases
//! already given stay. Beside it, the same bindings with their ports
//! (`reservations.json`, root's alone) for corral's own DHCP server, which
//! answers out of the client's port and re-reads the file when it changes.

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use corral_egress::plan::PortBinding;
use corral_sandbox_core::BridgeName;
use corral_state_files::StateDir;

use super::error::GatewayError;
use super::files::{DHCP_RESERVATIONS_FILE, LEASES_MODE};
use super::paths::{CONF_FILE, GATEWAY_DIR, RESERVATIONS_FILE};
use super::process::{Gateway, GatewayStatus};

/// How long [`Gateway::set_reservations`] waits for a running dnsmasq to
/// report that it re-read the file.
const RELOAD_WAIT: Duration = Duration::from_secs(2);

/// The reservations file of `bridge` for `bindings` (only those on it),
/// sorted so equal bindings give equal bytes.
pub fn reservations_text(bridge: &BridgeName, bindings: &[PortBinding]) -> String {
    let mut lines: Vec<String> = bindings
        .iter()
        .filter(|b| b.bridge == *bridge)
        .map(|b| format!("{},{}\n", b.mac, b.v4))
        .collect();
    lines.sort();
    lines.concat()
}

/// The bindings on `bridge` among `bindings`, sorted, as corral's own
/// DHCP server reads them.
pub fn dhcp_reservations_json(
    bridge: &BridgeName,
    bindings: &[PortBinding],
) -> Result<Vec<u8>, GatewayError> {
    let mut on: Vec<&PortBinding> = bindings.iter().filter(|b| b.bridge == *bridge).collect();
    on.sort();
    serde_json::to_vec_pretty(&on).map_err(|e| GatewayError::Record {
        bridge: bridge.to_string(),
        reason: e.to_string(),
    })
}

/// What [`Gateway::set_reservations`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReservationOutcome {
    /// The file already held these reservations.
    Unchanged,
    /// Written; no dnsmasq runs (it reads the file when it starts).
    Written,
    /// Written, and the running dnsmasq re-read it.
    Reloaded,
}

impl Gateway {
    /// Makes this gateway's reservations exactly the bindings on its bridge
    /// and, when its dnsmasq runs, has it re-read them (SIGHUP; leases are
    /// kept) before returning.
    pub fn set_reservations(
        &self,
        bindings: &[PortBinding],
    ) -> Result<ReservationOutcome, GatewayError> {
        let text = reservations_text(self.bridge(), bindings);
        let json = dhcp_reservations_json(self.bridge(), bindings)?;
        let paths = self.paths();
        let file = paths.reservations();
        let dir = self.dir()?;
        // corral's server reads this one at its next message: written
        // first, so by the time the rules admit the port both servers
        // know its reservation.
        let json_changed = dir.read(DHCP_RESERVATIONS_FILE)?.as_deref() != Some(json.as_slice());
        if json_changed {
            dir.write_regenerated(DHCP_RESERVATIONS_FILE, &json, LEASES_MODE)?;
        }
        if dir.read(RESERVATIONS_FILE)?.as_deref() == Some(text.as_bytes()) {
            // Unchanged, but an older corral's file is narrowed all the same.
            crate::files::share_reservations(&dir, RESERVATIONS_FILE)?;
            return Ok(if json_changed {
                ReservationOutcome::Written
            } else {
                ReservationOutcome::Unchanged
            });
        }
        write_reservations(self, Some(&text))?;
        let GatewayStatus::Running { pid } = self.status() else {
            return Ok(ReservationOutcome::Written);
        };
        // A dnsmasq started without DHCPv4 (corral's own server has the
        // bridge's leases) does not re-read the file on SIGHUP and logs
        // nothing to wait for.
        let conf = dir.read(CONF_FILE)?.unwrap_or_default();
        if !crate::render::serves_leases(&String::from_utf8_lossy(&conf)) {
            return Ok(ReservationOutcome::Written);
        }
        let log = paths.log();
        let mark = fs::metadata(&log).map_or(0, |m| m.len());
        self.hangup(pid)?;
        wait_for_reload(&log, mark, &file).map_err(|reason| GatewayError::NotRunning {
            bridge: self.bridge().to_string(),
            reason,
            log: log.clone(),
        })?;
        Ok(ReservationOutcome::Reloaded)
    }
}

/// Makes sure the reservations file exists (dnsmasq reads it at start).
pub(crate) fn ensure_file(gateway: &Gateway) -> Result<(), GatewayError> {
    if gateway.paths().reservations().exists() {
        return write_reservations(gateway, None);
    }
    write_reservations(gateway, Some(""))
}

/// Writes the file (when `text` is given) atomically, readable by the
/// group dnsmasq runs as — it reads the file after dropping root, at start
/// and on every SIGHUP — and by no other user (0640 root:`nogroup`: it
/// holds every sandbox's MAC and address), and lets that user reach it:
/// the gateway's directory, `gateway/` and the state directory (and their
/// private parents) become 0711, enter but never list.
fn write_reservations(gateway: &Gateway, text: Option<&str>) -> Result<(), GatewayError> {
    let dir = gateway.dir()?;
    if let Some(text) = text {
        // Not fsynced: every apply (and every port binding) rewrites it
        // from the bindings before a dnsmasq reads it.
        crate::files::write_reservations(&dir, RESERVATIONS_FILE, text.as_bytes())?;
    }
    // Also narrows a file an older corral left world-readable.
    crate::files::share_reservations(&dir, RESERVATIONS_FILE)?;
    let paths = gateway.paths();
    let state = StateDir::open(paths.state_dir())?;
    state.allow_search_from_root()?;
    state.subdir(GATEWAY_DIR)?.allow_search()?;
    dir.allow_search()?;
    Ok(())
}

/// Waits until dnsmasq's log, past byte `mark`, says it read `file`.
fn wait_for_reload(log: &Path, mark: u64, file: &Path) -> Result<(), String> {
    let want = format!("read {}", file.display());
    let deadline = Instant::now() + RELOAD_WAIT;
    loop {
        let text = fs::read(log).unwrap_or_default();
        // The audit collector empties a long log after reading it: a log
        // shorter than the mark was emptied since, and all of it is fresh.
        let fresh = text
            .get(usize::try_from(mark).unwrap_or(0)..)
            .unwrap_or(&text);
        if String::from_utf8_lossy(fresh).contains(&want) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "it did not report re-reading {} within {RELOAD_WAIT:?} of SIGHUP",
                file.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Sets the reservations of every gateway under `state_dir` that serves a
/// bridge of `bridges`, from `bindings`.
pub fn reserve_all<'a>(
    state_dir: &Path,
    bridges: impl IntoIterator<Item = &'a BridgeName>,
    bindings: &[PortBinding],
) -> Result<(), GatewayError> {
    for b in bridges {
        Gateway::new(state_dir, b).set_reservations(bindings)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt};

    use super::*;
    use corral_egress::plan::MacAddr;
    use corral_sandbox_core::InterfaceName;

    fn binding(port: &str, bridge: &str, last: u8) -> PortBinding {
        PortBinding {
            port: InterfaceName::new(port).unwrap(),
            bridge: BridgeName::new(bridge).unwrap(),
            mac: MacAddr([2, 0xc0, 10, 0, 0, last]),
            v4: std::net::Ipv4Addr::new(10, 0, 0, last),
            v6: None,
        }
    }

    #[test]
    fn one_line_per_port_of_this_bridge_only() {
        let br = BridgeName::new("cb-a").unwrap();
        let text = reservations_text(
            &br,
            &[
                binding("p3", "cb-a", 3),
                binding("q2", "cb-b", 2),
                binding("p2", "cb-a", 2),
            ],
        );
        assert_eq!(
            text,
            "02:c0:0a:00:00:02,10.0.0.2\n02:c0:0a:00:00:03,10.0.0.3\n"
        );
    }

    #[test]
    fn a_stopped_gateway_gets_the_file_and_an_unchanged_one_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let gw = Gateway::new(dir.path(), &BridgeName::new("cb-a").unwrap());
        let b = [binding("p2", "cb-a", 2)];
        assert_eq!(
            gw.set_reservations(&b).unwrap(),
            ReservationOutcome::Written
        );
        assert_eq!(
            gw.set_reservations(&b).unwrap(),
            ReservationOutcome::Unchanged
        );
        let file = gw.paths().reservations();
        let nogroup = crate::files::group_gid(crate::render::RUN_AS_GROUP).unwrap();
        let meta = fs::metadata(&file).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o640);
        assert_eq!(meta.gid(), nogroup);
        // What an older corral left, world-readable, is narrowed by the
        // next apply even when its content stands.
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(
            gw.set_reservations(&b).unwrap(),
            ReservationOutcome::Unchanged
        );
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o640
        );
        assert_eq!(
            fs::metadata(gw.paths().dir()).unwrap().permissions().mode() & 0o777,
            0o711
        );
    }
}
