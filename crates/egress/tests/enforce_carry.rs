//! An apply carries over what the gateway resolver learned (docs/gateway.md,
//! "An apply keeps what the resolver learned"). Real packets from a
//! sandbox namespace through the real kernel: an address added to the
//! profile's learned set the way dnsmasq adds it (`add element`, the set's
//! default timeout) stays reachable through an apply of an unrelated
//! change, with the lifetime it had left, and is unreachable at once —
//! its open flow revoked — after an apply that removes the name that fed
//! it, although the set itself stays (another name shares its class).
//! The control: the same apply without the previous plan to vouch for the
//! element (as `Host::apply` does) empties the set, and the address is
//! blocked: the test can fail.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::Duration;

use corral_drill::lab::topology::PUBLIC_V4;
use corral_drill::lab::{Lab, Observed, Transport, tcp};
use corral_egress::netns::Netns;
use corral_egress::nft;
use corral_egress::plan::{HostPlan, PlanSettings, TableFamily};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::{EgressMode, ProfileSet};
use nft_support::{PROBE_TIMEOUT, profile};

const SET: &str = "carry-dns4-tcp-443";
const NAME: &str = "*.carry.test:443/tcp";
const SIBLING: &str = "*.sibling.test:443/tcp";

fn profiles(allow: &[&str]) -> ProfileSet {
    ProfileSet::new(vec![profile(
        "carry",
        "cb-carry",
        "10.232.2.0/24",
        EgressMode::Allowlist,
        allow,
    )])
    .unwrap()
}

fn plan(lab: &Lab, allow: &[&str]) -> HostPlan {
    let settings = PlanSettings {
        host_networks: lab.plan.host_networks.clone(),
        ..PlanSettings::default()
    };
    let set = profiles(allow);
    HostPlan::build(&set, &settings, &Resolution::new())
        .unwrap()
        .with_bindings(&set, lab.plan.bindings.clone())
        .unwrap()
}

/// What dnsmasq's nftset does with an answer: `add element` without a
/// timeout of its own.
fn learn(lab: &Lab, addr: IpAddr) {
    let out = lab
        .host
        .netns()
        .run(|| {
            nft_support::nft(&[
                "add",
                "element",
                "inet",
                "corral",
                SET,
                &format!("{{ {addr} }}"),
            ])
        })
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The learned set's elements with the milliseconds each has left.
fn learned(lab: &Lab) -> Vec<(String, u64)> {
    let live = lab.host.netns().run(nft::read_live).unwrap().unwrap();
    let Some(s) = live.table(TableFamily::Inet).and_then(|t| t.set(SET)) else {
        return Vec::new();
    };
    s.elements
        .iter()
        .zip(&s.expires_ms)
        .map(|(r, ms)| (r.start.to_string(), *ms))
        .collect()
}

fn reach(lab: &Lab, ip: std::net::Ipv4Addr) -> Observed {
    lab.probe(lab.sandbox("carry"), &tcp(ip, 443), PROBE_TIMEOUT)
        .observed
}

fn open(ns: &Netns, ip: std::net::Ipv4Addr) -> TcpStream {
    let to = SocketAddr::new(IpAddr::V4(ip), 443);
    let s = ns
        .run(|| TcpStream::connect_timeout(&to, Duration::from_secs(1)))
        .unwrap()
        .unwrap_or_else(|e| panic!("connect {to}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    s
}

fn alive(s: &mut TcpStream, msg: &[u8]) -> bool {
    let mut buf = vec![0u8; msg.len()];
    s.write_all(msg).is_ok() && s.read_exact(&mut buf).is_ok() && buf == msg
}

#[test]
fn a_learned_address_survives_an_unrelated_apply_and_dies_with_its_name() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let (learned_ip, unlisted) = (PUBLIC_V4[2], PUBLIC_V4[3]);
    let wide = [NAME, SIBLING];
    let lab = Lab::new(&profiles(&wide), &Resolution::new()).unwrap();
    lab.topo
        .add_internet_listeners(&[
            (learned_ip.into(), 443, Transport::Tcp),
            (unlisted.into(), 443, Transport::Tcp),
        ])
        .unwrap();
    lab.control().unwrap();
    for ip in [learned_ip, unlisted] {
        assert_eq!(reach(&lab, ip), Observed::Connected, "control {ip}");
    }
    let p1 = plan(&lab, &wide);
    lab.host.apply(&p1).unwrap();
    assert_ne!(
        reach(&lab, learned_ip),
        Observed::Connected,
        "not learned yet"
    );
    learn(&lab, learned_ip.into());
    assert_eq!(reach(&lab, learned_ip), Observed::Connected, "learned");

    // Control: no previous plan to vouch for the element, nothing carried.
    let report = lab.host.apply_after(&p1, None).unwrap();
    assert_eq!(report.carried, 0);
    assert!(learned(&lab).is_empty());
    assert_ne!(
        reach(&lab, learned_ip),
        Observed::Connected,
        "control: carried nothing"
    );

    // An unrelated change: another entry, in another class.
    learn(&lab, learned_ip.into());
    std::thread::sleep(Duration::from_millis(1200));
    let before = learned(&lab);
    let p2 = plan(&lab, &[NAME, SIBLING, "198.51.100.20:80/tcp"]);
    let t = std::time::Instant::now();
    let report = lab.host.apply_after(&p2, Some(&p1)).unwrap();
    let took = t.elapsed().as_millis();
    let after = learned(&lab);
    eprintln!(
        "carried {} element(s) in an apply of {took} ms: before {before:?}, after {after:?}",
        report.carried
    );
    assert_eq!(report.carried, 1);
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].0, learned_ip.to_string());
    assert!(
        after[0].1 <= before[0].1 && after[0].1 + 5_000 > before[0].1,
        "the element keeps the lifetime it had left, not a fresh default: {before:?} → {after:?}"
    );
    assert_eq!(
        reach(&lab, learned_ip),
        Observed::Connected,
        "lost by an unrelated apply"
    );
    assert_ne!(
        reach(&lab, unlisted),
        Observed::Connected,
        "the unlisted address"
    );

    // The name removed; the set stays (the sibling shares its class).
    let ns = &lab.sandbox("carry").ns;
    let mut flow = open(ns, learned_ip);
    assert!(alive(&mut flow, b"x1"), "control: the open flow echoes");
    let p3 = plan(&lab, &[SIBLING, "198.51.100.20:80/tcp"]);
    assert!(p3.set(SET).is_some());
    let report = lab.host.apply_after(&p3, Some(&p2)).unwrap();
    assert_eq!(report.carried, 0);
    assert!(learned(&lab).is_empty());
    assert!(
        report
            .revoked
            .deleted
            .iter()
            .any(|d| d.contains(&learned_ip.to_string())),
        "{:?}",
        report.revoked
    );
    assert_ne!(
        reach(&lab, learned_ip),
        Observed::Connected,
        "reachable after its name left"
    );
    assert!(!alive(&mut flow, b"x2"), "the open flow outlived its name");
}
