//! The gateway services of a lab, for real: one dnsmasq per profile bridge
//! inside the simulated host, and a test upstream resolver in the
//! "internet" namespace whose query log shows what left the host.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use corral_gateway::resolver::{Bounds, recorded};
use corral_gateway::test_upstream::TestUpstream;
use corral_gateway::{
    Change, DnsTiming, GatewayError, HostedGateway, reserve_all, start_all, stop_all,
};

use super::{Lab, Transport};

/// The lab's upstream resolver (reached by the gateway, never by a
/// sandbox, so a reserved range is fine).
pub const UPSTREAM: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 53);

/// Starting the lab's gateways failed.
#[derive(Debug, thiserror::Error)]
pub enum GatewaysError {
    /// The upstream could not be started.
    #[error("lab gateways: cannot start the test upstream at {addr}: {source}")]
    Upstream {
        /// Where it should listen.
        addr: SocketAddr,
        /// Why it could not.
        #[source]
        source: std::io::Error,
    },
    /// A gateway could not be started.
    #[error("lab gateways: {0}")]
    Gateway(#[from] GatewayError),
    /// corral's resolver or DHCP server could not be hosted on a bridge.
    #[error("lab gateways: {0}")]
    Resolver(String),
    /// An apply of the lab's host failed.
    #[error("lab gateways: {0}")]
    Apply(String),
    /// The upstream's address could not be added.
    #[error("lab gateways: {0}")]
    Topology(#[from] super::TopologyError),
}

/// Running gateways; stopped (and their files removed) when dropped, even
/// on a panic: a dnsmasq left running would keep the simulated host alive.
#[derive(Debug)]
pub struct LabGateways {
    state: PathBuf,
    /// The upstream every gateway forwards to.
    pub upstream: TestUpstream,
    /// corral's resolver and DHCP server on each bridge whose profile has
    /// `dns = "corral"` (dnsmasq serves only its router advertisements).
    pub resolvers: Vec<HostedGateway>,
}

impl LabGateways {
    /// Starts the upstream and one gateway per profile of `lab`, with the
    /// default DNS timing, their files in a fresh directory.
    pub fn start(lab: &Lab) -> Result<Self, GatewaysError> {
        Self::start_with(lab, DnsTiming::default())
    }

    /// [`LabGateways::start`] with another DNS timing.
    pub fn start_with(lab: &Lab, timing: DnsTiming) -> Result<Self, GatewaysError> {
        let up = SocketAddr::new(UPSTREAM.into(), 53);
        // Makes the address exist (the echo port is unused; 53 is ours).
        lab.topo
            .add_internet_listener(UPSTREAM.into(), 443, Transport::Tcp)?;
        let upstream = lab
            .topo
            .internet
            .run(|| TestUpstream::bind(up))
            .and_then(|r| r)
            .map_err(|source| GatewaysError::Upstream { addr: up, source })?;
        let state = std::env::temp_dir().join(format!(
            "corral-lab-gateway-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let mut gateways = Self {
            state,
            upstream,
            resolvers: Vec::new(),
        };
        // Every bound sandbox has its lease reserved before dnsmasq starts.
        reserve_all(
            &gateways.state,
            lab.plan.bridges.iter().map(|b| &b.name),
            &lab.plan.bindings,
        )?;
        start_all(
            &gateways.state,
            &lab.profiles,
            &[up],
            timing,
            lab.plan.host_networks.as_deref().unwrap_or(&[]),
            Some(&lab.topo.host),
            &[],
        )?;
        for r in recorded(&gateways.state) {
            let hosted =
                HostedGateway::start(&gateways.state, &lab.topo.host, &r, Bounds::default());
            gateways
                .resolvers
                .push(hosted.map_err(GatewaysError::Resolver)?);
        }
        Ok(gateways)
    }

    /// The state directory holding every gateway's files.
    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    /// An apply of `set` to `lab` as `corral host apply` does it: the
    /// host's apply (bridges, sysctls, one nft transaction, read-back,
    /// verify, revocation), then the gateways' reservations and
    /// `start_all` (corral's gateways recorded, dnsmasq started where its
    /// configuration changed). Returns the host's and the gateways' wall
    /// times and how many dnsmasq gateways did not stay as they were.
    pub fn apply_again(
        &self,
        lab: &Lab,
        set: &corral_sandbox_core::ProfileSet,
    ) -> Result<(Duration, Duration, usize), GatewaysError> {
        let plan = corral_egress::plan::HostPlan::build(
            set,
            &corral_egress::plan::PlanSettings {
                host_networks: lab.plan.host_networks.clone(),
                ..Default::default()
            },
            &corral_egress::resolve::Resolution::new(),
        )
        .and_then(|p| p.with_bindings(set, lab.plan.bindings.clone()))
        .map_err(|e| GatewaysError::Apply(format!("plan: {e}")))?;
        let t = Instant::now();
        lab.host
            .apply(&plan)
            .map_err(|e| GatewaysError::Apply(format!("apply: {e}")))?;
        let host = t.elapsed();
        let t = Instant::now();
        reserve_all(
            &self.state,
            plan.bridges.iter().map(|b| &b.name),
            &plan.bindings,
        )?;
        let started = start_all(
            &self.state,
            set,
            &[SocketAddr::new(UPSTREAM.into(), 53)],
            DnsTiming::default(),
            &[],
            Some(&lab.topo.host),
            &[],
        )?;
        // corral's gateways are hosted, not restarted: only a dnsmasq that
        // did not stay counts.
        let restarted = started
            .iter()
            .filter(|s| !matches!(s.change, Change::Kept | Change::Hosted))
            .count();
        Ok((host, t.elapsed(), restarted))
    }
}

impl Drop for LabGateways {
    fn drop(&mut self) {
        self.resolvers.clear();
        let _ = stop_all(&self.state);
        let _ = std::fs::remove_dir_all(&self.state);
    }
}
