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

#[test]
fn pool_starvation_leaves_the_next_sandbox_its_lease() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let env = env();
    let (a, b) = pair(&env.lab);
    // Control: the victim gets a lease, then gives it back.
    let first = lease(b, 1).expect("control: the victim got no lease");
    let vb = Attacker::new(b).unwrap();
    let server_mac = mac_of(&env.lab.topo.host, &b.bridge).unwrap();
    vb.sock
        .send(
            &ClientMessage::release(2, vb.mac(), first.addr, first.server)
                .release_frame(vb.mac(), server_mac)
                .unwrap(),
        )
        .unwrap();
    // 253 forged clients from the attacker's port.
    let (outcome, forged) = starve_pool(&Attacker::new(a).unwrap(), 253, T).unwrap();
    eprintln!("{}", outcome.detail);
    let after = lease(b, 3);
    assert!(
        after.is_some(),
        "the victim got no lease after the attack ({forged} forged leases)"
    );
    assert_eq!(forged, 0, "forged clients got leases: {}", outcome.detail);
}

#[test]
fn idle_tcp_dns_connections_of_one_sandbox_leave_a_sibling_its_tcp_lookups() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let env = env();
    let (a, b) = pair(&env.lab);
    let ask = || {
        b.ns.run(|| query_tcp(dns(b), NAME, TYPE_A, T))
            .unwrap()
            .map(|r| r.answers.len())
    };
    assert_eq!(ask().unwrap(), 1, "control: TCP lookup");
    let held = hold_tcp_dns(&a.ns, dns(a), 30, Duration::from_millis(500)).unwrap();
    eprintln!("the attacker holds {} idle TCP/53 connections", held.len());
    let r = ask();
    assert!(
        matches!(r, Ok(1)),
        "TCP lookup failed with {} idle connections held: {r:?}",
        held.len()
    );
}

fn flood_leaves_lookups(random_labels: bool) {
    let env = env();
    let (a, b) = pair(&env.lab);
    env.gateways.upstream.silence("slow.corral.test");
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
    let results = ask(20);
    let sent = flood.sent();
    drop(flood);
    let failed: Vec<_> = results.iter().filter(|r| !matches!(r, Ok(1))).collect();
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
    flood_leaves_lookups(true);
}
