//! All gateways of a host at once, for the apply/teardown/status facade:
//! start one dnsmasq per profile bridge (restarting only those whose
//! configuration changed or whose bridge is new), retire the gateways of
//! bridges that left the configuration, stop everything on teardown.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use corral_sandbox_core::{BridgeName, ProfileSet};

use super::error::GatewayError;
use super::process::{Change, Gateway, GatewayStatus, list};
use super::resolver::ResolverSpec;
use super::resolver::recorded::record;
use super::spec::{DnsService, DnsTiming, GatewaySpec};
use corral_egress::netns::Netns;
use ipnet::IpNet;

/// The result of starting one bridge's gateway.
#[derive(Debug)]
pub struct Started {
    /// The bridge.
    pub bridge: BridgeName,
    /// The daemon's pid; `None` where corral's own gateway serves the
    /// bridge (no dnsmasq).
    pub pid: Option<u32>,
    /// Started, restarted or kept running.
    pub change: Change,
}

/// The host's upstream resolvers (`dns_upstreams`) as socket addresses.
pub fn upstreams(ips: &[IpAddr]) -> Vec<SocketAddr> {
    ips.iter().map(|ip| SocketAddr::new(*ip, 53)).collect()
}

/// Makes the gateway of every profile run with its current configuration
/// and stops and removes the gateways of bridges no longer configured. A
/// gateway already running with exactly its configuration is kept (a
/// re-apply that changes one profile restarts one daemon), unless its
/// bridge is in `fresh` (created by this apply). Every spec is checked
/// before any daemon is touched, so a bad configuration changes nothing.
/// `ns` runs the daemons inside a namespace (tests, the drill); `None` runs
/// them in corral's own.
pub fn start_all(
    state_dir: &Path,
    profiles: &ProfileSet,
    upstreams: &[SocketAddr],
    timing: DnsTiming,
    host_networks: &[IpNet],
    ns: Option<&Netns>,
    fresh: &[BridgeName],
) -> Result<Vec<Started>, GatewayError> {
    let specs = profiles
        .iter()
        .map(|p| GatewaySpec::from_profile(p, upstreams, timing))
        .collect::<Result<Vec<_>, _>>()?;
    for (bridge, _) in list(state_dir) {
        if profiles.by_bridge(bridge.as_str()).is_none() {
            Gateway::new(state_dir, &bridge).purge()?;
        }
    }
    // Each daemon is independent and mostly waits on its own start-up
    // (fork, bind, daemonise): a few at a time, so hundreds of new
    // bridges do not start one after another.
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Started, GatewayError>>>> =
        Mutex::new(specs.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..START_WORKERS.min(specs.len()) {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(spec) = specs.get(i) else { break };
                    let gw = Gateway::new(state_dir, &spec.bridge);
                    // corral's resolver, where the profile has it, is
                    // recorded for its host to pick up (or its record
                    // removed): dnsmasq then serves leases only.
                    let resolver = profiles
                        .by_bridge(spec.bridge.as_str())
                        .and_then(|p| ResolverSpec::of(p, upstreams, host_networks, timing));
                    let r = record(&gw, resolver.as_ref()).and_then(|()| {
                        if spec.dns == DnsService::Elsewhere {
                            // corral's gateway serves it: no dnsmasq (one
                            // that ran is stopped, its files kept).
                            return hosted(&gw).map(|()| Started {
                                bridge: spec.bridge.clone(),
                                pid: None,
                                change: Change::Hosted,
                            });
                        }
                        ensure_port_free(&gw, spec, fresh.contains(&spec.bridge), ns).map(
                            |(pid, change)| Started {
                                bridge: spec.bridge.clone(),
                                pid: Some(pid),
                                change,
                            },
                        )
                    });
                    if let Ok(mut all) = results.lock() {
                        all[i] = Some(r);
                    }
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut started = Vec::with_capacity(specs.len());
    for (spec, r) in specs.iter().zip(results) {
        match r {
            Some(r) => started.push(r?),
            // A worker that panicked left its slot empty.
            None => {
                return Err(GatewayError::NotRunning {
                    bridge: spec.bridge.to_string(),
                    reason: "its start did not complete".to_owned(),
                    log: Gateway::new(state_dir, &spec.bridge).paths().log(),
                });
            }
        }
    }
    Ok(started)
}

/// A bridge corral's own gateway serves: its dnsmasq, if one runs, is
/// stopped (the record is written first, so corral's gateway may already
/// be taking over), and its reservations file kept for corral's server.
fn hosted(gw: &Gateway) -> Result<(), GatewayError> {
    gw.stop()?;
    crate::reservations::ensure_file(gw)
}

/// How long a dnsmasq start that finds the gateway's port held is tried
/// again: a profile that leaves corral's resolver has its record removed
/// before the ruleset changes, and the resolver lets go of the port within
/// its record check (a quarter second), wherever it is hosted.
const PORT_HELD_RETRY: Duration = Duration::from_secs(3);

/// [`Gateway::ensure`], tried again while the port is held.
fn ensure_port_free(
    gw: &Gateway,
    spec: &GatewaySpec,
    force: bool,
    ns: Option<&Netns>,
) -> Result<(u32, Change), GatewayError> {
    let deadline = Instant::now() + PORT_HELD_RETRY;
    loop {
        match gw.ensure(spec, force, ns) {
            Err(GatewayError::Startup { stderr, .. })
                if stderr.contains("Address already in use") && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(100));
            }
            r => return r,
        }
    }
}

/// Gateways started at once: a start is mostly waiting on dnsmasq (spawn,
/// daemonise, pid file), so many more than the cores are in flight
/// (measured in docs/benchmarks.md, "A host of many profiles").
const START_WORKERS: usize = 32;

/// Stops and removes every gateway under `state_dir`, continuing past
/// failures; returns every error (empty when all went).
pub fn stop_all(state_dir: &Path) -> Vec<GatewayError> {
    list(state_dir)
        .into_iter()
        .filter_map(|(bridge, _)| Gateway::new(state_dir, &bridge).purge().err())
        .collect()
}

/// The status of every gateway corral has files for, by bridge (for `corral
/// host status`, which needs no profiles to report it).
pub fn status_all(state_dir: &Path) -> Vec<(BridgeName, GatewayStatus)> {
    list(state_dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::tests::profile;
    use corral_sandbox_core::EgressMode;

    #[test]
    fn a_bad_spec_touches_no_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let set =
            ProfileSet::new(vec![profile(EgressMode::Internet, &[], "10.99.5.0/24")]).unwrap();
        // Internet mode without upstreams is refused before anything runs.
        let err =
            start_all(dir.path(), &set, &[], DnsTiming::default(), &[], None, &[]).unwrap_err();
        assert!(matches!(err, GatewayError::NoUpstreams { .. }), "{err}");
        assert!(status_all(dir.path()).is_empty());
        assert!(stop_all(dir.path()).is_empty());
    }

    #[test]
    fn upstreams_use_port_53() {
        let ups = upstreams(&["198.18.0.53".parse().unwrap()]);
        assert_eq!(ups, vec!["198.18.0.53:53".parse::<SocketAddr>().unwrap()]);
    }
}
