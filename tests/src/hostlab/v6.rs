//! The IPv6 half of [`HostLab::for_apply_v6`]: the profile gets a /64
//! (its gateway announces it; a container forms its address by SLAAC), and
//! the destination namespace answers on two global IPv6 addresses, one
//! allowlisted and one not, reached only from the lab's bridge (a policy
//! rule per family, as for IPv4).
//!
//! ```text
//!  container ── bridge ce2eN ── host ── veth ── dest netns
//!  fd00:e2e:N::<EUI-64>/64      2001:db8:ffe2::1/64 ↔ ::2
//!                                                lo: 2001:db8:e2e::10, ::20
//! ```

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use corral_drill::lab::Transport;
use corral_egress::link::Links;
use corral_egress::netns::Netns;
use ipnet::{IpNet, Ipv6Net};
use netlink_packet_route::rule::{RuleAction, RuleMessage};

use super::{HostLab, LabError, netlink_error};

/// The allowlisted IPv6 destination of [`HostLab::for_apply_v6`]'s profile.
pub const ALLOWED6: SocketAddr = SocketAddr::new(
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xe2e, 0, 0, 0, 0, 0x10)),
    8080,
);
/// An IPv6 destination on no allowlist, on the same port.
pub const UNLISTED6: SocketAddr = SocketAddr::new(
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xe2e, 0, 0, 0, 0, 0x20)),
    8080,
);
/// The network both destinations are in (routed to the destination
/// namespace from the lab's bridge only).
const DEST_NET: &str = "2001:db8:e2e::/64";
const LINK6_HOST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xffe2, 0, 0, 0, 0, 1);
const LINK6_DEST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xffe2, 0, 0, 0, 0, 2);

/// The profile's IPv6 subnet for lab number `n`.
pub(crate) fn subnet(n: u32) -> String {
    format!("fd00:e2e:{n:x}::/64")
}

fn net6(a: Ipv6Addr, len: u8) -> IpNet {
    IpNet::V6(Ipv6Net::new(a, len).unwrap_or_else(|_| Ipv6Net::from(a)))
}

/// Addresses, routes and listeners of the destination side.
pub(crate) fn build_destination(lab: &HostLab) -> Result<(), LabError> {
    let veth = lab.veth.clone();
    Netns::current()?.run_async(|| async {
        Links::connect()?
            .add_address(&veth, net6(LINK6_HOST, 64))
            .await
    })??;
    let subnet: IpNet = subnet(lab.n)
        .parse()
        .map_err(|e| LabError::Plan(format!("lab subnet: {e}")))?;
    lab._dest.run_async(|| async {
        let links = Links::connect()?;
        links.add_address("eth0", net6(LINK6_DEST, 64)).await?;
        for ip in [ALLOWED6.ip(), UNLISTED6.ip()] {
            links.add_address("lo", IpNet::from(ip)).await?;
        }
        links.add_route(subnet, IpAddr::V6(LINK6_HOST)).await
    })??;
    for addr in [ALLOWED6, UNLISTED6] {
        lab._dest_listeners.add(addr, Transport::Tcp)?;
    }
    Ok(())
}

/// `iif <bridge> lookup <table>` then `iif <bridge> unreachable`, IPv6.
pub(crate) fn add_policy_routes(
    lab: &HostLab,
    bridge: &str,
    priority: u32,
) -> Result<Vec<RuleMessage>, LabError> {
    let table = lab.table;
    let bridge = bridge.to_owned();
    Netns::current()?.run_async(|| async move {
        let links = Links::connect()?;
        let handle = links.handle();
        let dest: Ipv6Net = DEST_NET
            .parse()
            .map_err(|e| LabError::Plan(format!("{DEST_NET}: {e}")))?;
        let msg = rtnetlink::RouteMessageBuilder::<Ipv6Addr>::new()
            .destination_prefix(dest.addr(), dest.prefix_len())
            .gateway(LINK6_DEST)
            .table_id(table)
            .build();
        handle
            .route()
            .add(msg)
            .execute()
            .await
            .map_err(|e| netlink_error(&format!("add route {dest} table {table}"), e))?;
        let mut rules = Vec::new();
        for (prio, action) in [
            (priority, RuleAction::ToTable),
            (priority + 1, RuleAction::Unreachable),
        ] {
            let mut req = handle
                .rule()
                .add()
                .v6()
                .input_interface(bridge.clone())
                .priority(prio)
                .action(action);
            if action == RuleAction::ToTable {
                req = req.table_id(table);
            }
            let msg = req.message_mut().clone();
            req.execute()
                .await
                .map_err(|e| netlink_error(&format!("add IPv6 rule priority {prio}"), e))?;
            rules.push(msg);
        }
        Ok::<_, LabError>(rules)
    })?
}

/// The profile's IPv6 subnet of `lab` (a [`HostLab::for_apply_v6`] lab).
///
/// # Panics
/// When the lab has no IPv6 subnet: a caller bug.
pub fn subnet_of(lab: &HostLab) -> Ipv6Net {
    match subnet(lab.n).parse() {
        Ok(n) => n,
        Err(e) => panic!("lab subnet: {e}"),
    }
}
