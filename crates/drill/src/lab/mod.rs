//! The namespace lab: a simulated host with per-profile bridges, sandboxes,
//! an "internet" with echo services and a LAN ([`topology`]), packet
//! probes ([`probe`]), echo listeners, and [`Lab`] — a [`Topology`] plus
//! the plan for its profiles and a [`Host`] acting in its host namespace:
//! what enforcement tests, the drill and benchmarks share.
//!
//! Typical use: [`Lab::new`] → [`Lab::control`] (bridges without rules,
//! ports attached: every probe must succeed) → [`Lab::apply`] → the same
//! probes again, now judged against the profile.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use corral_sandbox_core::{AllowTarget, EgressMode, ProfileSet, Protocol};

use corral_egress::host::{ApplyReport, Host, HostError};
use corral_egress::plan::{HostPlan, PlanError, PlanSettings};
use corral_egress::resolve::Resolution;
use topology::SANDBOXES_PER_PROFILE;

pub mod gateways;
mod listen;
pub mod topology;

/// The probes live in `corral-probes` (the canary uses them too); the lab
/// keeps its path to them.
pub use corral_probes as probe;

pub use gateways::{GatewaysError, LabGateways};
pub use listen::Listeners;
pub use probe::{Observed, Probe, ProbeResult, Transport};
pub use topology::{SandboxNs, Topology, TopologyError, probe_from};

/// Building or driving a lab failed.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// The namespaces could not be built.
    #[error(transparent)]
    Topology(#[from] TopologyError),
    /// The profiles do not make a plan.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// Apply, verify or teardown failed.
    #[error(transparent)]
    Host(#[from] HostError),
    /// A namespace could not be duplicated.
    #[error("netns lab: {0}")]
    Io(#[from] std::io::Error),
}

/// Namespaces, plan and host facade for one profile set.
#[derive(Debug)]
pub struct Lab {
    /// The namespaces.
    pub topo: Topology,
    /// The plan for the profiles.
    pub plan: HostPlan,
    /// The host facade acting in the topology's host namespace.
    pub host: Host,
    /// The profiles.
    pub profiles: ProfileSet,
}

impl Lab {
    /// Builds the topology for `profiles` and the plan with `resolution`,
    /// and makes every allowlisted address:port exist (and answer) in the
    /// internet namespace.
    pub fn new(profiles: &ProfileSet, resolution: &Resolution) -> Result<Self, LabError> {
        let lab = Self::without_endpoints(profiles, resolution)?;
        lab.topo
            .add_internet_listeners(&allowlisted_endpoints(profiles, resolution))?;
        Ok(lab)
    }

    /// Like [`Lab::new`] but without listeners on the allowlisted
    /// endpoints (benchmarks with thousands of entries bring their own).
    pub fn without_endpoints(
        profiles: &ProfileSet,
        resolution: &Resolution,
    ) -> Result<Self, LabError> {
        Self::sparse(profiles, resolution, |_| SANDBOXES_PER_PROFILE)
    }

    /// Like [`Lab::without_endpoints`], with `sandboxes(i)` sandboxes for
    /// the `i`-th profile (see [`Topology::build_with`]): hosts of hundreds
    /// of profiles.
    pub fn sparse(
        profiles: &ProfileSet,
        resolution: &Resolution,
        sandboxes: impl Fn(usize) -> usize,
    ) -> Result<Self, LabError> {
        let topo = Topology::build_with(profiles, sandboxes)?;
        let host = Host::in_netns(topo.host.try_clone()?);
        let bridges: Vec<String> = profiles.iter().map(|p| p.bridge.to_string()).collect();
        let settings = PlanSettings {
            host_networks: Some(host.networks(&bridges)?.to_nets()),
            ..PlanSettings::default()
        };
        // Every sandbox bound, as corral binds the sandboxes it creates.
        let plan = HostPlan::build(profiles, &settings, resolution)?
            .with_bindings(profiles, topo.bindings()?)?;
        Ok(Self {
            topo,
            plan,
            host,
            profiles: profiles.clone(),
        })
    }

    /// The control setup: the plan's bridges without any rules, sandbox
    /// ports attached (not isolated).
    pub fn control(&self) -> Result<(), LabError> {
        self.topo.ensure_bridges(&self.plan.bridges)?;
        self.topo.attach_sandboxes(false)?;
        Ok(())
    }

    /// The plan without any port binding (a host where no sandbox was
    /// bound: every port quarantined).
    pub fn unbound_plan(&self) -> Result<HostPlan, LabError> {
        Ok(self.plan.with_bindings(&self.profiles, Vec::new())?)
    }

    /// Applies the plan in the host namespace.
    pub fn apply(&self) -> Result<ApplyReport, LabError> {
        Ok(self.host.apply(&self.plan)?)
    }

    /// Loads `plan`'s nftables tables into the lab's host in one
    /// transaction, nothing else: the rows whose control is corral's own
    /// plan with one guard taken out swap rulesets with this (and put
    /// [`Self::plan`] back with it). The tables are replaced whole, so
    /// every set starts empty.
    pub fn load(&self, plan: &HostPlan) -> Result<(), String> {
        match self.topo.host.run(|| corral_egress::nft::apply(plan)) {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Runs a probe from a sandbox.
    pub fn probe(&self, from: &SandboxNs, p: &Probe, timeout: Duration) -> ProbeResult {
        probe_from(&from.ns, p, timeout)
    }

    /// The first sandbox of `profile`.
    ///
    /// # Panics
    /// Never for a profile of this lab's profile set (every profile gets
    /// sandboxes); a foreign name is a caller bug.
    pub fn sandbox(&self, profile: &str) -> &SandboxNs {
        match self.topo.sandbox(profile) {
            Some(s) => s,
            None => panic!("the lab has no sandbox of profile `{profile}`"),
        }
    }
}

/// One concrete endpoint per allow entry with an address: its first
/// address (for a CIDR, the first host) and its first port (443 when the
/// entry has none), TCP unless the entry says UDP. Resolved hosts use
/// their resolved addresses.
pub fn allowlisted_endpoints(
    profiles: &ProfileSet,
    resolution: &Resolution,
) -> Vec<(IpAddr, u16, Transport)> {
    let mut out = Vec::new();
    for p in profiles.iter().filter(|p| p.mode == EgressMode::Allowlist) {
        for e in &p.allow {
            let port = e.ports.map_or(443, |r| r.start());
            let t = match e.protocol {
                Some(Protocol::Udp) => Transport::Udp,
                _ => Transport::Tcp,
            };
            let ips: Vec<IpAddr> = match &e.target {
                AllowTarget::Net(net) => vec![first_host(*net)],
                AllowTarget::Host(h) => resolution
                    .get(h)
                    .map(<[IpAddr]>::to_vec)
                    .unwrap_or_default(),
                AllowTarget::Wildcard(_) => Vec::new(),
            };
            for ip in ips {
                out.push((ip, port, t));
            }
        }
    }
    out
}

/// A usable host address inside `net` (the network address itself for a
/// single address; otherwise network + 1, avoiding the all-zeros host).
pub fn first_host(net: ipnet::IpNet) -> IpAddr {
    match net {
        ipnet::IpNet::V4(n) if n.prefix_len() < 31 => {
            IpAddr::V4(std::net::Ipv4Addr::from(u32::from(n.network()) + 1))
        }
        ipnet::IpNet::V6(n) if n.prefix_len() < 127 => {
            IpAddr::V6(std::net::Ipv6Addr::from(u128::from(n.network()) + 1))
        }
        other => other.network(),
    }
}

/// A TCP probe to `ip:port`.
pub fn tcp(ip: impl Into<IpAddr>, port: u16) -> Probe {
    Probe::Tcp {
        to: SocketAddr::new(ip.into(), port),
    }
}

/// A UDP probe to `ip:port`.
pub fn udp(ip: impl Into<IpAddr>, port: u16) -> Probe {
    Probe::Udp {
        to: SocketAddr::new(ip.into(), port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sandbox_core::config::Config;

    #[test]
    fn builtin_allowlist_endpoints_are_concrete() {
        let cfg = Config::builtin_default();
        let eps = allowlisted_endpoints(&cfg.profiles, &Resolution::new());
        let want: Vec<(IpAddr, u16, Transport)> = vec![
            ("203.0.113.10".parse().unwrap(), 443, Transport::Tcp),
            ("203.0.113.1".parse().unwrap(), 8000, Transport::Tcp),
            ("2001:db8:100::10".parse().unwrap(), 443, Transport::Tcp),
        ];
        assert_eq!(eps, want);
    }
}
