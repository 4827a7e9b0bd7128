//! corral's own DHCPv4 server: leases by reservation only, replies out
//! of the client's own port (docs/gateway.md, "corral's DHCP server").
//! The piece of the gateway that replaces dnsmasq's DHCP: it serves the
//! bridges of `dns = "corral"` profiles, hosted with corral's resolver
//! ([`crate::HostedGateway`]); dnsmasq still serves every other bridge.
//!
//! - **Who gets an answer.** A client whose hardware address (`chaddr`)
//!   has no reservation gets nothing at all. One that has gets its
//!   reservation and nothing else: a DISCOVER is offered it, a REQUEST for
//!   it is acknowledged, a REQUEST for any other address is refused (NAK).
//!   A DECLINE or RELEASE changes nothing: a reservation is the port's
//!   binding, which only corral changes, so no message can take an
//!   address away from a sibling (dnsmasq holds back a declined static
//!   address for ten minutes). The client identifier (option 61) is never
//!   read: the bridge binds `chaddr` to the port, and the MAC alone names
//!   the client.
//! - **Where an answer goes.** Out of the reserved port's host-side
//!   interface only (a packet socket on the port), never over the bridge: a reply,
//!   broadcast or not, reaches its client and no sibling (dnsmasq's
//!   broadcast replies reached every port until the bridge's `postrouting`
//!   rule cut them).
//! - **What it reads.** BOOTREQUESTs for Ethernet (hardware length 6) with
//!   the DHCP magic cookie, not relayed (`giaddr` 0: no relay agent sits on
//!   a corral bridge). The policy ([`Server::reply`]) is pure: message in,
//!   reply out; [`HostedDhcp`] runs it on a bridge.

mod frame;
mod hosted;
mod lease_file;
mod policy;

use std::net::Ipv4Addr;
use std::path::Path;

use corral_egress::plan::PortBinding;
use corral_sandbox_core::{InterfaceName, MacAddr, Profile};
use dhcproto::v4::Message;
use ipnet::Ipv4Net;

use crate::{DnsService, GatewaySpec};

pub use frame::reply_frame;
pub(crate) use hosted::RecordedReservations;
pub use hosted::{DhcpCounters, HostedDhcp};
pub use lease_file::{LEASE_FILE, LeaseBook};

/// One reservation: the address a MAC gets, and the port it lives behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The sandbox's MAC.
    pub mac: MacAddr,
    /// Its address.
    pub addr: Ipv4Addr,
    /// The host-side interface of its NIC: replies leave only by it.
    pub port: InterfaceName,
    /// Its IPv6 address, when the profile has IPv6 (bound to the port
    /// like its EUI-64 link-local address).
    pub v6: Option<std::net::Ipv6Addr>,
}

impl From<&PortBinding> for Reservation {
    fn from(b: &PortBinding) -> Self {
        Self {
            mac: b.mac,
            addr: b.v4,
            port: b.port.clone(),
            v6: b.v6,
        }
    }
}

/// What every lease on one bridge carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network {
    /// The gateway: server identifier, router and reply source.
    pub gateway: Ipv4Addr,
    /// The profile's subnet: mask and broadcast address.
    pub subnet: Ipv4Net,
    /// The resolver to hand out, when the gateway runs one.
    pub dns: Option<Ipv4Addr>,
    /// Lease time, seconds.
    pub lease_secs: u32,
}

impl Network {
    /// What the gateway of `profile` hands out: the same as
    /// [`Network::of_spec`] of its spec, without needing the upstreams.
    pub fn of_profile(profile: &Profile) -> Self {
        let gateway = profile.gateway_v4();
        Self {
            gateway,
            subnet: profile.subnet_v4.trunc(),
            dns: crate::serves_dns(profile).then_some(gateway),
            lease_secs: u32::try_from(crate::spec::DEFAULT_LEASE_TIME.as_secs())
                .unwrap_or(u32::MAX),
        }
    }

    /// What `spec`'s gateway hands out.
    pub fn of_spec(spec: &GatewaySpec) -> Self {
        let dns = match spec.dns {
            DnsService::Off => None,
            _ => Some(spec.gateway_v4),
        };
        Self {
            gateway: spec.gateway_v4,
            subnet: spec.subnet_v4.trunc(),
            dns,
            lease_secs: u32::try_from(spec.lease_time.as_secs()).unwrap_or(u32::MAX),
        }
    }
}

/// The server of one bridge: its network and its reservations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    network: Network,
    reservations: Vec<Reservation>,
}

impl Server {
    /// A server for `network` with `reservations`.
    pub fn new(network: Network, reservations: Vec<Reservation>) -> Self {
        Self {
            network,
            reservations,
        }
    }

    /// The server of `spec`'s bridge, one reservation per binding on it
    /// (bindings on other bridges are left out).
    pub fn for_spec(spec: &GatewaySpec, bindings: &[PortBinding]) -> Self {
        Self::new(Network::of_spec(spec), reservations_on(spec, bindings))
    }

    /// The network it serves.
    pub fn network(&self) -> &Network {
        &self.network
    }

    /// Its reservations.
    pub fn reservations(&self) -> &[Reservation] {
        &self.reservations
    }

    /// Replaces the reservations (a port bound or unbound); leases given
    /// stay in the lease file.
    pub fn set_reservations(&mut self, reservations: Vec<Reservation>) {
        self.reservations = reservations;
    }

    fn reservation(&self, chaddr: [u8; 6]) -> Option<&Reservation> {
        self.reservations.iter().find(|r| r.mac.octets() == chaddr)
    }
}

/// The reservations of `spec`'s bridge among `bindings`.
pub fn reservations_on(spec: &GatewaySpec, bindings: &[PortBinding]) -> Vec<Reservation> {
    bindings
        .iter()
        .filter(|b| b.bridge == spec.bridge)
        .map(Reservation::from)
        .collect()
}

/// The reservations the apply recorded for the bridge whose gateway
/// directory is `dir` (`reservations.json`, written with dnsmasq's file by
/// `Gateway::set_reservations`); none when there is no file yet.
pub fn recorded_reservations(dir: &Path) -> Result<Vec<Reservation>, String> {
    let path = dir.join(crate::files::DHCP_RESERVATIONS_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let bindings: Vec<PortBinding> = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is not a reservations record: {e}", path.display()))?;
    Ok(bindings.iter().map(Reservation::from).collect())
}

/// A reply and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The message.
    pub message: Message,
    /// The port it leaves by: the client's reservation's.
    pub port: InterfaceName,
    /// The frame's destination: the client's MAC, or broadcast.
    pub to_mac: [u8; 6],
    /// The datagram's destination: the client's address, or broadcast.
    pub to_ip: Ipv4Addr,
    /// The lease an ACK grants, to be recorded.
    pub granted: Option<Granted>,
}

/// A lease an ACK grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    /// The client.
    pub mac: MacAddr,
    /// Its address.
    pub addr: Ipv4Addr,
    /// For how long, seconds.
    pub secs: u32,
}

/// The broadcast MAC.
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];
