//! Which sandbox asked. A query's source is one of the addresses bound to
//! a sandbox's port (the bridge drops frames from any other), so the
//! reservations the apply recorded beside the resolver's record
//! (`reservations.json`) name the sandbox, and with it the address of
//! each family its flows leave from: a name asked over IPv4 pins its AAAA
//! answers to the same sandbox's IPv6 address.
//!
//! A source bound to no sandbox (the host itself asking, for `corral
//! explain`) is answered but pins nothing: no sandbox gains an address.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Mutex;

use corral_egress::plan::AddrFamily;

use super::recorded::RecordId;
use crate::dhcp::{Reservation, recorded_reservations};

/// The sandboxes of one bridge, by the addresses bound to them.
#[derive(Debug)]
pub struct Askers {
    source: Source,
}

#[derive(Debug)]
enum Source {
    /// Given once (tests, labs that bind no file).
    Fixed(Vec<Reservation>),
    /// Read from the file, again whenever it is replaced.
    File {
        path: PathBuf,
        read: Mutex<(Option<RecordId>, Vec<Reservation>)>,
    },
}

impl Askers {
    /// These reservations, for good.
    pub fn fixed(reservations: Vec<Reservation>) -> Self {
        Self {
            source: Source::Fixed(reservations),
        }
    }

    /// The reservations recorded in `path` (corral's DHCP server's file),
    /// read again each time the apply replaces it.
    pub fn recorded(path: PathBuf) -> Self {
        Self {
            source: Source::File {
                path,
                read: Mutex::new((None, Vec::new())),
            },
        }
    }

    /// The address of `family` of the sandbox that sent from `from`;
    /// `None` when no sandbox is bound to `from`, or the sandbox has no
    /// address of that family.
    pub fn pin(&self, from: IpAddr, family: AddrFamily) -> Option<IpAddr> {
        let pick = |rs: &[Reservation]| {
            rs.iter()
                .find(|r| sent_by(r, from))
                .and_then(|r| match family {
                    AddrFamily::V4 => Some(IpAddr::V4(r.addr)),
                    AddrFamily::V6 => r.v6.map(IpAddr::V6),
                })
        };
        match &self.source {
            Source::Fixed(rs) => pick(rs),
            Source::File { path, read } => {
                let now = RecordId::of(path);
                // A poisoned lock only means another query panicked while
                // reading; the data is replaced below all the same.
                let mut held = read.lock().unwrap_or_else(|e| e.into_inner());
                if held.0 != now || now.is_none() {
                    // An unreadable file pins nothing (fail closed).
                    held.1 = recorded_reservations(path.parent()?).unwrap_or_default();
                    held.0 = now;
                }
                pick(&held.1)
            }
        }
    }
}

/// Whether `from` is one of the addresses bound to `r`'s port: its IPv4
/// address, its IPv6 address or its EUI-64 link-local one.
fn sent_by(r: &Reservation, from: IpAddr) -> bool {
    match from {
        IpAddr::V4(a) => a == r.addr,
        IpAddr::V6(a) => r.v6 == Some(a) || r.mac.link_local() == a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reservation(v4: &str, v6: Option<&str>, mac: &str) -> Reservation {
        Reservation {
            mac: mac.parse().unwrap(),
            addr: v4.parse().unwrap(),
            port: corral_sandbox_core::InterfaceName::new("c0s1").unwrap(),
            v6: v6.map(|a| a.parse().unwrap()),
        }
    }

    #[test]
    fn a_sandbox_is_found_by_any_of_its_addresses_and_pins_the_asked_family() {
        let a = reservation("10.90.0.2", Some("fd00:90::2"), "02:00:00:00:00:02");
        let ll = "02:00:00:00:00:02"
            .parse::<corral_sandbox_core::MacAddr>()
            .unwrap()
            .link_local();
        let askers = Askers::fixed(vec![a, reservation("10.90.0.3", None, "02:00:00:00:00:03")]);
        let v4: IpAddr = "10.90.0.2".parse().unwrap();
        let v6: IpAddr = "fd00:90::2".parse().unwrap();
        for from in [v4, v6, IpAddr::V6(ll)] {
            assert_eq!(askers.pin(from, AddrFamily::V4), Some(v4), "{from}");
            assert_eq!(askers.pin(from, AddrFamily::V6), Some(v6), "{from}");
        }
        let other: IpAddr = "10.90.0.3".parse().unwrap();
        assert_eq!(askers.pin(other, AddrFamily::V4), Some(other));
        assert_eq!(askers.pin(other, AddrFamily::V6), None);
        // The host (the gateway address) is no sandbox.
        assert_eq!(
            askers.pin("10.90.0.1".parse().unwrap(), AddrFamily::V4),
            None
        );
    }

    #[test]
    fn the_recorded_file_is_read_again_when_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(crate::files::DHCP_RESERVATIONS_FILE);
        let askers = Askers::recorded(path.clone());
        let from: IpAddr = "10.90.0.2".parse().unwrap();
        assert_eq!(askers.pin(from, AddrFamily::V4), None, "no file: nobody");
        let write = |v4: &str| {
            let b = corral_egress::plan::PortBinding {
                port: corral_sandbox_core::InterfaceName::new("c0s1").unwrap(),
                bridge: corral_sandbox_core::BridgeName::new("cb-dev").unwrap(),
                mac: "02:00:00:00:00:02".parse().unwrap(),
                v4: v4.parse().unwrap(),
                v6: None,
            };
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, serde_json::to_vec(&[b]).unwrap()).unwrap();
            std::fs::rename(&tmp, &path).unwrap();
        };
        write("10.90.0.2");
        assert_eq!(askers.pin(from, AddrFamily::V4), Some(from));
        write("10.90.0.9");
        assert_eq!(askers.pin(from, AddrFamily::V4), None, "rebound elsewhere");
    }
}
