//! Names of the sets and chains corral owns. Everything per profile starts
//! with `<profile>-`, so ownership is visible in `nft list ruleset` and a
//! chain or set maps back to its profile.
//!
//! The gateway (dnsmasq's `nftset`) needs [`dns_set`] to fill the dynamic
//! sets: one per (protocol, ports) class of the profile's host and
//! wildcard entries and per family, e.g. `inet corral dev-dns4-tcp-443`
//! (`flags timeout`, default timeout [`super::DNS_SET_TIMEOUT`]; they exist
//! only for allowlist profiles with `dns = "gateway"`, and the `dns6` ones
//! only when the profile has IPv6). A name's answers go only to the sets of
//! the classes its entries list, so a name's port limit holds after it is
//! resolved.

use corral_sandbox_core::{PortRange, ProfileName, Protocol};

use super::model::AddrFamily;

/// Shared interval set of reserved/private IPv4 ranges (internet mode).
pub const RESERVED4: &str = "reserved4";
/// Shared interval set of reserved/private IPv6 ranges (internet mode).
pub const RESERVED6: &str = "reserved6";

/// Shared interval set of the host's directly connected networks and
/// routers (computed at apply, kept current by refresh).
pub const HOSTNET4: &str = "hostnet4";
/// IPv6 twin of [`HOSTNET4`].
pub const HOSTNET6: &str = "hostnet6";

/// Prerouting base chain (inet table): source and arrival checks.
pub const PREROUTING: &str = "prerouting";
/// Input chain for the Multipass control bridge. The underscore keeps it
/// apart from every profile's chains (profile names are DNS labels).
pub const MULTIPASS_HOST: &str = "multipass_host";

/// The guard every profile's bridge traffic passes (prerouting): the
/// checks that are the same for every profile, once for all of them; it
/// hands each packet to its profile's `<p>-guard` by interface for the
/// profile's own subnet checks. The underscore keeps it apart from every
/// profile's chains.
pub const SHARED_GUARD: &str = "shared_guard";

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

fn class_suffix(protocol: Option<Protocol>, ports: Option<PortRange>) -> String {
    let mut s = String::new();
    if let Some(p) = protocol {
        s.push('-');
        s.push_str(&p.to_string());
    }
    if let Some(r) = ports {
        s.push('-');
        s.push_str(&r.to_string());
    }
    s
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
    format!(
        "{profile}-allow{}{}",
        fam_digit(family),
        class_suffix(protocol, ports)
    )
}

/// The dynamic set the gateway resolver fills for one (protocol, port
/// range) class: `<profile>-dns4`, `<profile>-dns6-tcp-443`, ...
pub fn dns_set(
    profile: &ProfileName,
    family: AddrFamily,
    protocol: Option<Protocol>,
    ports: Option<PortRange>,
) -> String {
    format!(
        "{profile}-dns{}{}",
        fam_digit(family),
        class_suffix(protocol, ports)
    )
}

/// A profile's deny set (its own `deny` list plus the host-wide one).
pub fn deny_set(profile: &ProfileName, family: AddrFamily) -> String {
    format!("{profile}-deny{}", fam_digit(family))
}

/// Prerouting chain checking everything that arrives on a profile bridge.
pub fn guard_chain(profile: &ProfileName) -> String {
    format!("{profile}-guard")
}

/// Where a shared chain's logged block of the profile's packet ends: one
/// counted drop, so the profile's blocked count holds what shared rules
/// blocked for it ([`super::droplog`]).
pub fn blocked_chain(profile: &ProfileName) -> String {
    format!("{profile}{BLOCKED_SUFFIX}")
}

/// Where a shared chain's block of the profile's packet ends when the log
/// budget kept it out of the log: its counter is the profile's suppressed
/// count of shared rules.
pub fn suppressed_chain(profile: &ProfileName) -> String {
    format!("{profile}{SUPPRESSED_SUFFIX}")
}

/// What [`blocked_chain`] adds to the profile's name.
pub const BLOCKED_SUFFIX: &str = "-blocked";
/// What [`suppressed_chain`] adds to the profile's name.
pub const SUPPRESSED_SUFFIX: &str = "-suppressed";

/// Whether `chain` is a profile's block sink ([`blocked_chain`],
/// [`suppressed_chain`]): a verdict reached there was decided by the
/// shared rule that sent the packet.
pub fn is_sink(chain: &str) -> bool {
    chain.ends_with(BLOCKED_SUFFIX) || chain.ends_with(SUPPRESSED_SUFFIX)
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

/// Prerouting chain for the profile's source addresses (jumped to by
/// source address, whatever the interface).
pub fn arrival_chain(profile: &ProfileName) -> String {
    format!("{profile}-arrival")
}

/// Postrouting (nat) chain for the profile's source addresses.
pub fn nat_chain(profile: &ProfileName) -> String {
    format!("{profile}-nat")
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
        assert_eq!(dns_set(&p, AddrFamily::V6, None, None), "dev-dns6");
        assert_eq!(
            dns_set(
                &p,
                AddrFamily::V4,
                Some(Protocol::Tcp),
                Some(PortRange::single(443).unwrap())
            ),
            "dev-dns4-tcp-443"
        );
    }
}
