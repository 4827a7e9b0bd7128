//! Ports corral does not know yet (attached after the apply, before a
//! sweep: neither bound nor quarantined) on the last of many profile
//! bridges: a frame that carries the profile's addresses — IPv4 or IPv6
//! source or destination, ARP sender or target — never reaches a sibling,
//! through the bridge table's `ports4_by_addr` / `ports6_by_addr` verdict
//! maps (one lookup per address field, the profile the maps' last
//! element). With br_netfilter's switches off the bridge table alone
//! judges bridged frames; the control there: the same frames with
//! addresses outside every profile cross the same two ports. With them on
//! (as corral sets them) the frames are held too.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use corral_drill::attack::l2::{Attacker, mac_of};
use corral_drill::lab::Lab;
use corral_drill::lab::topology::SandboxNs;
use corral_drill::raw::frame::{self, ArpOp, BROADCAST, Link, Transport};
use corral_drill::raw::{Capture, Marker};
use corral_egress::host::HostDrift;
use corral_egress::link::{BridgeNetfilter, CORRAL_BRIDGE_NETFILTER, Links};
use corral_egress::plan::SysctlPlan;
use corral_egress::resolve::Resolution;
use corral_egress::sysctl::Sysctls;
use corral_sandbox_core::config::Config;

const PROFILES: usize = 24;
const WATCH: Duration = Duration::from_millis(800);

fn config() -> Config {
    let mut text = String::new();
    for i in 0..PROFILES {
        text.push_str(&format!(
            "[[profile]]\nname = \"u{i}\"\nbridge = \"cu{i}\"\nsubnet = \"10.211.{i}.0/24\"\nsubnet_v6 = \"fd00:211:{i}::/64\"\nmode = \"internet\"\n\n"
        ));
    }
    Config::from_toml_str(&text, "unknown_ports").unwrap()
}

/// br_netfilter's switches (host-wide and per bridge) on, as corral sets
/// them, or off: then no bridged frame meets the IP hooks (the inet
/// table's guards would drop the controls' foreign sources) and the
/// bridge table is alone.
fn br_netfilter(lab: &Lab, on: bool) {
    lab.topo
        .host
        .run_async(|| async {
            for key in [
                "net.bridge.bridge-nf-call-iptables",
                "net.bridge.bridge-nf-call-ip6tables",
                "net.bridge.bridge-nf-call-arptables",
            ] {
                Sysctls::default()
                    .apply_one(&SysctlPlan {
                        key: key.into(),
                        value: if on { "1" } else { "0" }.into(),
                        reason: "test".into(),
                    })
                    .unwrap();
            }
            let nf = if on {
                CORRAL_BRIDGE_NETFILTER
            } else {
                BridgeNetfilter {
                    iptables: false,
                    ip6tables: false,
                    arptables: false,
                }
            };
            let links = Links::connect().unwrap();
            for b in &lab.plan.bridges {
                links
                    .set_bridge_netfilter(b.name.as_str(), nf)
                    .await
                    .unwrap();
            }
        })
        .unwrap();
}

/// Makes a frame carrying the marker.
type Build<'a> = dyn Fn(&Marker) -> Vec<u8> + 'a;

/// Whether `frame` (made with a fresh marker) reaches `to`'s `eth0`.
fn reaches(from: &Attacker<'_>, to: &SandboxNs, build: &Build<'_>) -> bool {
    let cap = Capture::open(&to.ns, "eth0").unwrap();
    let m = Marker::fresh();
    from.send(&build(&m)).unwrap();
    cap.saw(&m, WATCH).unwrap()
}

fn udp(link: &Link, src: IpAddr, dst: IpAddr, m: &Marker) -> Vec<u8> {
    frame::ip(
        link,
        src,
        dst,
        64,
        Transport::Udp { sport: 9, dport: 9 },
        m.bytes(),
    )
    .unwrap()
}

/// An ARP request, the marker riding as the frame's trailing padding
/// (the rules read the ARP header only).
fn arp(a: &Attacker<'_>, sender: Ipv4Addr, target: Ipv4Addr, m: &Marker) -> Vec<u8> {
    let mut f = frame::arp(
        &Link::new(a.mac(), BROADCAST),
        ArpOp::Request,
        a.mac(),
        sender,
        [0; 6],
        target,
    )
    .unwrap();
    f.extend_from_slice(m.bytes());
    f
}

#[test]
fn frames_naming_the_last_profile_never_cross_unknown_ports() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let set = config().profiles;
    let last = PROFILES - 1;
    let mut lab = Lab::sparse(&set, &Resolution::new(), |i| 2 * usize::from(i == last)).unwrap();
    // No binding, and no port on any bridge while the apply sweeps: the
    // two ports attached next are unknown to corral.
    lab.plan = lab.unbound_plan().unwrap();
    let report = lab.apply().unwrap();
    assert!(report.ports.is_empty(), "{:#?}", report.ports);
    // Not isolated: only corral's rules stand between the two ports.
    lab.topo.attach_sandboxes(false).unwrap();
    let profile = format!("u{last}");
    let mut pair = lab.topo.sandboxes_of(&profile);
    let (a, b) = (pair.next().unwrap(), pair.next().unwrap());
    let att = Attacker::new(a).unwrap();
    let to_b = Link::new(att.mac(), mac_of(&b.ns, "eth0").unwrap());
    let (a6, b6) = (a.v6.unwrap(), b.v6.unwrap());
    let outside4 = |n: u8| IpAddr::V4(Ipv4Addr::new(198, 51, 100, n));
    let outside6 = |n: u16| IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, n));

    br_netfilter(&lab, false);
    // Controls: frames between the same ports, no profile's address in
    // them, cross.
    let control: [(&str, &Build<'_>); 3] = [
        ("IPv4 UDP", &|m| udp(&to_b, outside4(7), outside4(8), m)),
        ("IPv6 UDP", &|m| udp(&to_b, outside6(7), outside6(8), m)),
        ("ARP", &|m| {
            arp(
                &att,
                Ipv4Addr::new(198, 51, 100, 7),
                Ipv4Addr::new(198, 51, 100, 8),
                m,
            )
        }),
    ];
    for (what, build) in control {
        assert!(
            reaches(&att, b, build),
            "control: {what} without a profile address must cross"
        );
    }

    let held: [(&str, &Build<'_>); 6] = [
        ("IPv4 source", &|m| udp(&to_b, a.v4.into(), outside4(8), m)),
        ("IPv4 destination", &|m| {
            udp(&to_b, outside4(7), b.v4.into(), m)
        }),
        ("IPv6 source", &|m| udp(&to_b, a6.into(), outside6(8), m)),
        ("IPv6 destination", &|m| {
            udp(&to_b, outside6(7), b6.into(), m)
        }),
        ("ARP sender", &|m| {
            arp(&att, a.v4, Ipv4Addr::new(198, 51, 100, 8), m)
        }),
        ("ARP target", &|m| arp(&att, Ipv4Addr::UNSPECIFIED, b.v4, m)),
    ];
    for (what, build) in &held {
        assert!(
            !reaches(&att, b, build),
            "a frame with the profile's {what} crossed"
        );
    }
    br_netfilter(&lab, true);
    for (what, build) in &held {
        assert!(
            !reaches(&att, b, build),
            "a frame with the profile's {what} crossed (br_netfilter on)"
        );
    }
    // The rules and maps read back as planned; what verify names is the
    // two unknown ports themselves (until a sweep quarantines them).
    let drift = lab.host.verify(&lab.plan).unwrap();
    assert_eq!(drift.len(), 4, "{drift:#?}");
    assert!(
        drift.iter().all(
            |d| matches!(d, HostDrift::Port { port, .. } if *port == a.port || *port == b.port)
        ),
        "{drift:#?}"
    );
}
