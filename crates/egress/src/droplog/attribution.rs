//! Which sandbox sent a blocked packet.
//!
//! The log gives the packet's source address and, on an Ethernet arrival
//! interface, the sender's MAC. corral's port bindings tie each sandbox
//! port to one MAC and its addresses, and the bridge table drops frames
//! that break the binding, so a source that is a bound address *sent from
//! its bound MAC* is that sandbox. Anything else (a forged source, a MAC
//! that is not the address's) is attributed to no one: the record says
//! `sandbox: null` and names the guard rule that dropped it.
//!
//! Bindings know ports, not sandbox names: the caller says which sandbox
//! holds each port (the provider's stamps). Addresses corral does not bind
//! (DHCP leases of unbound ports, a provider's own addressing) come from a
//! second attribution chained after the first: `(bindings, leases)` tries
//! the bindings, then the leases ([`Attribution`] is implemented for
//! pairs, for maps of address → name, and for closures).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use crate::plan::PortBinding;

/// Maps a blocked packet's source to the sandbox that sent it.
pub trait Attribution {
    /// The sandbox at `src` (sent from `mac`, when known), if any.
    fn sandbox(&self, src: IpAddr, mac: Option<[u8; 6]>) -> Option<String>;
}

/// Attribution by corral's port bindings.
#[derive(Debug, Clone, Default)]
pub struct BindingAttribution {
    by_addr: HashMap<IpAddr, ([u8; 6], String)>,
}

impl BindingAttribution {
    /// Index `bindings`; `name_of` names the sandbox holding a port
    /// (ports it cannot name are left out).
    pub fn new(bindings: &[PortBinding], name_of: impl Fn(&PortBinding) -> Option<String>) -> Self {
        let mut by_addr = HashMap::new();
        for b in bindings {
            let Some(name) = name_of(b) else { continue };
            let mac = b.mac.octets();
            by_addr.insert(IpAddr::V4(b.v4), (mac, name.clone()));
            for a in b.v6_addrs() {
                by_addr.insert(IpAddr::V6(a), (mac, name.clone()));
            }
        }
        BindingAttribution { by_addr }
    }
}

impl Attribution for BindingAttribution {
    fn sandbox(&self, src: IpAddr, mac: Option<[u8; 6]>) -> Option<String> {
        let (bound, name) = self.by_addr.get(&src)?;
        match mac {
            Some(m) if m != *bound => None,
            _ => Some(name.clone()),
        }
    }
}

impl<A: Attribution, B: Attribution> Attribution for (A, B) {
    fn sandbox(&self, src: IpAddr, mac: Option<[u8; 6]>) -> Option<String> {
        self.0
            .sandbox(src, mac)
            .or_else(|| self.1.sandbox(src, mac))
    }
}

impl Attribution for HashMap<IpAddr, String> {
    fn sandbox(&self, src: IpAddr, _mac: Option<[u8; 6]>) -> Option<String> {
        self.get(&src).cloned()
    }
}

impl Attribution for BTreeMap<IpAddr, String> {
    fn sandbox(&self, src: IpAddr, _mac: Option<[u8; 6]>) -> Option<String> {
        self.get(&src).cloned()
    }
}

impl<F: Fn(IpAddr, Option<[u8; 6]>) -> Option<String>> Attribution for F {
    fn sandbox(&self, src: IpAddr, mac: Option<[u8; 6]>) -> Option<String> {
        self(src, mac)
    }
}

/// No attribution: every record has `sandbox: null`.
impl Attribution for () {
    fn sandbox(&self, _src: IpAddr, _mac: Option<[u8; 6]>) -> Option<String> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::dev_profile;

    #[test]
    fn a_bound_source_is_its_sandbox_only_from_its_mac() {
        let b = PortBinding::allocate(&dev_profile(), &[]).unwrap();
        let who = BindingAttribution::new(std::slice::from_ref(&b), |_| Some("box".into()));
        let src = IpAddr::V4(b.v4);
        assert_eq!(who.sandbox(src, None).as_deref(), Some("box"));
        assert_eq!(
            who.sandbox(src, Some(b.mac.octets())).as_deref(),
            Some("box")
        );
        assert_eq!(who.sandbox(src, Some([2, 0, 0, 0, 0, 1])), None);
        assert_eq!(who.sandbox("192.0.2.9".parse().unwrap(), None), None);
        let mut leases = HashMap::new();
        leases.insert("192.0.2.9".parse().unwrap(), "leased".to_owned());
        let both = (who, leases);
        assert_eq!(
            both.sandbox("192.0.2.9".parse().unwrap(), None).as_deref(),
            Some("leased")
        );
    }
}
