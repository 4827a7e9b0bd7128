//! Choosing the names the DNS probes ask for, asking them, and reading the
//! answers (resolved, NXDOMAIN).

use crate::lab::{Observed, Transport};
use corral_egress::netns::Netns;
use corral_gateway::NameRules;
use corral_gateway::probe::{ProbeError, query};
use corral_gateway::wire::{RCODE_NXDOMAIN, Response};
use corral_sandbox_core::{AllowTarget, Profile, Protocol};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

/// Asks `server` from inside `ns`; maps failures onto probe outcomes.
pub(super) fn ask(
    ns: &Netns,
    server: SocketAddr,
    name: &str,
    qtype: u16,
    timeout: Duration,
) -> (Result<Response, Observed>, u64) {
    let start = Instant::now();
    let r = match ns.run(|| query(server, name, qtype, timeout)) {
        Ok(Ok(resp)) => Ok(resp),
        Ok(Err(ProbeError::Timeout { .. })) => Err(Observed::TimedOut),
        Ok(Err(ProbeError::Io { source, .. }))
            if source.kind() == io::ErrorKind::ConnectionRefused =>
        {
            Err(Observed::Rejected("port unreachable".to_owned()))
        }
        // An ICMP unreachable or administratively prohibited: a `reject`.
        Ok(Err(ProbeError::Io { source, .. }))
            if matches!(
                source.kind(),
                io::ErrorKind::HostUnreachable
                    | io::ErrorKind::NetworkUnreachable
                    | io::ErrorKind::PermissionDenied
            ) =>
        {
            Err(crate::lab::probe::classify(&source))
        }
        Ok(Err(e)) => Err(Observed::Error(e.to_string())),
        Err(e) => Err(Observed::Error(format!("cannot enter the namespace: {e}"))),
    };
    (
        r,
        u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    )
}

pub(super) fn resolved_to(resp: &Response, want: IpAddr) -> Observed {
    if resp.answers.iter().any(|a| a.addr == want) {
        Observed::Connected
    } else {
        Observed::Rejected(format!("rcode {}, answers {:?}", resp.rcode, resp.answers))
    }
}

pub(super) fn nxdomain_kept(resp: &Response, leaked: bool) -> Observed {
    match (resp.rcode, leaked) {
        (RCODE_NXDOMAIN, false) => Observed::Rejected("NXDOMAIN, not forwarded".to_owned()),
        // Answered, or forwarded at all: the name got out.
        _ => Observed::Connected,
    }
}

/// The first name the profile allows, with the port and transport its
/// entry allows: a host entry as is, a wildcard as `drill.<suffix>`.
/// A name the profile admits, the port and transport to probe it on, and
/// a TCP port its entry does not allow (when the entry names ports or a
/// protocol at all).
pub(crate) fn allowed_name_entry(p: &Profile) -> Option<(String, u16, Transport, Option<u16>)> {
    p.allow.iter().find_map(|e| {
        let name = match &e.target {
            AllowTarget::Host(h) => h.normalized(),
            AllowTarget::Wildcard(w) => format!("drill.{}", w.normalized()),
            AllowTarget::Net(_) => return None,
        };
        let t = match e.protocol {
            Some(Protocol::Udp) => Transport::Udp,
            _ => Transport::Tcp,
        };
        let outside = match (e.ports, e.protocol) {
            (None, None) => None,
            (None, Some(Protocol::Tcp)) => None,
            (None, Some(Protocol::Udp)) => Some(443),
            (Some(r), _) => [443u16, 8443, 80, 22]
                .into_iter()
                .find(|q| !(r.start()..=r.end()).contains(q)),
        };
        Some((name, e.ports.map_or(443, |r| r.start()), t, outside))
    })
}

/// A name that `rules` does not admit, under one of 64 drill domains (a
/// profile would need a wildcard over each to admit them all).
pub(super) fn unlisted_name(rules: &NameRules, label: &str) -> Option<String> {
    (0..64)
        .map(|k| format!("{label}.corral-drill-{k}.test"))
        .find(|name| !rules.admits(name) && !rules.admits(&format!("x.{name}")))
}

pub(super) fn host_octet(i: usize) -> u8 {
    u8::try_from(i % 250 + 1).unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_gateway::wire::RCODE_NXDOMAIN;
    use corral_sandbox_core::{DnsPolicy, EgressMode};

    fn profile(allow: &[&str]) -> Profile {
        Profile {
            name: "p".parse().unwrap(),
            bridge: "cb-p".parse().unwrap(),
            subnet_v4: "10.9.0.0/24".parse().unwrap(),
            subnet_v6: None,
            mode: EgressMode::Allowlist,
            allow: allow.iter().map(|a| a.parse().unwrap()).collect(),
            block: corral_sandbox_core::BlockAction::Reject,
            dns: DnsPolicy::Gateway,
            allow_unresolved: false,
            learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
            approvals: Default::default(),
            flows: Default::default(),
            deny: Vec::new(),
        }
    }

    #[test]
    fn picks_a_listed_name_and_an_unlisted_one() {
        let p = profile(&["192.0.2.1", "*.cdn.test:8443/udp", "api.test"]);
        assert_eq!(
            allowed_name_entry(&p).map(|(n, port, t, _)| (n, port, t)),
            Some(("drill.cdn.test".to_owned(), 8443, Transport::Udp))
        );
        let rules = NameRules::from_allow(&p.allow);
        let n = unlisted_name(&rules, "x").unwrap();
        assert!(!rules.admits(&n) && !rules.admits(&format!("a.{n}")));
        // A wildcard over the first drill domain moves the probe to the next.
        let p = profile(&["*.corral-drill-0.test", "x.corral-drill-1.test"]);
        let rules = NameRules::from_allow(&p.allow);
        assert_eq!(unlisted_name(&rules, "x").unwrap(), "x.corral-drill-2.test");
    }

    #[test]
    fn nxdomain_counts_only_when_nothing_left() {
        let nx = Response {
            id: 1,
            rcode: RCODE_NXDOMAIN,
            answers: vec![],
        };
        assert!(nxdomain_kept(&nx, false).blocked());
        assert!(nxdomain_kept(&nx, true).reached());
        let ok = Response {
            id: 1,
            rcode: 0,
            answers: vec![],
        };
        assert!(nxdomain_kept(&ok, false).reached());
    }
}
