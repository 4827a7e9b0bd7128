//! Port bindings: each sandbox's bridge port bound to the MAC and the
//! addresses corral gave it.
//!
//! corral chooses a sandbox's MAC and addresses when it creates the
//! sandbox ([`PortBinding::allocate`]), hands them to the provider (Incus:
//! the NIC's `hwaddr` and `host_name`), writes a DHCP reservation for the
//! gateway and adds the binding to `table bridge corral`
//! (`Host::bind_port`). From then on the port's frames must carry that MAC,
//! its ARP and neighbour advertisements that sender pair, its IP packets
//! those source addresses; anything else is dropped before the bridge
//! learns from it. Bindings are data in the plan ([`HostPlan::bindings`]),
//! so verify compares the live set elements with them.

use std::net::{Ipv4Addr, Ipv6Addr};

use corral_sandbox_core::sandbox::BoundNic;
use corral_sandbox_core::{BridgeName, InterfaceName, Profile, ProfileSet};
pub use corral_sandbox_core::{MacAddr, MacParseError};
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::HostPlan;
use super::PlanError;

/// One bridge port bound to the MAC and addresses its sandbox was given.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PortBinding {
    /// The host-side interface of the sandbox's NIC (the bridge port).
    pub port: InterfaceName,
    /// The profile bridge the port is on.
    pub bridge: BridgeName,
    /// The sandbox's MAC.
    pub mac: MacAddr,
    /// The sandbox's IPv4 address.
    pub v4: Ipv4Addr,
    /// The sandbox's IPv6 address, when the profile has IPv6. Its EUI-64
    /// link-local address (from `mac`) is bound too.
    pub v6: Option<Ipv6Addr>,
}

/// The prefix length a profile's IPv6 subnet must have for its gateway to
/// announce it for stateless autoconfiguration (SLAAC forms a 64-bit
/// interface identifier).
pub const SLAAC_PREFIX_LEN: u8 = 64;

/// The address a guest forms by SLAAC in `net` from `mac` with a modified
/// EUI-64 interface identifier (the kernel's default, `addr_gen_mode` 0):
/// the one a sandbox of a /64 profile is bound to, so the address it
/// configures itself from the gateway's announcement is exactly its own.
pub fn slaac_address(net: ipnet::Ipv6Net, mac: MacAddr) -> Ipv6Addr {
    let iid = u128::from(mac.link_local()) & u128::from(u64::MAX);
    Ipv6Addr::from(u128::from(net.trunc().network()) | iid)
}

/// Prefix of the port names [`PortBinding::allocate`] chooses.
pub const PORT_PREFIX: &str = "crl";

impl PortBinding {
    /// The lowest free address of `profile`'s subnet (not the network,
    /// gateway or broadcast address, not bound in `taken`), with the MAC,
    /// IPv6 address and port name derived from it: MAC `02:c0:` + the
    /// IPv4 address (unique on the host, because profile subnets do not
    /// overlap), the IPv6 address the guest forms by SLAAC from that MAC
    /// in a /64 profile subnet ([`slaac_address`]; in a subnet of another
    /// length, which no gateway announces, the one at the same offset as
    /// the IPv4 address), port `crl` + the IPv4 address in hex.
    pub fn allocate(profile: &Profile, taken: &[PortBinding]) -> Result<PortBinding, PlanError> {
        let net = profile.subnet_v4.trunc();
        let first = u32::from(net.network()).saturating_add(1);
        let last = u32::from(net.broadcast()).saturating_sub(1);
        let gw = u32::from(profile.gateway_v4());
        let free = (first..=last)
            .filter(|a| *a != gw)
            .map(Ipv4Addr::from)
            .find(|a| !taken.iter().any(|b| b.v4 == *a));
        let Some(v4) = free else {
            return Err(PlanError::PoolExhausted {
                profile: profile.name.to_string(),
                subnet: net.to_string(),
            });
        };
        let o = v4.octets();
        let offset = u32::from(v4) - u32::from(net.network());
        let mac = MacAddr([0x02, 0xc0, o[0], o[1], o[2], o[3]]);
        let v6 = profile.subnet_v6.map(|n| match n.prefix_len() {
            SLAAC_PREFIX_LEN => slaac_address(n, mac),
            _ => Ipv6Addr::from(u128::from(n.trunc().network()) + u128::from(offset)),
        });
        let port =
            InterfaceName::new(format!("{PORT_PREFIX}{:08x}", u32::from(v4))).map_err(|e| {
                PlanError::Binding {
                    port: String::new(),
                    problem: e.to_string(),
                }
            })?;
        Ok(PortBinding {
            port,
            bridge: profile.bridge.clone(),
            mac,
            v4,
            v6,
        })
    }

    /// What the provider must give the sandbox's NIC: this MAC, and this
    /// host-side name (the bridge port).
    pub fn nic(&self) -> BoundNic {
        BoundNic {
            mac: self.mac,
            port: self.port.clone(),
        }
    }

    /// The IPv6 addresses bound: the global one (if any) and the link-local
    /// one derived from the MAC.
    pub fn v6_addrs(&self) -> Vec<Ipv6Addr> {
        let mut v = vec![self.mac.link_local()];
        v.extend(self.v6);
        v
    }
}

/// Checks `bindings` against `profiles`: each on a profile's bridge, with
/// an assignable MAC and addresses inside its profile's subnets that are
/// not the network, gateway or broadcast address; no port, MAC or address
/// bound twice. Returns them sorted by port.
pub fn validate(
    profiles: &ProfileSet,
    bindings: Vec<PortBinding>,
) -> Result<Vec<PortBinding>, PlanError> {
    let bad = |b: &PortBinding, problem: String| PlanError::Binding {
        port: b.port.to_string(),
        problem,
    };
    for b in &bindings {
        let Some(p) = profiles.by_bridge(b.bridge.as_str()) else {
            return Err(bad(
                b,
                format!("bridge `{}` is no profile's bridge", b.bridge),
            ));
        };
        if !b.mac.is_assignable() {
            return Err(bad(
                b,
                format!("MAC {} is multicast or zero; bind a unicast MAC", b.mac),
            ));
        }
        let net = p.subnet_v4.trunc();
        if !net.contains(&b.v4)
            || b.v4 == net.network()
            || b.v4 == net.broadcast()
            || b.v4 == p.gateway_v4()
        {
            return Err(bad(
                b,
                format!(
                    "{} is not a host address of profile `{}`'s subnet {net} other than its gateway",
                    b.v4, p.name
                ),
            ));
        }
        match (b.v6, p.subnet_v6) {
            (None, _) => {}
            (Some(v6), Some(net6)) if net6.contains(&v6) && Some(v6) != p.gateway_v6() => {}
            (Some(v6), _) => {
                return Err(bad(
                    b,
                    format!(
                        "{v6} is not an address of profile `{}`'s IPv6 subnet other than its gateway",
                        p.name
                    ),
                ));
            }
        }
    }
    let mut sorted = bindings;
    sorted.sort();
    for (i, a) in sorted.iter().enumerate() {
        for b in &sorted[i + 1..] {
            let clash = if a.port == b.port {
                Some(format!("port {} is bound twice", a.port))
            } else if a.mac == b.mac {
                Some(format!("MAC {} is bound to {} too", a.mac, a.port))
            } else if a.v4 == b.v4 {
                Some(format!("{} is bound to {} too", a.v4, a.port))
            } else if a.v6.is_some() && a.v6 == b.v6 {
                Some(format!("{:?} is bound to {} too", a.v6, a.port))
            } else {
                None
            };
            if let Some(problem) = clash {
                return Err(bad(b, problem));
            }
        }
    }
    Ok(sorted)
}

/// The bindings of `previous` that still fit `profiles` (their bridge is
/// still a profile's, their addresses still in its subnets, no clash), in
/// order: what a re-apply of a changed configuration keeps.
pub fn carry(profiles: &ProfileSet, previous: &[PortBinding]) -> Vec<PortBinding> {
    let mut kept: Vec<PortBinding> = Vec::new();
    for b in previous {
        let mut trial = kept.clone();
        trial.push(b.clone());
        if validate(profiles, trial).is_ok() {
            kept.push(b.clone());
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::profile;
    use corral_sandbox_core::EgressMode;

    fn set() -> ProfileSet {
        let mut p = profile("web", "cb-web", "10.91.0.0/29", EgressMode::Internet, &[]);
        p.subnet_v6 = Some("fd00:91::/64".parse().unwrap());
        ProfileSet::new(vec![p]).unwrap()
    }

    #[test]
    fn allocation_takes_the_lowest_free_host_address_and_derives_the_rest() {
        let set = set();
        let p = set.get("web").unwrap();
        let a = PortBinding::allocate(p, &[]).unwrap();
        assert_eq!(a.v4, Ipv4Addr::new(10, 91, 0, 2));
        assert_eq!(a.mac.to_string(), "02:c0:0a:5b:00:02");
        // The EUI-64 address the guest forms by SLAAC from the bound MAC.
        assert_eq!(a.v6, Some("fd00:91::c0:aff:fe5b:2".parse().unwrap()));
        assert_eq!(a.port.as_str(), "crl0a5b0002");
        assert_eq!(
            a.mac.link_local(),
            "fe80::c0:aff:fe5b:2".parse::<Ipv6Addr>().unwrap()
        );
        let mut taken = vec![a];
        for want in 3..=6 {
            let b = PortBinding::allocate(p, &taken).unwrap();
            assert_eq!(b.v4, Ipv4Addr::new(10, 91, 0, want));
            taken.push(b);
        }
        // .7 is the broadcast address of the /29: the pool is empty.
        let err = PortBinding::allocate(p, &taken).unwrap_err();
        assert!(err.to_string().contains("no free address"), "{err}");
        assert_eq!(validate(&set, taken.clone()).unwrap().len(), 5);
    }

    #[test]
    fn bad_bindings_are_refused_with_the_reason() {
        let set = set();
        let p = set.get("web").unwrap();
        let good = PortBinding::allocate(p, &[]).unwrap();
        let cases: Vec<(PortBinding, &str)> = vec![
            (
                PortBinding {
                    bridge: BridgeName::new("cb-other").unwrap(),
                    ..good.clone()
                },
                "no profile's bridge",
            ),
            (
                PortBinding {
                    mac: MacAddr([1, 0, 0, 0, 0, 1]),
                    ..good.clone()
                },
                "multicast",
            ),
            (
                PortBinding {
                    v4: Ipv4Addr::new(10, 91, 0, 1),
                    ..good.clone()
                },
                "other than its gateway",
            ),
            (
                PortBinding {
                    v4: Ipv4Addr::new(10, 92, 0, 2),
                    ..good.clone()
                },
                "subnet",
            ),
            (
                PortBinding {
                    v6: Some("fd00:99::2".parse().unwrap()),
                    ..good.clone()
                },
                "IPv6 subnet",
            ),
        ];
        for (b, want) in cases {
            let err = validate(&set, vec![b]).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
        let twin = PortBinding {
            port: InterfaceName::new("other0").unwrap(),
            ..good.clone()
        };
        let err = validate(&set, vec![good, twin]).unwrap_err().to_string();
        assert!(err.contains("bound to"), "{err}");
    }

    #[test]
    fn a_changed_configuration_keeps_the_bindings_that_still_fit() {
        let set = set();
        let p = set.get("web").unwrap();
        let a = PortBinding::allocate(p, &[]).unwrap();
        let gone = PortBinding {
            bridge: BridgeName::new("cb-gone").unwrap(),
            port: InterfaceName::new("old0").unwrap(),
            ..PortBinding::allocate(p, std::slice::from_ref(&a)).unwrap()
        };
        let twin = PortBinding {
            port: InterfaceName::new("twin0").unwrap(),
            ..a.clone()
        };
        assert_eq!(carry(&set, &[a.clone(), gone, twin]), vec![a]);
    }
}
