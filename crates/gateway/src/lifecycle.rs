//! Gateway services (dnsmasq: DHCP + filtered DNS) as part of the host
//! lifecycle: started after an apply (they bind the bridges' gateway
//! addresses and fill the DNS sets the apply created), stopped before a
//! teardown, reported by status.

use std::path::Path;

use corral_sandbox_core::config::HostConfig;
use corral_sandbox_core::{BridgeName, ProfileSet};
use serde::Serialize;

use corral_egress::host::Host;

use crate::{Change, DnsTiming, GatewayError, GatewayStatus};

/// One bridge's gateway after a start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatewayReport {
    /// The profile bridge it serves.
    pub bridge: String,
    /// The dnsmasq pid; `None` (JSON `null`) where corral's own gateway
    /// serves the bridge.
    pub pid: Option<u32>,
    /// `started`, `restarted` (its configuration changed or its bridge is
    /// new), `kept` (running with the same configuration, untouched) or
    /// `hosted` (no dnsmasq: corral's own gateway serves it).
    pub change: Change,
}

/// One bridge's gateway state, for status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatewayState {
    /// The profile bridge it serves.
    pub bridge: String,
    /// Running, stopped or stale.
    #[serde(flatten)]
    pub status: GatewayStatus,
}

/// Makes one dnsmasq per profile bridge run inside `host`'s namespace
/// (restarting only the gateways whose configuration changed or whose
/// bridge is in `fresh`, created by the apply) and retires the gateways of
/// bridges no longer configured. Call after [`Host::apply`]: dnsmasq binds
/// the gateway addresses and fills the DNS sets that the apply created.
pub fn start_for_host(
    host: &Host,
    state_dir: &Path,
    profiles: &ProfileSet,
    config: &HostConfig,
    host_networks: &[ipnet::IpNet],
    fresh: &[BridgeName],
) -> Result<Vec<GatewayReport>, GatewayError> {
    let upstreams = crate::upstreams_or_host(&config.dns_upstreams, Path::new(crate::RESOLV_CONF));
    let started = crate::start_all(
        state_dir,
        profiles,
        &upstreams,
        DnsTiming::default(),
        host_networks,
        Some(host.netns()),
        fresh,
    )?;
    Ok(started
        .into_iter()
        .map(|s| GatewayReport {
            bridge: s.bridge.to_string(),
            pid: s.pid,
            change: s.change,
        })
        .collect())
}

/// Stops every gateway recorded under `state_dir`; keeps going past
/// failures and returns every error.
pub fn stop_recorded(state_dir: &Path) -> Vec<GatewayError> {
    crate::stop_all(state_dir)
}

/// The state of every gateway recorded under `state_dir`.
pub fn status_recorded(state_dir: &Path) -> Vec<GatewayState> {
    crate::status_all(state_dir)
        .into_iter()
        .map(
            |(bridge, status): (BridgeName, GatewayStatus)| GatewayState {
                bridge: bridge.to_string(),
                status,
            },
        )
        .collect()
}
