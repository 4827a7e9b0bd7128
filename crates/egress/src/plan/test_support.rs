//! Profile builders shared by the unit tests of `plan`, `nft` and `drift`,
//! and (feature `test-support`) by integration tests of this and other
//! crates. Test code: a bad literal panics.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use corral_sandbox_core::{
    AllowEntry, BlockAction, BridgeName, DnsPolicy, EgressMode, Profile, ProfileName, ProfileSet,
};

use super::{HostPlan, PlanSettings, Resolution};

/// A profile with IPv4 only, reject, gateway DNS.
pub fn profile(
    name: &str,
    bridge: &str,
    subnet: &str,
    mode: EgressMode,
    allow: &[&str],
) -> Profile {
    Profile {
        name: ProfileName::new(name).unwrap(),
        bridge: BridgeName::new(bridge).unwrap(),
        subnet_v4: subnet.parse().unwrap(),
        subnet_v6: None,
        mode,
        allow: allow
            .iter()
            .map(|a| a.parse::<AllowEntry>().unwrap())
            .collect(),
        block: BlockAction::Reject,
        dns: DnsPolicy::Gateway,
        allow_unresolved: false,
        learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
        approvals: Default::default(),
        flows: Default::default(),
        deny: Vec::new(),
    }
}

/// The allowlist profile `dev` of the sample sets: IPv4 and IPv6, with
/// host, wildcard, CIDR, port-range and IPv6 entries.
pub fn dev_profile() -> Profile {
    let mut dev = profile(
        "dev",
        "cb-dev",
        "10.90.0.0/24",
        EgressMode::Allowlist,
        &[
            "api.example.com:443/tcp",
            "*.example.org",
            "203.0.113.0/24",
            "198.51.100.7:8000-8100",
            "[2001:db8::1]:443/udp",
        ],
    );
    dev.subnet_v6 = Some("fd00:90::/64".parse().unwrap());
    dev
}

/// A resolution of `api.example.com` (the host entry of [`dev_profile`])
/// to `addrs`.
pub fn api_resolution(addrs: &[&str]) -> Resolution {
    let mut res = Resolution::new();
    res.insert(
        &"api.example.com".parse().unwrap(),
        addrs.iter().map(|a| a.parse().unwrap()),
    );
    res
}

/// Three profiles (allowlist with v6 and host entries, internet, none) and
/// a resolution for their names.
pub fn sample() -> (ProfileSet, Resolution) {
    let web = profile("web", "cb-web", "10.91.0.0/24", EgressMode::Internet, &[]);
    let mut iso = profile("iso", "cb-iso", "10.92.0.0/24", EgressMode::None, &[]);
    iso.block = BlockAction::Drop;
    let set = ProfileSet::new(vec![dev_profile(), web, iso]).unwrap();
    (set, api_resolution(&["192.0.2.10", "2001:db8::10"]))
}

/// The plan of [`sample`] with default settings.
pub fn sample_plan() -> HostPlan {
    let (set, res) = sample();
    HostPlan::build(&set, &PlanSettings::default(), &res).unwrap()
}

/// One allowlist profile with `n` distinct /32 addresses (for scale tests).
pub fn allowlist_plan(n: u32) -> HostPlan {
    let mut p = profile("big", "cb-big", "10.93.0.0/24", EgressMode::Allowlist, &[]);
    p.allow = (0..n)
        .map(|i| {
            // Every other address, so ranges never merge: n distinct elements.
            let a = std::net::Ipv4Addr::from(0x2c00_0000u32 + 2 * i);
            AllowEntry {
                target: corral_sandbox_core::AllowTarget::Net(std::net::IpAddr::V4(a).into()),
                ports: None,
                protocol: None,
            }
        })
        .collect();
    let set = ProfileSet::new(vec![p]).unwrap();
    HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap()
}
