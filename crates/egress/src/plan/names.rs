//! Names of the sets and chains corral owns. Everything per profile starts
//! with `<profile>-`, so ownership is visible in `nft list ruleset` and a
//! chain or set maps back to its profile.
//!
//! The gateway (dnsmasq's `nftset`) needs [`dns_set`] to fill the dynamic
//! sets: `inet corral <profile>-dns4` and `inet corral <profile>-dns6`
//! (`flags timeout`, default timeout [`super::DNS_SET_TIMEOUT`]; they exist
//! only for allowlist profiles with `dns = "gateway"` and at least one host
//! or wildcard entry, and `-dns6` only when the profile has IPv6).

use corral_sandbox_core::{PortRange, ProfileName, Protocol};

use super::model::AddrFamily;

/// Shared interval set of reserved/private IPv4 ranges (internet mode).
pub const RESERVED4: &str = "reserved4";
/// Shared interval set of reserved/private IPv6 ranges (internet mode).
pub const RESERVED6: &str = "reserved6";

/// Base chain names (the same in both tables where they exist).
pub const FORWARD: &str = "forward";
/// Input base chain (inet table).
pub const INPUT: &str = "input";
/// NAT postrouting base chain (inet table).
pub const POSTROUTING: &str = "postrouting";

fn fam_digit(family: AddrFamily) -> char {
    match family {
        AddrFamily::V4 => '4',
        AddrFamily::V6 => '6',
    }
}

/// The allowlist interval set of one (protocol, port range) class:
/// `<profile>-allow4`, `<profile>-allow6-tcp`, `<profile>-allow4-443`,
/// `<profile>-allow4-udp-8000-8100`.
pub fn allow_set(
    profile: &ProfileName,
    family: AddrFamily,
    protocol: Option<Protocol>,
    ports: Option<PortRange>,
) -> String {
    let mut name = format!("{profile}-allow{}", fam_digit(family));
    if let Some(p) = protocol {
        name.push('-');
        name.push_str(&p.to_string());
    }
    if let Some(r) = ports {
        name.push('-');
        name.push_str(&r.to_string());
    }
    name
}

/// The dynamic set the gateway resolver fills: `<profile>-dns4`/`-dns6`.
pub fn dns_set(profile: &ProfileName, family: AddrFamily) -> String {
    format!("{profile}-dns{}", fam_digit(family))
}

/// Sandbox → world chain of a profile.
pub fn out_chain(profile: &ProfileName) -> String {
    format!("{profile}-out")
}

/// World → sandbox chain of a profile.
pub fn in_chain(profile: &ProfileName) -> String {
    format!("{profile}-in")
}

/// Sandbox → host (input) chain of a profile.
pub fn host_chain(profile: &ProfileName) -> String {
    format!("{profile}-host")
}

/// Bridge-family chain dropping frames between ports of the profile's bridge.
pub fn ports_chain(profile: &ProfileName) -> String {
    format!("{profile}-ports")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_set_names_encode_the_class() {
        let p = ProfileName::new("dev").unwrap();
        assert_eq!(allow_set(&p, AddrFamily::V4, None, None), "dev-allow4");
        assert_eq!(
            allow_set(
                &p,
                AddrFamily::V6,
                Some(Protocol::Udp),
                Some(PortRange::new(8000, 8100).unwrap())
            ),
            "dev-allow6-udp-8000-8100"
        );
        assert_eq!(
            allow_set(
                &p,
                AddrFamily::V4,
                None,
                Some(PortRange::single(443).unwrap())
            ),
            "dev-allow4-443"
        );
        assert_eq!(dns_set(&p, AddrFamily::V6), "dev-dns6");
    }
}
