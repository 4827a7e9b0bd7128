//! Running a canary plan: every check and every control at once (so a run
//! takes about as long as its slowest check), the checks from inside the
//! sandbox's network, the controls from the host's.
//!
//! - A container's checks run on throwaway threads that joined its network
//!   namespace (`/proc/<init pid>/ns/net`); nothing runs in the guest. Its
//!   sibling check also watches the bridge from the host ([`super::sibling`]).
//! - A VM's checks run in the guest through exec ([`super::guest`]).

use std::net::SocketAddr;
use std::time::Duration;

use corral_egress::netns::Netns;
use corral_sandbox_core::sandbox::Sandbox;
use corral_sandbox_core::verify::{
    CanaryCheck, CanaryPlan, CheckKind, CheckResult, ControlResult, DNS_PORT, Observed, ProbeTarget,
};

use super::guest;
use super::host_side::HostSide;
use super::probe::{self, Seen};
use super::sibling;

/// Where the checks run.
#[derive(Debug)]
pub enum SandboxSide<'a> {
    /// Inside the sandbox's network namespace, from the host.
    Namespace {
        /// The namespace.
        ns: Netns,
        /// The resolver the sandbox's lease names (its gateway), for lookups.
        resolver: Option<SocketAddr>,
    },
    /// Inside the guest, through exec.
    Guest(&'a dyn Sandbox),
}

/// One probe of `target` from the calling thread's stack; lookups without
/// a server go to `resolver`.
pub fn probe_here(target: &ProbeTarget, bound: Duration, resolver: Option<SocketAddr>) -> Seen {
    let no_resolver = || Seen {
        observed: Observed::ProbeError("the sandbox has no resolver to ask".to_owned()),
        output: String::new(),
        elapsed: Duration::ZERO,
    };
    match target {
        ProbeTarget::Addr(a) => probe::tcp(*a, bound),
        ProbeTarget::Name { host, port } => match resolver {
            Some(r) => probe::tcp_name(r, host.as_str(), *port, bound),
            None => no_resolver(),
        },
        ProbeTarget::Udp(a) => probe::udp(*a, bound),
        ProbeTarget::Ping(ip) => probe::ping(*ip, bound),
        ProbeTarget::Resolver(s) => probe::resolver(*s, bound),
        ProbeTarget::Lookup(name) => match resolver {
            Some(r) => probe::lookup(r, name.as_str(), bound),
            None => no_resolver(),
        },
        ProbeTarget::LookupAt { server, name } => probe::lookup(*server, name.as_str(), bound),
    }
}

fn in_ns(ns: &Netns, target: &ProbeTarget, bound: Duration, resolver: Option<SocketAddr>) -> Seen {
    ns.run(|| probe_here(target, bound, resolver))
        .unwrap_or_else(|e| Seen {
            observed: Observed::ProbeError(format!("cannot enter the namespace: {e}")),
            output: String::new(),
            elapsed: Duration::ZERO,
        })
}

fn result(check: &CanaryCheck, seen: Seen, control: Option<Seen>) -> CheckResult {
    CheckResult {
        kind: check.kind,
        observed: seen.observed,
        elapsed: seen.elapsed,
        output: seen.output,
        control: control.map(|c| ControlResult {
            observed: c.observed,
            elapsed: c.elapsed,
        }),
    }
}

/// Controls resolve names at the gateway's upstream; they never need one.
fn control_in(host: &HostSide, check: &CanaryCheck) -> Option<Seen> {
    check
        .control
        .as_ref()
        .map(|c| in_ns(host.ns(), c, check.bound, None))
}

/// Run every check of `plan` on `side` and every control on `host`, all at
/// once; one result per check, in plan order.
pub async fn run(plan: &CanaryPlan, side: SandboxSide<'_>, host: &HostSide) -> Vec<CheckResult> {
    match side {
        SandboxSide::Namespace { ns, resolver } => {
            let checks = plan.checks().to_vec();
            let host_ns = match host.ns().try_clone() {
                Ok(ns) => HostSide::new(ns),
                Err(e) => return failed_all(plan, &format!("cannot open the host namespace: {e}")),
            };
            let joined = tokio::task::spawn_blocking(move || {
                std::thread::scope(|scope| {
                    let handles: Vec<_> = checks
                        .iter()
                        .map(|check| {
                            let (ns, host_ns) = (&ns, &host_ns);
                            let probe = scope.spawn(move || match (&check.kind, &check.target) {
                                (CheckKind::SiblingBlocked, ProbeTarget::Ping(ip)) => {
                                    sibling::probe(ns, host_ns.ns(), *ip, check.bound)
                                }
                                (CheckKind::Ipv6Allowed, ProbeTarget::Addr(a)) => ns
                                    .run(|| probe::tcp_from_global(*a, check.bound))
                                    .unwrap_or_else(|e| Seen {
                                        observed: Observed::ProbeError(format!(
                                            "cannot enter the namespace: {e}"
                                        )),
                                        output: String::new(),
                                        elapsed: Duration::ZERO,
                                    }),
                                _ => in_ns(ns, &check.target, check.bound, resolver),
                            });
                            let control = scope.spawn(move || control_in(host_ns, check));
                            (check, probe, control)
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|(check, probe, control)| {
                            let panicked = || Seen {
                                observed: Observed::ProbeError("the probe thread panicked".into()),
                                output: String::new(),
                                elapsed: Duration::ZERO,
                            };
                            let seen = probe.join().unwrap_or_else(|_| panicked());
                            let control = control.join().unwrap_or_else(|_| Some(panicked()));
                            result(check, seen, control)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .await;
            joined.unwrap_or_else(|e| failed_all(plan, &format!("the probe worker failed: {e}")))
        }
        SandboxSide::Guest(sandbox) => {
            let runs = plan.checks().iter().map(|check| async move {
                let control = async {
                    let target = check.control.clone()?;
                    let ns = host.ns().try_clone().ok()?;
                    let bound = check.bound;
                    tokio::task::spawn_blocking(move || in_ns(&ns, &target, bound, None))
                        .await
                        .ok()
                };
                let (seen, control) = tokio::join!(guest::probe(sandbox, check), control);
                result(check, seen, control)
            });
            futures::future::join_all(runs).await
        }
    }
}

fn failed_all(plan: &CanaryPlan, why: &str) -> Vec<CheckResult> {
    plan.checks()
        .iter()
        .map(|c| CheckResult {
            kind: c.kind,
            observed: Observed::ProbeError(why.to_owned()),
            elapsed: Duration::ZERO,
            output: String::new(),
            control: None,
        })
        .collect()
}

/// The resolver a sandbox on a profile with gateway address `gw` asks.
pub fn gateway_resolver(gw: std::net::IpAddr) -> SocketAddr {
    SocketAddr::new(gw, DNS_PORT)
}
