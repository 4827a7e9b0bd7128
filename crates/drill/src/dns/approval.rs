//! The approval row (`approvals = "ask"` on corral's resolver): a lookup
//! of a name the profile does not list is held for the operator, and once
//! the drill approves it (as `corral approve` does, through the gateway
//! directory) the held lookup is answered and the sandbox reaches the
//! address. The control is the simulated host reaching the same address,
//! which corral does not filter. Before the decision the row also checks
//! that the lookup really waited: a request was listed for it.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use corral_gateway::approvals::{self, Decision};
use corral_gateway::wire::TYPE_A;

use super::names::{ask, resolved_to};
use crate::lab::topology::SandboxNs;
use crate::lab::{Lab, Observed, Probe, Transport, probe_from};

/// The probe label of the row.
pub(crate) const APPROVED: &str =
    "unlisted name held for the operator, answered and reached once approved";

/// How long the row waits for the resolver to list the held lookup.
const LISTED_WITHIN: Duration = Duration::from_secs(5);

/// What the row saw: (the probe, the control, what was observed, ms).
pub(super) fn run(
    lab: &Lab,
    state: &Path,
    sb: &SandboxNs,
    name: &str,
    to: IpAddr,
    timeout: Duration,
) -> (String, Observed, Observed, u64) {
    let port = 443;
    let probe = Probe::l4(Transport::Tcp, SocketAddr::new(to, port));
    if let Err(e) = lab.topo.add_internet_listener(to, port, Transport::Tcp) {
        let e = Observed::Error(e.to_string());
        return (probe.to_string(), e.clone(), e, 0);
    }
    let control = probe_from(&lab.topo.host, &probe, timeout).observed;
    let gateway = SocketAddr::new(IpAddr::V4(sb.gateway_v4), 53);
    let started = Instant::now();
    let ns = match sb.ns.try_clone() {
        Ok(ns) => ns,
        Err(e) => {
            let e = Observed::Error(e.to_string());
            return (probe.to_string(), control, e, 0);
        }
    };
    let owned = name.to_owned();
    // The held lookup waits for the decision, so it is asked on its own
    // thread, with room for the whole wait.
    let wait = timeout + LISTED_WITHIN;
    let asked = std::thread::spawn(move || ask(&ns, gateway, &owned, TYPE_A, wait).0);
    let listed = loop {
        if let Some(r) = approvals::pending(state)
            .into_iter()
            .find(|r| r.name == name && r.asker == IpAddr::V4(sb.v4))
        {
            break Some(r);
        }
        if started.elapsed() > LISTED_WITHIN || asked.is_finished() {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let observed = match listed {
        None => Observed::Error(format!(
            "the lookup of {name} was not held for the operator (no request listed)"
        )),
        Some(r) => match approvals::decide(state, &r.id, Decision::Once) {
            Err(e) => Observed::Error(e.to_string()),
            Ok(_) => match asked.join() {
                Ok(Ok(resp)) => match resolved_to(&resp, to) {
                    Observed::Connected => probe_from(&sb.ns, &probe, timeout).observed,
                    other => other,
                },
                Ok(Err(e)) => e,
                Err(_) => Observed::Error("the held lookup's thread panicked".to_owned()),
            },
        },
    };
    let ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    (probe.to_string(), control, observed, ms)
}

/// The address the row's name answers with on profile `pi`: AS112 space
/// (as the other rows' answers), past the octets those use.
pub(super) fn address(pi: usize) -> IpAddr {
    super::answer_at(251 + u8::try_from(pi % 4).unwrap_or(0))
}
