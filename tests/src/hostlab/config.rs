//! The profiles and host configuration a lab applies, and the DNS answers
//! its upstream gives.

use super::v6;
use super::{ALLOWED, ALLOWED_NAME, DNS_PORT, octet};
use corral_egress::plan::Resolution;
use std::net::Ipv4Addr;

/// What [`apply_config`]'s profile has besides its one name.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ApplyShape {
    /// A /64 beside the /24, and an IPv6 destination allowed.
    pub(super) v6: bool,
    /// `dns = "corral"`: corral's gateway serves the bridge, no dnsmasq.
    pub(super) corrals_gateway: bool,
}

pub(super) fn profile_config(bridge: &str, n: u32) -> String {
    format!(
        r#"
[[profile]]
name = "e2e"
bridge = "{bridge}"
subnet = "10.251.{n}.0/24"
mode = "allowlist"
allow = ["{ALLOWED}/tcp"]
block = "reject"
"#
    )
}

/// The profile of [`HostLab::for_apply`]: only [`ALLOWED_NAME`], learned
/// through the gateway resolver, which forwards to the lab's upstream.
pub(super) fn apply_config(bridge: &str, n: u32, shape: ApplyShape) -> String {
    let ApplyShape {
        v6,
        corrals_gateway,
    } = shape;
    let dns = if corrals_gateway {
        "dns = \"corral\"\n"
    } else {
        ""
    };
    let (subnet_v6, allow_v6) = if v6 {
        (
            format!("subnet_v6 = \"{}\"\n", v6::subnet(n)),
            format!(", \"[{}]:{}/tcp\"", v6::ALLOWED6.ip(), v6::ALLOWED6.port()),
        )
    } else {
        (String::new(), String::new())
    };
    format!(
        r#"
[host]
dns_upstreams = ["{upstream}"]

[[profile]]
name = "e2e"
bridge = "{bridge}"
subnet = "10.251.{n}.0/24"
{subnet_v6}mode = "allowlist"
{dns}allow = ["{ALLOWED_NAME}:{DNS_PORT}/tcp"{allow_v6}]
allow_unresolved = true
block = "reject"
"#,
        upstream = upstream_v4(n)
    )
}

/// Apply-time resolution for the lab's plan: the allowlisted name is
/// learned only through the gateway resolver, never at apply.
pub(super) fn lab_resolution() -> Resolution {
    let mut r = Resolution::new();
    if let Ok(name) = corral_sandbox_core::HostName::new(ALLOWED_NAME) {
        r.insert(&name, []);
    }
    r
}

/// The lab's upstream resolver, on loopback in the host namespace.
pub(super) fn upstream_v4(n: u32) -> Ipv4Addr {
    Ipv4Addr::new(127, 83, octet(n), 53)
}

/// What [`ALLOWED_NAME`] resolves to: 192.175.48.0/24 (AS112, RFC 7534),
/// public space that neither dnsmasq's rebind protection (it strips
/// documentation and private answers) nor corral's reserved list (which
/// refuses benchmarking space, 198.18.0.0/15, for names) covers. It exists
/// only in the lab's destination namespace, reached by policy routes from
/// the lab's bridge alone.
pub(super) fn dns_allowed(n: u32) -> Ipv4Addr {
    Ipv4Addr::new(192, 175, 48, octet(n))
}

/// What [`UNLISTED_NAME`] resolves to.
pub(super) fn dns_unlisted(n: u32) -> Ipv4Addr {
    Ipv4Addr::new(192, 175, 48, octet(n).wrapping_add(1))
}
