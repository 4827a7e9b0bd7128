//! The sibling check from a container's namespace, ended by what the
//! bridge did rather than by its bound.
//!
//! The echo to a sibling needs an ARP exchange first, and bridge-port
//! isolation drops the request silently (no drop-log record, no reject).
//! The host watches its bridge instead ([`corral_probes::arp_tap`]): once
//! the bridge has taken the sandbox's request in itself without sending it
//! out of any port, no sibling was asked and the echo cannot be answered;
//! the check ends there as [`Observed::Dropped`]. The sandbox's neighbour
//! entry for the sibling is forgotten first, so the request goes out with
//! the echo's first packet even when an earlier check left one resolved or
//! being resolved. If the bridge sends the request out of a port, or the
//! tap sees nothing (a tap that could not open, an entry that could not be
//! forgotten), the echo runs to its own end within the bound, and the
//! check's output says which it was.

use std::io::Write;
use std::net::IpAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use corral_egress::link::Links;
use corral_egress::netns::Netns;
use corral_probes::arp_tap::{ArpTap, Fence, sender_towards};
use corral_sandbox_core::verify::Observed;

use super::probe::{self, Seen};

/// Echo `to` from `sandbox`, watching the bridge from `host`; at most
/// `bound`.
pub fn probe(sandbox: &Netns, host: &Netns, to: IpAddr, bound: Duration) -> Seen {
    let start = Instant::now();
    let bounded = |why: String| -> Seen {
        let mut seen = sandbox
            .run(|| probe::ping(to, bound))
            .unwrap_or_else(|e| entry_failed(&e));
        seen.output = format!(
            "{}; no evidence from the bridge ({why}), judged by the {} ms bound",
            seen.output,
            bound.as_millis()
        );
        seen.elapsed = start.elapsed();
        seen
    };
    let IpAddr::V4(v4) = to else {
        return bounded("the sibling's address is IPv6, which needs no ARP".to_owned());
    };
    let sender = match sandbox.run(|| sender_towards(v4)) {
        Ok(Ok(s)) => s,
        Ok(Err(e)) | Err(e) => return bounded(format!("the sandbox's own link: {e}")),
    };
    // An entry for the sibling already being resolved (an earlier canary's
    // echo, a second ago) would send its next request only at its own
    // retransmit timer, past the bound: forget it, so the echo's first
    // packet asks at once.
    let forgot = sandbox
        .run_async(|| async { Links::connect()?.forget_neighbour(to).await })
        .map_err(|e| e.to_string())
        .and_then(|r| r.map_err(|e| e.to_string()));
    let tap = match host.run(ArpTap::open) {
        Ok(Ok(t)) => t,
        Ok(Err(e)) | Err(e) => return bounded(format!("cannot open a packet socket: {e}")),
    };
    let (stop_rx, mut stop_tx) = match std::io::pipe() {
        Ok(p) => p,
        Err(e) => return bounded(format!("cannot make a pipe: {e}")),
    };
    std::thread::scope(|scope| {
        let stop = &stop_rx;
        let echo = scope.spawn(move || {
            sandbox.run(|| corral_probes::echo_until(to, bound, Some(stop.as_fd())))
        });
        let fence = tap.wait(&sender, v4, bound);
        if matches!(fence, Ok(Fence::NotForwarded { .. })) {
            // Ends the echo now; a failed write leaves it to its bound.
            let _ = stop_tx.write_all(b"x");
        }
        let echo = match echo.join() {
            Ok(Ok(e)) => e,
            Ok(Err(e)) => return entry_failed(&e),
            Err(_) => {
                return Seen {
                    observed: Observed::ProbeError("the echo thread panicked".to_owned()),
                    output: String::new(),
                    elapsed: start.elapsed(),
                };
            }
        };
        let (observed, output) = match (fence, echo) {
            // An answer stands, whatever the tap saw.
            (fence, Some(seen)) if seen.reached() => {
                let (o, text) = probe::echo_outcome(to, seen);
                let how = match fence {
                    Ok(Fence::Forwarded { out }) => {
                        format!("; the bridge sent the ARP request out of interface {out}")
                    }
                    _ => String::new(),
                };
                (o, format!("{text}{how}"))
            }
            (Ok(Fence::NotForwarded { port, bridge }), _) => (
                Observed::Dropped,
                format!(
                    "the bridge took the ARP request for {to} in from interface {port} and \
                     delivered it to itself (interface {bridge}) having sent it out of no \
                     port: no sibling was asked"
                ),
            ),
            (Ok(Fence::Forwarded { out }), Some(seen)) => {
                let (o, text) = probe::echo_outcome(to, seen);
                (
                    o,
                    format!("{text}; the bridge sent the ARP request out of interface {out}"),
                )
            }
            (fence, Some(seen)) => {
                let (o, text) = probe::echo_outcome(to, seen);
                let why = match (fence, &forgot) {
                    (Err(e), _) => format!("the packet socket failed: {e}"),
                    (_, Err(e)) => format!(
                        "the sandbox's ARP request was not seen on the bridge; its neighbour \
                         entry for {to} could not be forgotten first: {e}"
                    ),
                    _ => "the sandbox's ARP request was not seen on the bridge".to_owned(),
                };
                (
                    o,
                    format!(
                        "{text}; no evidence from the bridge ({why}), judged by the {} ms bound",
                        bound.as_millis()
                    ),
                )
            }
            (_, None) => (
                Observed::ProbeError("the echo stopped with no evidence to end it".to_owned()),
                String::new(),
            ),
        };
        Seen {
            observed,
            output,
            elapsed: start.elapsed(),
        }
    })
}

fn entry_failed(e: &std::io::Error) -> Seen {
    Seen {
        observed: Observed::ProbeError(format!("cannot enter the namespace: {e}")),
        output: String::new(),
        elapsed: Duration::ZERO,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use corral_egress::link::Links;

    use super::*;

    /// A bridge in `host` with two namespaces on it (10.9.0.2 and .3).
    pub(in crate::verify) fn lab() -> (Netns, Netns, Netns) {
        let (host, a, b) = (
            Netns::new().unwrap(),
            Netns::new().unwrap(),
            Netns::new().unwrap(),
        );
        host.run_async(|| async {
            let links = Links::connect().unwrap();
            links.create_bridge("sibbr").await.unwrap();
            links.set_up("sibbr").await.unwrap();
            for (port, ns) in [("sib-a", &a), ("sib-b", &b)] {
                links
                    .create_veth(port, "eth0", Some(ns.as_fd()))
                    .await
                    .unwrap();
                links.attach_port(port, "sibbr", false).await.unwrap();
                links.set_up(port).await.unwrap();
            }
        })
        .unwrap();
        for (ns, ip) in [(&a, "10.9.0.2/24"), (&b, "10.9.0.3/24")] {
            ns.run_async(|| async move {
                let links = Links::connect().unwrap();
                links
                    .add_address("eth0", ip.parse().unwrap())
                    .await
                    .unwrap();
                links.set_up("eth0").await.unwrap();
            })
            .unwrap();
        }
        (host, a, b)
    }

    /// Isolates both of the bridge's ports.
    pub(in crate::verify) fn isolate(host: &Netns) {
        host.run_async(|| async {
            let links = Links::connect().unwrap();
            for port in ["sib-a", "sib-b"] {
                links.set_port_isolated(port, true).await.unwrap();
            }
        })
        .unwrap();
    }

    /// Isolated ports: the check ends as dropped on the bridge's evidence,
    /// with a bound longer than the kernel's ARP give-up (which would end
    /// the echo as unreachable, not dropped). The control, the
    /// same probe before isolation: the bridge forwards the request, the
    /// echo is answered, and the check sees the sibling reached.
    #[test]
    fn isolation_is_seen_on_the_bridge_and_a_reachable_sibling_is_reached() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let (host, a, _b) = lab();
        let to: IpAddr = "10.9.0.3".parse().unwrap();
        let bound = Duration::from_secs(10);
        let open = probe(&a, &host, to, bound);
        assert_eq!(open.observed, Observed::Connected, "{}", open.output);
        assert!(
            open.output
                .contains("sent the ARP request out of interface"),
            "{}",
            open.output
        );
        // A fresh sandbox has no neighbour entry for its sibling; this
        // one has one now, so the next probe starts from a new sender.
        let (host, a, _b) = lab();
        isolate(&host);
        let closed = probe(&a, &host, to, bound);
        assert_eq!(closed.observed, Observed::Dropped, "{}", closed.output);
        assert!(
            closed.output.contains("no sibling was asked"),
            "{}",
            closed.output
        );
    }

    /// A neighbour entry an earlier echo left (the sibling resolved while
    /// the ports still talked) would keep the sandbox from asking again,
    /// leaving the bridge nothing to show and the check to its bound. The
    /// check forgets it first, so the isolated bridge is seen dropping the
    /// new request. Control: the entry is there before the check.
    #[test]
    fn a_resolved_sibling_is_asked_again_and_the_bridge_seen() {
        use corral_egress::plan::AddrFamily;

        if !corral_test_support::gate::netns() {
            return;
        }
        let (host, a, _b) = lab();
        let to: IpAddr = "10.9.0.3".parse().unwrap();
        // Resolve the neighbour while the ports still talk, then isolate.
        let warm = probe(&a, &host, to, Duration::from_secs(5));
        assert_eq!(warm.observed, Observed::Connected, "{}", warm.output);
        isolate(&host);
        let entries = a
            .run_async(|| async {
                let links = Links::connect().unwrap();
                links.neighbours(AddrFamily::V4).await.unwrap().len()
            })
            .unwrap();
        assert!(entries > 0, "the warm echo left no neighbour entry");
        let seen = probe(&a, &host, to, Duration::from_secs(5));
        assert_eq!(seen.observed, Observed::Dropped, "{}", seen.output);
        assert!(
            seen.output.contains("no sibling was asked"),
            "{}",
            seen.output
        );
    }
}
