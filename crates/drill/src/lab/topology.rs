//! A simulated host for real-packet tests, the drill and benchmarks.
//!
//! ```text
//!   sandbox nss ──veth── [profile bridges]  host ns  ──up0── internet ns
//!   (2 per profile,        (made by apply or          (public, private and
//!    static addresses,      ensure_bridges)            metadata addresses,
//!    default via gateway)                              TCP/UDP echo)
//!                                        └──lan0── LAN ns (one host, on a
//!                                                  private and a public-looking
//!                                                  network)
//! ```
//!
//! Every namespace is anonymous and owned by the [`Topology`]; dropping it
//! removes everything. Routes and addresses are such that every probe
//! succeeds while the host has no corral rules (the control), so a probe
//! that fails after apply proves the rules blocked it.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use corral_sandbox_core::ProfileSet;
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::Transport;
use super::listen::Listeners;
use super::probe::{self, Observed, Probe, ProbeResult};
use corral_egress::link::{LinkError, Links};
use corral_egress::netns::Netns;
use corral_egress::plan::{BridgePlan, MacAddr, PortBinding};
use corral_egress::sysctl::Sysctls;

/// Host side of the uplink veth.
pub const UPLINK_IF: &str = "up0";
/// Host side of the LAN veth.
pub const LAN_IF: &str = "lan0";
/// The host's uplink address (what a real host's LAN/DHCP address is).
pub const HOST_UPLINK_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 100, 2);
/// The "internet" router on the uplink.
pub const ROUTER_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 100, 1);
/// The host's IPv6 uplink address.
pub const HOST_UPLINK_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 2);
/// The IPv6 router on the uplink.
pub const ROUTER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1);
/// The host's address on the LAN.
pub const HOST_LAN_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 50, 1);
/// The one other machine on the LAN.
pub const LAN_HOST_V4: Ipv4Addr = Ipv4Addr::new(192, 168, 50, 10);
/// The host's address in the LAN's public-looking network: a host whose
/// LAN or uplink is not private space (a provider's /24, a lab).
pub const HOST_LAN_PUBLIC_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// The LAN machine's address in that network (a neighbour of the host).
pub const LAN_PUBLIC_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
/// IPv6 twin of [`HOST_LAN_PUBLIC_V4`].
pub const HOST_LAN_PUBLIC_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x50, 0, 0, 0, 0, 1);
/// IPv6 twin of [`LAN_PUBLIC_V4`].
pub const LAN_PUBLIC_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x50, 0, 0, 0, 0, 0x10);
/// Public-looking IPv4 addresses in the internet namespace.
pub const PUBLIC_V4: [Ipv4Addr; 4] = [
    Ipv4Addr::new(198, 51, 100, 10),
    Ipv4Addr::new(198, 51, 100, 20),
    Ipv4Addr::new(203, 0, 113, 10),
    Ipv4Addr::new(203, 0, 113, 20),
];
/// Public-looking IPv6 addresses in the internet namespace.
pub const PUBLIC_V6: [Ipv6Addr; 2] = [
    Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x10),
    Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x20),
];
/// Private, shared and metadata addresses in the internet namespace: an
/// `internet` profile must not reach these.
pub const PRIVATE: [IpAddr; 6] = [
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 10)),
    IpAddr::V4(Ipv4Addr::new(172, 16, 0, 10)),
    IpAddr::V4(Ipv4Addr::new(192, 168, 1, 10)),
    IpAddr::V4(Ipv4Addr::new(100, 64, 0, 10)),
    IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)),
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0xdead, 0, 0, 0, 0, 0, 0x10)),
];
/// A public-looking resolver (UDP and TCP 53): DNS to it must be blocked.
pub const PUBLIC_RESOLVER_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 53);
/// IPv6 twin of [`PUBLIC_RESOLVER_V4`].
pub const PUBLIC_RESOLVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 0x53);
/// TCP echo ports on every internet address.
pub const TCP_PORTS: [u16; 3] = [80, 443, 8443];
/// UDP echo ports on every internet address.
pub const UDP_PORTS: [u16; 2] = [443, 4500];
/// A host service (TCP, every host address): sandboxes must not reach it.
pub const HOST_SERVICE_PORT: u16 = 2222;
/// Sandboxes listen on this TCP and UDP port (sandbox ↔ sandbox probes).
pub const SANDBOX_PORT: u16 = 7000;
/// LAN host TCP/UDP port.
pub const LAN_PORT: u16 = 22;
/// Sandboxes per profile bridge.
pub const SANDBOXES_PER_PROFILE: usize = 2;

/// The topology could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// Creating or entering a namespace, or a socket, failed.
    #[error("netns topology: {0}")]
    Io(#[from] io::Error),
    /// A link, address or route could not be set up.
    #[error("netns topology: {0}")]
    Link(#[from] LinkError),
    /// A sandbox did not become reachable from the host in time.
    #[error(
        "netns topology: sandbox address {addr} not reachable from the host after attach (last probe: {last})"
    )]
    NotReady {
        /// The sandbox address.
        addr: IpAddr,
        /// What the last readiness probe saw.
        last: String,
    },
    /// A sysctl in one of the namespaces could not be written.
    #[error("netns topology: {0}")]
    Sysctl(#[from] corral_egress::sysctl::SysctlError),
}

/// One simulated sandbox.
#[derive(Debug)]
pub struct SandboxNs {
    /// Name for reports, e.g. `internet-1`.
    pub name: String,
    /// Its profile.
    pub profile: String,
    /// The profile's bridge.
    pub bridge: String,
    /// Host-side veth (the bridge port).
    pub port: String,
    /// The MAC of its `eth0` (chosen like corral chooses a sandbox's: from
    /// its IPv4 address, see `PortBinding::allocate`).
    pub mac: MacAddr,
    /// IPv4 address.
    pub v4: Ipv4Addr,
    /// IPv6 address when the profile has IPv6.
    pub v6: Option<Ipv6Addr>,
    /// Gateway addresses.
    pub gateway_v4: Ipv4Addr,
    /// IPv6 gateway.
    pub gateway_v6: Option<Ipv6Addr>,
    /// The namespace.
    pub ns: Netns,
    _listeners: Listeners,
}

impl SandboxNs {
    /// The flow `p` sends from this sandbox, as the plan's evaluator and
    /// `explain` take it: from its IPv6 address to an IPv6 destination
    /// (when it has one), else from its IPv4 address.
    pub fn flow_of(&self, p: &Probe) -> corral_egress::plan::eval::Flow {
        let dst = p.ip();
        let (protocol, dport) = match p {
            Probe::Tcp { to } => (6, Some(to.port())),
            Probe::Udp { to } => (17, Some(to.port())),
            Probe::Icmp { to } => (if to.is_ipv4() { 1 } else { 58 }, None),
        };
        let src = match (dst, self.v6) {
            (IpAddr::V6(_), Some(v6)) => IpAddr::V6(v6),
            _ => IpAddr::V4(self.v4),
        };
        corral_egress::plan::eval::Flow {
            protocol,
            src,
            dst,
            dport,
        }
    }
}

/// The whole simulated host.
#[derive(Debug)]
pub struct Topology {
    /// The simulated host (bridges, uplink, LAN, corral's tables).
    pub host: Netns,
    /// The "internet" behind the uplink.
    pub internet: Netns,
    /// One machine on the host's LAN.
    pub lan: Netns,
    /// Sandboxes, [`SANDBOXES_PER_PROFILE`] per profile, in profile order.
    pub sandboxes: Vec<SandboxNs>,
    internet_listeners: Listeners,
    _host_listeners: Listeners,
    _lan_listeners: Listeners,
}

impl Topology {
    /// Builds the namespaces, links, addresses, routes and listeners for
    /// `profiles`. Sandbox ports are NOT attached: call
    /// [`Topology::attach_sandboxes`] once the bridges exist.
    pub fn build(profiles: &ProfileSet) -> Result<Self, TopologyError> {
        Self::build_with(profiles, |_| SANDBOXES_PER_PROFILE)
    }

    /// [`Topology::build`] with `sandboxes(i)` sandboxes for the `i`-th
    /// profile (at most [`SANDBOXES_PER_PROFILE`]): a host of hundreds of
    /// profiles, of which only a few are probed, without a namespace per
    /// sandbox of every one.
    pub fn build_with(
        profiles: &ProfileSet,
        sandboxes_of: impl Fn(usize) -> usize,
    ) -> Result<Self, TopologyError> {
        let host = new_ns()?;
        let internet = new_ns()?;
        let lan = new_ns()?;
        host.run(|| {
            let s = Sysctls::default();
            for key in ["net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"] {
                s.apply_one(&corral_egress::plan::SysctlPlan {
                    key: key.into(),
                    value: "1".into(),
                    reason: "route between the simulated networks".into(),
                })?;
            }
            Ok::<_, corral_egress::sysctl::SysctlError>(())
        })??;

        let mut sandboxes = Vec::new();
        for (pi, p) in profiles.iter().enumerate() {
            for si in 0..sandboxes_of(pi).min(SANDBOXES_PER_PROFILE) {
                let ns = new_ns()?;
                let offset = 10 + u32::try_from(si).unwrap_or(0);
                let v4 = Ipv4Addr::from(u32::from(p.subnet_v4.network()) + offset);
                let o = v4.octets();
                let mac = MacAddr([0x02, 0xc0, o[0], o[1], o[2], o[3]]);
                // As corral binds a sandbox: in a /64 the address the
                // sandbox forms by SLAAC from the gateway's announcement.
                let v6 = p.subnet_v6.map(|n| match n.prefix_len() {
                    corral_egress::plan::bindings::SLAAC_PREFIX_LEN => {
                        corral_egress::plan::bindings::slaac_address(n, mac)
                    }
                    _ => Ipv6Addr::from(u128::from(n.network()) + u128::from(offset)),
                });
                let listeners = Listeners::start(&ns)?;
                sandboxes.push(SandboxNs {
                    mac,
                    name: format!("{}-{}", p.name, si + 1),
                    profile: p.name.to_string(),
                    bridge: p.bridge.to_string(),
                    port: format!("c{pi}s{si}"),
                    v4,
                    v6,
                    gateway_v4: p.gateway_v4(),
                    gateway_v6: p.gateway_v6(),
                    ns,
                    _listeners: listeners,
                });
            }
        }

        // Host side: veths (peers created inside their namespaces), uplink
        // and LAN addresses, default routes.
        host.run_async(|| async {
            let links = Links::connect()?;
            links
                .create_veth(UPLINK_IF, "eth0", Some(internet.fd()))
                .await?;
            links.create_veth(LAN_IF, "eth0", Some(lan.fd())).await?;
            for sb in &sandboxes {
                links
                    .create_veth(&sb.port, "eth0", Some(sb.ns.fd()))
                    .await?;
                links.set_up(&sb.port).await?;
            }
            links
                .add_address(UPLINK_IF, v4net(HOST_UPLINK_V4, 24))
                .await?;
            links
                .add_address(UPLINK_IF, v6net(HOST_UPLINK_V6, 64))
                .await?;
            links.add_address(LAN_IF, v4net(HOST_LAN_V4, 24)).await?;
            links
                .add_address(LAN_IF, v4net(HOST_LAN_PUBLIC_V4, 24))
                .await?;
            links
                .add_address(LAN_IF, v6net(HOST_LAN_PUBLIC_V6, 64))
                .await?;
            links.set_up(UPLINK_IF).await?;
            links.set_up(LAN_IF).await?;
            links.add_default_route(IpAddr::V4(ROUTER_V4)).await?;
            links.add_default_route(IpAddr::V6(ROUTER_V6)).await?;
            Ok::<_, LinkError>(())
        })??;

        // Internet: every address on lo, routes back to the sandbox subnets
        // (no NAT is needed for the control; corral may add its own).
        let back: Vec<IpNet> = profiles
            .iter()
            .flat_map(|p| std::iter::once(IpNet::V4(p.subnet_v4)).chain(p.subnet_v6.map(IpNet::V6)))
            .collect();
        internet.run_async(|| async {
            let links = Links::connect()?;
            links.add_address("eth0", v4net(ROUTER_V4, 24)).await?;
            links.add_address("eth0", v6net(ROUTER_V6, 64)).await?;
            links.set_up("eth0").await?;
            for ip in internet_addresses() {
                links.add_address("lo", host_net(ip)).await?;
            }
            for net in &back {
                let via = match net {
                    IpNet::V4(_) => IpAddr::V4(HOST_UPLINK_V4),
                    IpNet::V6(_) => IpAddr::V6(HOST_UPLINK_V6),
                };
                links.add_route(*net, via).await?;
            }
            Ok::<_, LinkError>(())
        })??;

        lan.run_async(|| async {
            let links = Links::connect()?;
            links.add_address("eth0", v4net(LAN_HOST_V4, 24)).await?;
            links.add_address("eth0", v4net(LAN_PUBLIC_V4, 24)).await?;
            links.add_address("eth0", v6net(LAN_PUBLIC_V6, 64)).await?;
            links.set_up("eth0").await?;
            links.add_default_route(IpAddr::V4(HOST_LAN_V4)).await?;
            links
                .add_default_route(IpAddr::V6(HOST_LAN_PUBLIC_V6))
                .await?;
            Ok::<_, LinkError>(())
        })??;

        for sb in &sandboxes {
            // The sandbox takes an ARP update to an entry of any age. The
            // kernel ignores a non-gratuitous one to an entry younger than
            // `locktime` (1 s by default): an attacker simply waits that
            // out, and the drill's attacks need not.
            sb.ns.run(|| {
                Sysctls::default().apply_one(&corral_egress::plan::SysctlPlan {
                    key: "net.ipv4.neigh.eth0.locktime".into(),
                    value: "0".into(),
                    reason: "ARP updates taken at any age, as after an attacker's wait".into(),
                })
            })??;
            sb.ns.run_async(|| async {
                let links = Links::connect()?;
                let prefix = prefix_of(profiles, &sb.profile);
                links.set_mac("eth0", sb.mac.octets()).await?;
                links.add_address("eth0", v4net(sb.v4, prefix.0)).await?;
                if let (Some(v6), Some(len)) = (sb.v6, prefix.1) {
                    links.add_address("eth0", v6net(v6, len)).await?;
                }
                links.set_up("eth0").await?;
                links.add_default_route(IpAddr::V4(sb.gateway_v4)).await?;
                if let Some(gw) = sb.gateway_v6 {
                    links.add_default_route(IpAddr::V6(gw)).await?;
                }
                Ok::<_, LinkError>(())
            })??;
            for ip in std::iter::once(IpAddr::V4(sb.v4)).chain(sb.v6.map(IpAddr::V6)) {
                for t in [Transport::Tcp, Transport::Udp] {
                    sb._listeners.add(SocketAddr::new(ip, SANDBOX_PORT), t)?;
                }
            }
        }

        let internet_listeners = Listeners::start(&internet)?;
        for ip in internet_addresses() {
            for port in TCP_PORTS {
                internet_listeners.add(SocketAddr::new(ip, port), Transport::Tcp)?;
            }
            for port in UDP_PORTS {
                internet_listeners.add(SocketAddr::new(ip, port), Transport::Udp)?;
            }
        }
        for ip in [
            IpAddr::V4(PUBLIC_RESOLVER_V4),
            IpAddr::V6(PUBLIC_RESOLVER_V6),
        ] {
            for t in [Transport::Tcp, Transport::Udp] {
                internet_listeners.add(SocketAddr::new(ip, 53), t)?;
            }
        }
        let host_listeners = Listeners::start(&host)?;
        for ip in [
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        ] {
            host_listeners.add(SocketAddr::new(ip, HOST_SERVICE_PORT), Transport::Tcp)?;
        }
        let lan_listeners = Listeners::start(&lan)?;
        for ip in [
            IpAddr::V4(LAN_HOST_V4),
            IpAddr::V4(LAN_PUBLIC_V4),
            IpAddr::V6(LAN_PUBLIC_V6),
        ] {
            for t in [Transport::Tcp, Transport::Udp] {
                lan_listeners.add(SocketAddr::new(ip, LAN_PORT), t)?;
            }
        }

        // Prime neighbour caches on the uplink and LAN from the far side,
        // and the host's entry for the LAN machine from the host. The host,
        // a router, otherwise loses its first IPv6 neighbour solicitation
        // and the first forwarded packet waits a full retransmit second
        // (measured: ~1010 ms once, 0 ms after) — longer than a probe.
        for (ns, ip) in [
            (&internet, IpAddr::V4(HOST_UPLINK_V4)),
            (&internet, IpAddr::V6(HOST_UPLINK_V6)),
            (&lan, IpAddr::V4(HOST_LAN_V4)),
            (&lan, IpAddr::V6(HOST_LAN_PUBLIC_V6)),
            (&host, IpAddr::V6(LAN_PUBLIC_V6)),
            (&host, IpAddr::V4(LAN_PUBLIC_V4)),
        ] {
            let r = probe_from(ns, &Probe::Icmp { to: ip }, Duration::from_secs(2));
            if !r.observed.reached() {
                return Err(TopologyError::NotReady {
                    addr: ip,
                    last: format!("{:?}", r.observed),
                });
            }
        }

        Ok(Self {
            host,
            internet,
            lan,
            sandboxes,
            internet_listeners,
            _host_listeners: host_listeners,
            _lan_listeners: lan_listeners,
        })
    }

    /// Makes an extra address exist in the internet namespace, with an echo
    /// listener on `port` (the drill adds each allowlisted address:port).
    pub fn add_internet_listener(
        &self,
        ip: IpAddr,
        port: u16,
        transport: Transport,
    ) -> Result<(), TopologyError> {
        self.add_internet_listeners(&[(ip, port, transport)])
    }

    /// Like [`Topology::add_internet_listener`] for many endpoints, with one
    /// netlink session for all the addresses.
    pub fn add_internet_listeners(
        &self,
        endpoints: &[(IpAddr, u16, Transport)],
    ) -> Result<(), TopologyError> {
        self.internet.run_async(|| async {
            let links = Links::connect()?;
            let have = links.addresses("lo").await?;
            let mut added = std::collections::BTreeSet::new();
            for (ip, _, _) in endpoints {
                let net = host_net(*ip);
                if !have.contains(&net) && added.insert(net) {
                    links.add_address("lo", net).await?;
                }
            }
            Ok::<_, LinkError>(())
        })??;
        for (ip, port, transport) in endpoints {
            match self
                .internet_listeners
                .add(SocketAddr::new(*ip, *port), *transport)
            {
                // Already listening there (a built-in or repeated endpoint).
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Creates the bridges of `plan` without any rules (the control setup;
    /// `host apply` would create the same bridges).
    pub fn ensure_bridges(&self, bridges: &[BridgePlan]) -> Result<(), TopologyError> {
        self.host.run_async(|| async {
            let links = Links::connect()?;
            for b in bridges {
                links.ensure_bridge(b).await?;
            }
            Ok::<_, LinkError>(())
        })??;
        Ok(())
    }

    /// Attaches every sandbox port to its profile bridge, with bridge-port
    /// isolation on or off, like a provider hot-plugging a NIC.
    pub fn attach_sandboxes(&self, isolated: bool) -> Result<(), TopologyError> {
        self.host.run_async(|| async {
            let links = Links::connect()?;
            for sb in &self.sandboxes {
                links.attach_port(&sb.port, &sb.bridge, isolated).await?;
            }
            Ok::<_, LinkError>(())
        })??;
        self.wait_ready(Duration::from_secs(5))
    }

    /// Waits until the host reaches every sandbox address (IPv4 and IPv6)
    /// with an ICMP echo. A freshly attached port needs a moment (carrier,
    /// IPv6 prefix route, neighbour discovery); probing before that would
    /// make a control fail for reasons that have nothing to do with rules.
    /// Host → sandbox echo is allowed by corral's rules (replies are
    /// established), so this works before and after apply.
    pub fn wait_ready(&self, limit: Duration) -> Result<(), TopologyError> {
        let deadline = std::time::Instant::now() + limit;
        let targets: Vec<IpAddr> = self
            .sandboxes
            .iter()
            .flat_map(|s| std::iter::once(IpAddr::V4(s.v4)).chain(s.v6.map(IpAddr::V6)))
            .collect();
        for ip in targets {
            loop {
                let r = probe_from(
                    &self.host,
                    &Probe::Icmp { to: ip },
                    Duration::from_millis(200),
                );
                if r.observed.reached() {
                    break;
                }
                if std::time::Instant::now() >= deadline {
                    return Err(TopologyError::NotReady {
                        addr: ip,
                        last: format!("{:?}", r.observed),
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// Every sandbox's port bound to its MAC and addresses, as corral
    /// binds a sandbox it creates.
    pub fn bindings(&self) -> Result<Vec<PortBinding>, TopologyError> {
        self.sandboxes
            .iter()
            .map(|sb| {
                Ok(PortBinding {
                    port: corral_sandbox_core::InterfaceName::new(sb.port.clone())
                        .map_err(|e| TopologyError::Io(io::Error::other(e.to_string())))?,
                    bridge: corral_sandbox_core::BridgeName::new(sb.bridge.clone())
                        .map_err(|e| TopologyError::Io(io::Error::other(e.to_string())))?,
                    mac: sb.mac,
                    v4: sb.v4,
                    v6: sb.v6,
                })
            })
            .collect()
    }

    /// The sandboxes of one profile.
    pub fn sandboxes_of<'a>(&'a self, profile: &'a str) -> impl Iterator<Item = &'a SandboxNs> {
        self.sandboxes.iter().filter(move |s| s.profile == profile)
    }

    /// The first sandbox of a profile.
    pub fn sandbox(&self, profile: &str) -> Option<&SandboxNs> {
        self.sandboxes.iter().find(|s| s.profile == profile)
    }
}

/// Runs one probe inside `ns`; a failure to enter the namespace is an
/// [`Observed::Error`], never a pass.
pub fn probe_from(ns: &Netns, p: &Probe, timeout: Duration) -> ProbeResult {
    ns.run(|| probe::run(p, timeout))
        .unwrap_or_else(|e| ProbeResult {
            observed: Observed::Error(format!("cannot enter the namespace: {e}")),
            ms: 0,
        })
}

/// Every address the internet namespace holds at build time.
pub fn internet_addresses() -> Vec<IpAddr> {
    PUBLIC_V4
        .iter()
        .map(|a| IpAddr::V4(*a))
        .chain(PUBLIC_V6.iter().map(|a| IpAddr::V6(*a)))
        .chain(PRIVATE)
        .chain([
            IpAddr::V4(PUBLIC_RESOLVER_V4),
            IpAddr::V6(PUBLIC_RESOLVER_V6),
        ])
        .collect()
}

/// A fresh namespace where IPv6 addresses are usable at once (no duplicate
/// address detection: every address here is unique by construction).
fn new_ns() -> Result<Netns, TopologyError> {
    let ns = Netns::new()?;
    ns.run(|| {
        let s = Sysctls::default();
        for key in [
            "net.ipv6.conf.all.accept_dad",
            "net.ipv6.conf.default.accept_dad",
        ] {
            s.apply_one(&corral_egress::plan::SysctlPlan {
                key: key.into(),
                value: "0".into(),
                reason: "addresses usable at once".into(),
            })?;
        }
        Ok::<_, corral_egress::sysctl::SysctlError>(())
    })??;
    Ok(ns)
}

fn prefix_of(profiles: &ProfileSet, name: &str) -> (u8, Option<u8>) {
    profiles.get(name).map_or((24, None), |p| {
        (
            p.subnet_v4.prefix_len(),
            p.subnet_v6.map(|n| n.prefix_len()),
        )
    })
}

fn v4net(a: Ipv4Addr, len: u8) -> IpNet {
    // Callers pass prefix lengths ≤ 32 (constants or validated profiles).
    IpNet::V4(Ipv4Net::new(a, len).unwrap_or_else(|_| Ipv4Net::from(a)))
}

fn v6net(a: Ipv6Addr, len: u8) -> IpNet {
    IpNet::V6(Ipv6Net::new(a, len).unwrap_or_else(|_| Ipv6Net::from(a)))
}

fn host_net(ip: IpAddr) -> IpNet {
    IpNet::from(ip)
}
