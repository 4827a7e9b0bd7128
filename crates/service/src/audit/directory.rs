//! Which sandbox sent a packet: its source address → the port binding that
//! owns the address → the sandbox whose NIC is that port with that MAC
//! (the provider's own record of the NIC, which corral set at create).
//!
//! Only bound addresses are attributed: the bridge's guards drop a source
//! its port was not bound to before it reaches a profile chain, so an
//! address here cannot be claimed by another sandbox.

use std::collections::HashMap;
use std::net::IpAddr;

use corral_egress::plan::PortBinding;
use corral_sandbox_core::audit::NetRecord;
use corral_sandbox_core::sandbox::BoundNic;

/// Addresses → sandbox names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directory {
    by_addr: HashMap<IpAddr, String>,
}

impl Directory {
    /// From the bindings in force and the sandboxes' NICs (name, NIC).
    pub fn build(bindings: &[PortBinding], nics: &[(String, BoundNic)]) -> Self {
        let mut by_addr = HashMap::new();
        for b in bindings {
            let Some((name, _)) = nics
                .iter()
                .find(|(_, nic)| nic.port == b.port && nic.mac == b.mac)
            else {
                continue;
            };
            by_addr.insert(IpAddr::V4(b.v4), name.clone());
            if let Some(v6) = b.v6 {
                by_addr.insert(IpAddr::V6(v6), name.clone());
            }
            by_addr.insert(IpAddr::V6(b.mac.link_local()), name.clone());
        }
        Self { by_addr }
    }

    /// The sandbox bound to `addr`.
    pub fn sandbox(&self, addr: IpAddr) -> Option<&str> {
        self.by_addr.get(&addr).map(String::as_str)
    }

    /// How many addresses are known.
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }

    /// True when no address is known.
    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }

    /// `record` with its sandbox filled in from its source address (a
    /// record that already names one keeps it).
    pub fn attribute(&self, mut record: NetRecord) -> NetRecord {
        let (slot, src) = match &mut record {
            NetRecord::Blocked(b) => (&mut b.sandbox, b.src),
            NetRecord::DnsAnswered(d) | NetRecord::DnsRefused(d) => (&mut d.sandbox, d.src),
            NetRecord::Suppressed { .. } => return record,
        };
        if slot.is_none() {
            *slot = self.sandbox(src).map(str::to_owned);
        }
        record
    }
}

#[cfg(test)]
mod tests {
    use corral_sandbox_core::audit::DnsDecision;

    use super::*;

    fn binding(port: &str, mac: &str, v4: &str, v6: Option<&str>) -> PortBinding {
        PortBinding {
            port: port.parse().unwrap(),
            bridge: "corral-dev".parse().unwrap(),
            mac: mac.parse().unwrap(),
            v4: v4.parse().unwrap(),
            v6: v6.map(|a| a.parse().unwrap()),
        }
    }

    fn nic(port: &str, mac: &str) -> BoundNic {
        BoundNic {
            mac: mac.parse().unwrap(),
            port: port.parse().unwrap(),
        }
    }

    #[test]
    fn bound_addresses_name_the_sandbox_whose_nic_holds_the_port_and_mac() {
        let bindings = [
            binding(
                "crl0a5a0005",
                "02:c0:0a:5a:00:05",
                "10.90.0.5",
                Some("fd00:90::5"),
            ),
            binding("crl0a5a0006", "02:c0:0a:5a:00:06", "10.90.0.6", None),
            binding("crl0a5a0007", "02:c0:0a:5a:00:07", "10.90.0.7", None),
        ];
        let nics = [
            ("a".to_owned(), nic("crl0a5a0005", "02:c0:0a:5a:00:05")),
            ("b".to_owned(), nic("crl0a5a0006", "02:c0:0a:5a:00:06")),
            // Right port, wrong MAC: not this binding's sandbox.
            ("c".to_owned(), nic("crl0a5a0007", "02:c0:0a:5a:00:99")),
        ];
        let d = Directory::build(&bindings, &nics);
        assert_eq!(d.sandbox("10.90.0.5".parse().unwrap()), Some("a"));
        assert_eq!(d.sandbox("fd00:90::5".parse().unwrap()), Some("a"));
        assert_eq!(d.sandbox("fe80::c0:aff:fe5a:5".parse().unwrap()), Some("a"));
        assert_eq!(d.sandbox("10.90.0.6".parse().unwrap()), Some("b"));
        assert_eq!(d.sandbox("10.90.0.7".parse().unwrap()), None);
        let r = d.attribute(NetRecord::DnsRefused(DnsDecision {
            sandbox: None,
            profile: "dev".into(),
            src: "10.90.0.6".parse().unwrap(),
            name: "x.test".into(),
            qtype: "A".into(),
            addresses: vec![],
        }));
        assert_eq!(r.sandbox(), Some("b"));
    }
}
