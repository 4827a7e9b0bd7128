//! The gateway's capacity under attack (issue 11, class 5), with real
//! dnsmasq daemons in the lab: a sibling floods or starves, the victim
//! still gets its lease and its answers. Each victim request is first shown
//! to succeed without the attack (the control).

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use corral_drill::attack::gateway::{DnsFlood, hold_tcp_dns, starve_pool};
use corral_drill::attack::l2::{Attacker, mac_of};
use corral_drill::lab::topology::SandboxNs;
use corral_drill::lab::{Lab, LabGateways};
use corral_drill::raw::dhcp::{self, ClientMessage, Lease};
use corral_egress::plan::gateway_guard::TCP_DNS_PER_SOURCE;
use corral_egress::resolve::Resolution;
use corral_gateway::probe::{query, query_tcp};
use corral_gateway::wire::TYPE_A;
use corral_sandbox_core::config::Config;

const T: Duration = Duration::from_millis(1500);
const NAME: &str = "api.corral.test";
const ADDR: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 1);

struct Env {
    lab: Lab,
    gateways: LabGateways,
}

fn env() -> Env {
    let lab = Lab::new(&Config::builtin_default().profiles, &Resolution::new()).unwrap();
    lab.apply().unwrap();
    lab.topo.attach_sandboxes(true).unwrap();
    let gateways = LabGateways::start(&lab).unwrap();
    gateways.upstream.set(NAME, &[IpAddr::V4(ADDR)], 60);
    Env { lab, gateways }
}

fn pair(lab: &Lab) -> (&SandboxNs, &SandboxNs) {
    let mut it = lab.topo.sandboxes_of("internet");
    (it.next().unwrap(), it.next().unwrap())
}

fn lease(sb: &SandboxNs, xid: u32) -> Option<Lease> {
    let a = Attacker::new(sb).unwrap();
    let mac = a.mac();
    dhcp::obtain(&a.sock, mac, mac, xid, T).unwrap()
}

fn dns(sb: &SandboxNs) -> SocketAddr {
    SocketAddr::new(sb.gateway_v4.into(), 53)
}

/// The victim gives its lease back (so a later request is a new one).
fn release(env: &Env, sb: &SandboxNs, lease: &Lease) {
    let v = Attacker::new(sb).unwrap();
    let server_mac = mac_of(&env.lab.topo.host, &sb.bridge).unwrap();
    v.sock
        .send(
            &ClientMessage::release(2, v.mac(), lease.addr, lease.server)
                .release_frame(v.mac(), server_mac)
                .unwrap(),
        )
        .unwrap();
}

/// A asks for B's reservation, naming B's MAC as client from its own.
fn steal(a: &SandboxNs, b: &SandboxNs) -> Option<Lease> {
    let att = Attacker::new(a).unwrap();
    dhcp::obtain(&att.sock, att.mac(), b.mac.octets(), 77, T).unwrap()
}

#[test]
fn pool_starvation_leaves_the_next_sandbox_its_lease() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // The gateway alone first (bridges, no rules), then with the rules.
    let lab = Lab::new(&Config::builtin_default().profiles, &Resolution::new()).unwrap();
    lab.control().unwrap();
    let gateways = LabGateways::start(&lab).unwrap();
    let env = Env { lab, gateways };
    let (a, b) = pair(&env.lab);
    for phase in ["gateway alone", "gateway and rules"] {
        if phase == "gateway and rules" {
            env.lab.apply().unwrap();
        }
        // Control: the victim gets its own reserved address, then gives
        // it back.
        let first = lease(b, 1).unwrap_or_else(|| panic!("{phase}: the victim got no lease"));
        assert_eq!(first.addr, b.v4, "{phase}");
        release(&env, b, &first);
        // 253 forged clients from the attacker's port.
        let (outcome, forged) = starve_pool(&Attacker::new(a).unwrap(), 253, T).unwrap();
        eprintln!("{phase}: {}", outcome.detail);
        assert_eq!(forged, 0, "{phase}: forged clients got leases");
        let after = lease(b, 3).unwrap_or_else(|| panic!("{phase}: no lease after the attack"));
        assert_eq!(after.addr, b.v4, "{phase}");
        // The attacker asking for the victim's reservation in its name: the
        // gateway alone cannot tell (the request names the victim's MAC);
        // the rules drop a request whose client is not the port's MAC.
        let stolen = steal(a, b);
        if phase == "gateway alone" {
            assert_eq!(
                stolen.map(|l| l.addr),
                Some(b.v4),
                "control: the attacker could not ask in the victim's name"
            );
        } else {
            assert_eq!(stolen, None, "the attacker got the victim's lease");
        }
    }
}

#[test]
fn idle_tcp_dns_connections_of_one_sandbox_leave_a_sibling_its_tcp_lookups() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new(&Config::builtin_default().profiles, &Resolution::new()).unwrap();
    lab.control().unwrap();
    let gateways = LabGateways::start(&lab).unwrap();
    gateways.upstream.set(NAME, &[IpAddr::V4(ADDR)], 60);
    let (a, b) = pair(&lab);
    let ask = || {
        b.ns.run(|| query_tcp(dns(b), NAME, TYPE_A, T))
            .unwrap()
            .map(|r| r.answers.len())
    };
    for phase in ["gateway alone", "gateway and rules"] {
        if phase == "gateway and rules" {
            lab.apply().unwrap();
        }
        assert_eq!(ask().unwrap(), 1, "{phase}: control TCP lookup");
        let held = hold_tcp_dns(&a.ns, dns(a), 30, Duration::from_millis(500)).unwrap();
        eprintln!(
            "{phase}: the attacker holds {} idle TCP/53 connections",
            held.len()
        );
        if phase == "gateway and rules" {
            assert!(
                held.len() <= TCP_DNS_PER_SOURCE as usize,
                "{} connections held past the cap",
                held.len()
            );
        }
        let r = ask();
        assert!(
            matches!(r, Ok(1)),
            "{phase}: TCP lookup failed with {} idle connections held: {r:?}",
            held.len()
        );
    }
}

/// `b`'s lookups of another name while `a` floods the gateway with names
/// under a domain whose authority never answers: the failed ones, and how
/// many queries the flood sent.
fn lookups_during_flood(
    gateways: &LabGateways,
    a: &SandboxNs,
    b: &SandboxNs,
    random_labels: bool,
    lookups: usize,
) -> (Vec<String>, u64) {
    gateways.upstream.silence("slow.corral.test");
    let ask = |n: usize| -> Vec<Result<usize, String>> {
        (0..n)
            .map(|_| {
                b.ns.run(|| query(dns(b), NAME, TYPE_A, T))
                    .unwrap()
                    .map(|r| r.answers.len())
                    .map_err(|e| e.to_string())
            })
            .collect()
    };
    assert!(
        ask(5).iter().all(|r| matches!(r, Ok(1))),
        "control: lookups"
    );
    let flood = DnsFlood::start(&a.ns, dns(a), "slow.corral.test", random_labels).unwrap();
    // Let the flood fill whatever it can fill first.
    std::thread::sleep(Duration::from_secs(2));
    let results = ask(lookups);
    let sent = flood.sent();
    drop(flood);
    let failed = results
        .into_iter()
        .filter_map(|r| match r {
            Ok(1) => None,
            Ok(n) => Some(format!("{n} answers")),
            Err(e) => Some(e),
        })
        .collect();
    (failed, sent)
}

fn flood_leaves_lookups(random_labels: bool) {
    let env = env();
    let (a, b) = pair(&env.lab);
    let (failed, sent) = lookups_during_flood(&env.gateways, a, b, random_labels, 20);
    assert!(
        failed.is_empty(),
        "{} of 20 lookups failed while the sibling sent {sent} queries: {failed:?}",
        failed.len()
    );
}

#[test]
fn a_flood_of_one_name_to_a_slow_upstream_leaves_other_names_answered() {
    if !corral_test_support::gate::netns() {
        return;
    }
    flood_leaves_lookups(false);
}

#[test]
fn a_flood_of_random_names_to_a_slow_upstream_leaves_other_names_answered() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // Control: without the rules' per-port rate limit the same flood
    // starves the sibling even with the gateway's larger query table.
    let lab = Lab::new(&Config::builtin_default().profiles, &Resolution::new()).unwrap();
    lab.control().unwrap();
    let gateways = LabGateways::start(&lab).unwrap();
    gateways.upstream.set(NAME, &[IpAddr::V4(ADDR)], 60);
    let (a, b) = pair(&lab);
    let (failed, sent) = lookups_during_flood(&gateways, a, b, true, 4);
    eprintln!(
        "without the rules: {} of 4 lookups failed, {sent} flood queries",
        failed.len()
    );
    assert!(
        !failed.is_empty(),
        "control: the flood ({sent} queries) starved nothing without the rules"
    );
    drop(gateways);
    drop(lab);
    flood_leaves_lookups(true);
}
