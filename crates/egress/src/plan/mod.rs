//! The host plan: what the host must *be* for a profile set, as pure data.
//!
//! ```text
//! let resolution = resolve::resolve_profiles(&profiles, &SystemResolver)?;
//! let plan = HostPlan::build(&profiles, &PlanSettings::default(), &resolution)?;
//! plan.render_nft();          // `nft -f` text, for `corral host plan`
//! nft::apply(&plan)?;         // one netlink transaction (see `nft`)
//! ```
//!
//! A [`HostPlan`] holds:
//! - [`BridgePlan`]s: one bridge per profile with its gateway addresses
//!   (helper `link` creates/adopts them);
//! - [`SysctlPlan`]s: the sysctls the host needs, with the reason for each
//!   value (helper `link` writes them to `/proc/sys`);
//! - two [`TablePlan`]s, `inet corral` and `bridge corral`: sets (address
//!   sets, and [`keyed`] sets with concatenated keys and meters), chains
//!   and rules in the small data model of [`model`] (see [`build`] for the
//!   inet rules per profile, [`bridge`] for the bridge table);
//! - the port [`bindings`]: each sandbox port bound to its MAC and
//!   addresses ([`HostPlan::with_bindings`]; they fill the bridge table's
//!   keyed sets, so binding a port is an element update).
//!
//! Building is deterministic: the same profiles, settings and resolution
//! give the same plan, byte for byte. Nothing here performs I/O.

pub mod bindings;
pub mod bridge;
pub mod build;
pub mod census;
pub mod droplog;
pub mod eval;
pub mod explain;
pub mod fail_closed;
pub mod feeds;
pub mod flow_limits;
pub mod gateway_guard;
pub mod guard;
pub mod keyed;
pub mod model;
pub mod names;
mod origins;
pub mod owner;
mod ranges;
pub mod render;
pub mod reserved;
pub mod trace;
mod unknown_ports;
pub mod vmap;

#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
#[cfg(test)]
mod tests;

use corral_sandbox_core::{BridgeName, EgressMode, ProfileName, ProfileSet};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde::Serialize;

pub use crate::resolve::Resolution;
pub use bindings::{MacAddr, MacParseError, PortBinding};
pub use keyed::{Field, KeyPart, KeyValue, KeyedKind, KeyedSetPlan, Limit, PayloadBase};
pub use model::{
    AddrFamily, AddrRange, AddrType, BaseChain, ChainPlan, ChainType, CtDir, Hook, L4Proto, LogTap,
    Match, RejectKind, RulePlan, SetKind, SetPlan, TABLE_NAME, TableFamily, TablePlan, Verdict,
    VerdictClass,
};
pub use vmap::{MapElement, MapField, MapKey, MapKeyValue, VmapPlan};

/// Default timeout of the dynamic `<profile>-dns4/6` sets. dnsmasq adds
/// elements without a timeout of its own, so this is how long an address
/// learned by DNS stays allowed; it must equal the gateway's
/// `DnsTiming::default().set_timeout` (a unit test checks it).
pub const DNS_SET_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// The Multipass daemon's default bridge.
pub const DEFAULT_MULTIPASS_BRIDGE: &str = "mpqemubr0";

/// What the plan takes from the host section of the configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanSettings {
    /// The Multipass bridge whose forward traffic is dropped entirely
    /// (default `mpqemubr0`); `None` to leave it alone.
    pub multipass_bridge: Option<BridgeName>,
    /// The uplink interface, when known: masquerade only traffic leaving by
    /// it. `None`: masquerade traffic leaving by any interface but the
    /// profile's own bridge.
    pub uplink: Option<String>,
    /// The host's directly connected networks and its routers (as /32 and
    /// /128), read from the host at apply and refresh
    /// ([`crate::hostnet::HostNetworks`]): no sandbox reaches them, and no
    /// name may resolve into them. `None` when the caller did not read
    /// them (the `hostnet` sets stay empty and `verify` cannot compare).
    pub host_networks: Option<Vec<IpNet>>,
    /// The host-wide `deny` list: destinations no sandbox reaches.
    pub deny: Vec<IpNet>,
    /// Subnets corral planned on this host before and no longer does
    /// ([`fail_closed::retire`]): no packet from or to them passes.
    pub retired: Vec<IpNet>,
    /// Ports a forced apply cut off a removed bridge: nothing they send
    /// or are sent passes ([`fail_closed`]).
    pub cut_ports: Vec<String>,
}

impl Default for PlanSettings {
    fn default() -> Self {
        Self {
            multipass_bridge: BridgeName::new(DEFAULT_MULTIPASS_BRIDGE).ok(),
            uplink: None,
            host_networks: None,
            deny: Vec::new(),
            retired: Vec::new(),
            cut_ports: Vec::new(),
        }
    }
}

/// One profile bridge the host must have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BridgePlan {
    /// Bridge interface name.
    pub name: BridgeName,
    /// The profile it serves.
    pub profile: ProfileName,
    /// Gateway address and prefix (the subnet's first host address).
    pub gateway_v4: Ipv4Net,
    /// IPv6 gateway address and prefix, when the profile has IPv6.
    pub gateway_v6: Option<Ipv6Net>,
}

/// One sysctl value the host must have. Keys of one bridge
/// (`net.ipv4.conf.<bridge>.*`) exist only once the bridge does: the host
/// applies them after creating the bridges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SysctlPlan {
    /// Dotted key, e.g. `net.ipv4.ip_forward` (path under `/proc/sys` with
    /// `.` for `/`).
    pub key: String,
    /// The value to write.
    pub value: String,
    /// Why corral needs this value.
    pub reason: String,
}

/// The whole desired host state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostPlan {
    /// Bridges, in profile order.
    pub bridges: Vec<BridgePlan>,
    /// Sysctls, in the order to apply them.
    pub sysctls: Vec<SysctlPlan>,
    /// `table inet corral`.
    pub inet: TablePlan,
    /// `table bridge corral`.
    pub bridge: TablePlan,
    /// The host networks the plan was built with (what `hostnet4/6` hold),
    /// so `verify` can tell when the host's networks have changed since;
    /// `None` when they were not read.
    pub host_networks: Option<Vec<IpNet>>,
    /// Bridge ports bound to their sandbox's MAC and addresses, sorted by
    /// port (see [`bindings`]); they fill the bridge table's keyed sets.
    pub bindings: Vec<PortBinding>,
    /// Where each allow entry landed (not sent to the kernel): what an
    /// explanation names an accept by ([`HostPlan::trace`]).
    pub origins: Vec<explain::AllowOrigin>,
    /// The entries whose answers feed each learned set (see [`feeds`]):
    /// what decides which learned elements an apply carries over.
    pub dns_feeds: feeds::DnsFeeds,
    /// The retired subnets (`retired4`/`retired6`, see [`fail_closed`]).
    pub retired: Vec<IpNet>,
    /// The cut ports (`cut_ports` in both tables, see [`fail_closed`]).
    pub cut_ports: Vec<String>,
}

/// The plan cannot be built from these inputs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// A host entry has no addresses and its profile does not allow that.
    #[error(
        "host `{host}` of profile `{profile}` resolved to no address; fix the name or set `allow_unresolved = true` on the profile"
    )]
    Unresolved {
        /// Profile.
        profile: String,
        /// Host name.
        host: String,
    },
    /// The resolution passed in has no entry for a host entry.
    #[error(
        "host `{host}` of profile `{profile}` is missing from the resolution; resolve the same profile set that is planned (resolve::resolve_profiles)"
    )]
    NotResolved {
        /// Profile.
        profile: String,
        /// Host name.
        host: String,
    },
    /// A host entry resolved to an address no name may lead to.
    #[error(
        "host `{host}` of profile `{profile}` resolved to {refused}; a name's addresses must be public (check the host's resolver and /etc/hosts, or list the address as a CIDR entry if you really mean it)"
    )]
    Refused {
        /// Profile.
        profile: String,
        /// Host name.
        host: String,
        /// The refused address and the range that holds it, as a phrase.
        refused: String,
    },
    /// A port binding does not fit the profiles.
    #[error("cannot bind port `{port}`: {problem}")]
    Binding {
        /// The port.
        port: String,
        /// What is wrong.
        problem: String,
    },
    /// Every address of a profile's subnet is bound.
    #[error(
        "profile `{profile}` has no free address left in {subnet}; delete a sandbox or give the profile a larger subnet"
    )]
    PoolExhausted {
        /// Profile.
        profile: String,
        /// Its IPv4 subnet.
        subnet: String,
    },
    /// A profile uses the Multipass bridge, whose traffic corral drops.
    #[error(
        "profile `{profile}` uses bridge `{bridge}`, which is the Multipass bridge corral blocks; give the profile its own bridge"
    )]
    MultipassBridge {
        /// Profile.
        profile: String,
        /// Bridge.
        bridge: String,
    },
}

impl HostPlan {
    /// Build the plan. Pure and deterministic.
    pub fn build(
        profiles: &ProfileSet,
        settings: &PlanSettings,
        resolution: &Resolution,
    ) -> Result<HostPlan, PlanError> {
        if let Some(mp) = &settings.multipass_bridge
            && let Some(p) = profiles.by_bridge(mp.as_str())
        {
            return Err(PlanError::MultipassBridge {
                profile: p.name.to_string(),
                bridge: mp.to_string(),
            });
        }
        let bridges = profiles
            .iter()
            .map(|p| BridgePlan {
                name: p.bridge.clone(),
                profile: p.name.clone(),
                gateway_v4: Ipv4Net::new(p.gateway_v4(), p.subnet_v4.prefix_len())
                    .unwrap_or(p.subnet_v4),
                gateway_v6: p.subnet_v6.and_then(|net| {
                    p.gateway_v6()
                        .and_then(|gw| Ipv6Net::new(gw, net.prefix_len()).ok())
                }),
            })
            .collect();
        let (inet, bridge) = build::tables(profiles, settings, resolution)?;
        Ok(HostPlan {
            bridges,
            sysctls: sysctls(profiles),
            host_networks: settings.host_networks.clone(),
            inet,
            bridge,
            bindings: Vec::new(),
            origins: origins::origins(profiles, resolution),
            dns_feeds: feeds::dns_feeds(profiles),
            retired: settings.retired.clone(),
            cut_ports: settings.cut_ports.clone(),
        })
    }

    /// The same plan with `retired` subnets and `cut_ports` (only set
    /// elements change): what an apply records and a later verify expects.
    #[must_use]
    pub fn with_fail_closed(&self, retired: Vec<IpNet>, mut cut_ports: Vec<String>) -> HostPlan {
        cut_ports.sort();
        cut_ports.dedup();
        let mut plan = self.clone();
        for s in fail_closed::retired_sets(&retired) {
            if let Some(x) = plan.inet.sets.iter_mut().find(|x| x.name == s.name) {
                *x = s;
            }
        }
        let cut = fail_closed::cut_ports_set(&cut_ports);
        for t in [&mut plan.inet, &mut plan.bridge] {
            if let Some(x) = t.keyed_sets.iter_mut().find(|x| x.name == cut.name) {
                x.clone_from(&cut);
            }
        }
        plan.retired = retired;
        plan.cut_ports = cut_ports;
        plan
    }

    /// The IPv4 and IPv6 subnets of the planned bridges.
    pub fn subnets(&self) -> Vec<IpNet> {
        self.bridges
            .iter()
            .flat_map(|b| {
                std::iter::once(IpNet::V4(b.gateway_v4.trunc()))
                    .chain(b.gateway_v6.map(|n| IpNet::V6(n.trunc())))
            })
            .collect()
    }

    /// The same plan with exactly `bindings` (checked against `profiles`,
    /// the profile set the plan was built from). Only the bridge table's
    /// set elements change, so the result can be applied to a live host
    /// with `nft::refresh_sets` (no rule rebuilt).
    pub fn with_bindings(
        &self,
        profiles: &ProfileSet,
        bindings: Vec<PortBinding>,
    ) -> Result<HostPlan, PlanError> {
        let bindings = bindings::validate(profiles, bindings)?;
        let mut plan = self.clone();
        plan.bridge = bridge::table(profiles, &bindings, &self.cut_ports);
        plan.bindings = bindings;
        Ok(plan)
    }

    /// The plan with `binding` bound, replacing an earlier binding of the
    /// same port (see [`HostPlan::with_bindings`]).
    pub fn with_binding(
        &self,
        profiles: &ProfileSet,
        binding: PortBinding,
    ) -> Result<HostPlan, PlanError> {
        let mut all = self.bindings_except(binding.port.as_str());
        all.push(binding);
        self.with_bindings(profiles, all)
    }

    /// The plan without the binding of `port` (unchanged bindings when
    /// `port` was not bound).
    pub fn without_binding(
        &self,
        profiles: &ProfileSet,
        port: &str,
    ) -> Result<HostPlan, PlanError> {
        self.with_bindings(profiles, self.bindings_except(port))
    }

    fn bindings_except(&self, port: &str) -> Vec<PortBinding> {
        self.bindings
            .iter()
            .filter(|b| b.port.as_str() != port)
            .cloned()
            .collect()
    }

    /// The binding of `port`, if bound.
    pub fn binding(&self, port: &str) -> Option<&PortBinding> {
        self.bindings.iter().find(|b| b.port.as_str() == port)
    }

    /// Both tables, `inet` first.
    pub fn tables(&self) -> [&TablePlan; 2] {
        [&self.inet, &self.bridge]
    }

    /// The table of a family.
    pub fn table(&self, family: TableFamily) -> &TablePlan {
        match family {
            TableFamily::Inet => &self.inet,
            TableFamily::Bridge => &self.bridge,
        }
    }

    /// The host networks the plan blocks (empty when they were not read).
    pub fn host_nets(&self) -> &[IpNet] {
        self.host_networks.as_deref().unwrap_or_default()
    }

    /// The plan as one `nft -f` script replacing both corral tables.
    pub fn render_nft(&self) -> String {
        render::render(self)
    }

    /// A set by name (sets live in the inet table).
    pub fn set(&self, name: &str) -> Option<&SetPlan> {
        self.inet.sets.iter().find(|s| s.name == name)
    }

    /// Total number of rules in both tables.
    pub fn rule_count(&self) -> usize {
        self.tables()
            .iter()
            .flat_map(|t| &t.chains)
            .map(|c| c.rules.len())
            .sum()
    }

    /// Total number of set elements (ranges, keys) in both tables.
    pub fn element_count(&self) -> usize {
        let ranges: usize = self
            .tables()
            .iter()
            .flat_map(|t| &t.sets)
            .map(|s| s.elements.len())
            .sum();
        let keys: usize = self
            .tables()
            .iter()
            .flat_map(|t| &t.keyed_sets)
            .map(|s| s.elements.len())
            .sum();
        ranges + keys
    }
}

/// The sysctl key of `setting` of interface `ifname` under
/// `net.<proto>.conf` (a dot in an interface name is written `/`, as
/// sysctl(8) does).
pub fn interface_sysctl(proto: &str, ifname: &str, setting: &str) -> String {
    format!("net.{proto}.conf.{}.{setting}", ifname.replace('.', "/"))
}

/// The sysctls of one profile bridge: the host answers ARP on it only for
/// the bridge's own addresses and announces only them there (so a sandbox
/// learns no other address of the host), ignores gratuitous ARP and
/// unsolicited neighbour advertisements from sandboxes (a second layer
/// behind the port bindings against neighbour poisoning), and never takes
/// a router advertisement from a sandbox.
fn bridge_sysctls(p: &corral_sandbox_core::Profile) -> Vec<SysctlPlan> {
    let br = p.bridge.as_str();
    let mut out = Vec::new();
    let mut push = |key: String, value: &str, reason: &str| {
        out.push(SysctlPlan {
            key,
            value: value.to_owned(),
            reason: reason.to_owned(),
        });
    };
    push(
        interface_sysctl("ipv4", br, "arp_ignore"),
        "1",
        "answer ARP on a sandbox bridge only for the bridge's own addresses, never the host's others",
    );
    push(
        interface_sysctl("ipv4", br, "arp_announce"),
        "2",
        "ARP requests on a sandbox bridge carry only the bridge's own address as sender",
    );
    push(
        interface_sysctl("ipv4", br, "drop_gratuitous_arp"),
        "1",
        "a sandbox cannot move the host's neighbour entries with gratuitous ARP",
    );
    if p.subnet_v6.is_some() {
        push(
            interface_sysctl("ipv6", br, "drop_unsolicited_na"),
            "1",
            "a sandbox cannot move the host's neighbour entries with unsolicited advertisements",
        );
        push(
            interface_sysctl("ipv6", br, "accept_ra"),
            "0",
            "the host never takes a route from a router advertisement on a sandbox bridge",
        );
    }
    out
}

/// Whether `key` is a per-interface sysctl of one of `bridges` (it exists
/// only once the bridge does, so it is applied after the bridges).
pub fn is_bridge_sysctl(key: &str, bridges: &[BridgePlan]) -> bool {
    bridges.iter().any(|b| {
        let name = b.name.as_str().replace('.', "/");
        key.starts_with(&format!("net.ipv4.conf.{name}."))
            || key.starts_with(&format!("net.ipv6.conf.{name}."))
    })
}

/// The sysctls a profile set needs.
///
/// `bridge-nf-call-iptables`/`-ip6tables` are planned as `1`: bridged IP
/// traffic then also traverses the inet forward chain, where a frame between
/// two ports of one corral bridge meets `<profile>-in` (established only) and
/// is dropped. That is a second, independent layer behind the bridge-family
/// drop and bridge-port isolation, and it keeps conntrack aware of bridged
/// flows. The value is written explicitly because its default differs
/// between the host and a new network namespace; the keys exist only once the
/// `br_netfilter` module is loaded.
fn sysctls(profiles: &ProfileSet) -> Vec<SysctlPlan> {
    let mut out = Vec::new();
    let routed = profiles.iter().any(|p| p.mode != EgressMode::None);
    if routed {
        out.push(SysctlPlan {
            key: "net.ipv4.ip_forward".to_owned(),
            value: "1".to_owned(),
            reason: "sandboxes reach the world through the host: IPv4 must be forwarded".to_owned(),
        });
    }
    if routed
        && profiles
            .iter()
            .any(|p| p.subnet_v6.is_some() && p.mode != EgressMode::None)
    {
        out.push(SysctlPlan {
            key: "net.ipv6.conf.all.forwarding".to_owned(),
            value: "1".to_owned(),
            reason: "a profile has IPv6 egress: IPv6 must be forwarded".to_owned(),
        });
    }
    for p in profiles {
        // `/` stands for a `.` inside one key component (a bridge name may
        // hold dots), as sysctl(8) writes it.
        let dev = p.bridge.as_str().replace('.', "/");
        for (knob, value, reason) in [
            (
                "rp_filter",
                "1",
                "strict reverse-path filtering on the bridge: a second layer behind corral's source checks (the effective value is the larger of `all` and the bridge's)",
            ),
            (
                "accept_local",
                "0",
                "a packet from a sandbox must never carry one of the host's own addresses as its source",
            ),
            (
                "route_localnet",
                "0",
                "a sandbox must never reach the host's 127.0.0.0/8 services through its bridge",
            ),
        ] {
            out.push(SysctlPlan {
                key: format!("net.ipv4.conf.{dev}.{knob}"),
                value: value.to_owned(),
                reason: reason.to_owned(),
            });
        }
    }
    out.extend(profiles.iter().flat_map(bridge_sysctls));
    if !profiles.is_empty() {
        for key in [
            "net.bridge.bridge-nf-call-iptables",
            "net.bridge.bridge-nf-call-ip6tables",
        ] {
            out.push(SysctlPlan {
                key: key.to_owned(),
                value: "1".to_owned(),
                reason: "bridged traffic also passes corral's inet rules (a second layer against sandbox-to-sandbox traffic); set explicitly because defaults differ".to_owned(),
            });
        }
    }
    out
}
