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

/// `first`, or, for a check that may be tried twice
/// ([`CanaryCheck::tries`]: one that expects its destination reached) and
/// missed, the second try `again` with both in its output. The gate
/// allows such a check the bound of both tries
/// ([`CanaryCheck::time_allowed`]).
fn retried(check: &CanaryCheck, first: Seen, again: impl FnOnce() -> Seen) -> Seen {
    if check.tries() < 2 || first.observed.reached() {
        return first;
    }
    let second = again();
    Seen {
        output: format!(
            "{} (the first try: {}: {})",
            second.output, first.observed, first.output
        ),
        elapsed: first.elapsed + second.elapsed,
        observed: second.observed,
    }
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
                            let once = move || match (&check.kind, &check.target) {
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
                            };
                            let probe = scope.spawn(move || retried(check, once(), once));
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
                let tries = async {
                    let first = guest::probe(sandbox, check).await;
                    if check.tries() < 2 || first.observed.reached() {
                        return first;
                    }
                    let second = guest::probe(sandbox, check).await;
                    retried(check, first, || second)
                };
                let (seen, control) = tokio::join!(tries, control);
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

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sandbox_core::verify::Expectation;

    fn check(expect: Expectation) -> CanaryCheck {
        CanaryCheck {
            kind: CheckKind::AllowedConnects,
            target: ProbeTarget::Addr("192.0.2.1:443".parse().unwrap()),
            expect,
            bound: Duration::from_secs(1),
            control: None,
        }
    }

    fn seen(observed: Observed, output: &str) -> Seen {
        Seen {
            observed,
            output: output.to_owned(),
            elapsed: Duration::from_millis(10),
        }
    }

    #[test]
    fn a_missed_reach_is_tried_once_more_and_both_tries_are_told() {
        let s = retried(
            &check(Expectation::Connects),
            seen(Observed::TimedOut, "no answer"),
            || seen(Observed::Connected, "connected"),
        );
        assert_eq!(s.observed, Observed::Connected);
        assert!(
            s.output.contains("connected") && s.output.contains("no answer"),
            "{}",
            s.output
        );
        assert_eq!(s.elapsed, Duration::from_millis(20));
        // Missed twice: the second try's verdict stands.
        let s = retried(
            &check(Expectation::Connects),
            seen(Observed::TimedOut, "no answer"),
            || seen(Observed::Refused, "reset"),
        );
        assert_eq!(s.observed, Observed::Refused);
    }

    #[test]
    fn a_reached_destination_and_every_block_check_are_tried_once() {
        let once = || -> Seen { panic!("tried again") };
        let s = retried(
            &check(Expectation::Connects),
            seen(Observed::Connected, "ok"),
            once,
        );
        assert_eq!(s.output, "ok");
        // A block check's first verdict stands, whichever it is: a breach
        // seen once is a breach.
        for first in [Observed::Connected, Observed::TimedOut] {
            let s = retried(&check(Expectation::Fails), seen(first.clone(), "x"), once);
            assert_eq!(s.observed, first);
        }
        let s = retried(
            &check(Expectation::DoesNotResolve),
            seen(Observed::Resolved(vec![]), "x"),
            once,
        );
        assert_eq!(s.observed, Observed::Resolved(vec![]));
    }
}
