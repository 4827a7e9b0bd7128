//! corral's own DHCP server with real packets, no dnsmasq anywhere: the
//! drill's lab with corral's rules applied and every port bound, one
//! server per bridge. A stock client (busybox udhcpc) gets its reservation
//! with the router and resolver; a client without a reservation gets
//! nothing; replies reach their client alone; a DECLINE or RELEASE takes
//! nothing away.

// Test helpers outside #[test] fns unwrap too: a failed setup is a failed test.
#![allow(clippy::unwrap_used)]

mod gateway_lab;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use corral_drill::lab::Topology;
use corral_drill::raw::dhcp::{ClientMessage, MessageType, obtain, parse_reply};
use corral_drill::raw::frame::{self, BROADCAST, Link, Transport};
use corral_drill::raw::{Capture, Marker, PacketSocket};
use corral_egress::host::Host;
use corral_egress::plan::{HostPlan, PlanSettings};
use corral_egress::resolve::Resolution;
use corral_gateway::dhcp::{HostedDhcp, Reservation, Server};
use corral_gateway::{DnsTiming, GatewayPaths, GatewaySpec};
use corral_sandbox_core::{EgressMode, HostName, ProfileSet};
use gateway_lab::{STATIC_ADDR, T, UPSTREAM, dhcp_lease};

/// The lab, corral's rules applied with every port bound, and one corral
/// DHCP server per bridge (no dnsmasq).
struct Lab {
    topo: Topology,
    profiles: ProfileSet,
    plan: HostPlan,
    state: tempfile::TempDir,
    servers: Vec<HostedDhcp>,
}

fn lab() -> Lab {
    let profiles = ProfileSet::new(gateway_lab::allowlist_and_offline()).unwrap();
    let topo = Topology::build(&profiles).unwrap();
    // The allowlist names one host; the plan needs its addresses, and no
    // test resolves through the machine's resolver.
    let mut resolution = Resolution::new();
    resolution.insert(
        &HostName::new("api.corral.test").unwrap(),
        [IpAddr::V4(STATIC_ADDR)],
    );
    let plan = HostPlan::build(&profiles, &PlanSettings::default(), &resolution)
        .unwrap()
        .with_bindings(&profiles, topo.bindings().unwrap())
        .unwrap();
    Host::in_netns(topo.host.try_clone().unwrap())
        .apply(&plan)
        .unwrap();
    topo.attach_sandboxes(true).unwrap();
    let state = tempfile::tempdir().unwrap();
    let servers = profiles
        .iter()
        .map(|p| {
            let spec = GatewaySpec::from_profile(
                p,
                &[SocketAddr::new(UPSTREAM.into(), 53)],
                DnsTiming::default(),
            )
            .unwrap();
            let dir = GatewayPaths::new(state.path(), &p.bridge).dir().to_owned();
            HostedDhcp::start(
                &topo.host,
                Server::for_spec(&spec, &plan.bindings),
                p.bridge.as_str(),
                &dir,
            )
            .unwrap()
        })
        .collect();
    Lab {
        topo,
        profiles,
        plan,
        state,
        servers,
    }
}

fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key))
        .unwrap_or("")
}

/// busybox udhcpc, as a guest runs it, is given exactly its reservation,
/// the gateway as router, the gateway as resolver only where the profile
/// resolves, and the lease time; the lease lands in the gateway's lease
/// file, in the format `corral_gateway::leases` reads.
#[test]
fn a_stock_client_gets_its_reservation_and_the_network() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    for p in &lab.profiles {
        for sb in lab.topo.sandboxes_of(p.name.as_str()) {
            let dir = tempfile::tempdir().unwrap();
            let (bound, took) = dhcp_lease(&sb.ns, dir.path());
            eprintln!("{}: {bound:?} in {took:?}", sb.name);
            assert_eq!(bound.len(), 1, "{bound:?}");
            let line = &bound[0];
            assert_eq!(field(line, "ip="), sb.v4.to_string(), "{line}");
            assert_eq!(field(line, "router="), p.gateway_v4().to_string(), "{line}");
            assert_eq!(field(line, "lease="), "3600", "{line}");
            let dns = if p.mode == EgressMode::None {
                String::new()
            } else {
                p.gateway_v4().to_string()
            };
            assert_eq!(field(line, "dns="), dns, "{line}");
        }
        let leases = corral_gateway::leases(lab.state.path(), &p.bridge).unwrap();
        let mut got: Vec<_> = leases.iter().map(|l| (l.mac.clone(), l.address)).collect();
        got.sort();
        let mut want: Vec<_> = lab
            .topo
            .sandboxes_of(p.name.as_str())
            .map(|sb| (sb.mac.to_string(), IpAddr::V4(sb.v4)))
            .collect();
        want.sort();
        assert_eq!(got, want, "{leases:?}");
    }
    for s in &lab.servers {
        assert!(s.is_serving());
    }
}

/// A port whose MAC has no reservation gets no answer at all; once it
/// has one, the same exchange gets its address (the control: the client
/// and the path work).
#[test]
fn a_client_without_a_reservation_gets_nothing() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let mut sbs = lab.topo.sandboxes_of("agent");
    let (one, two) = (sbs.next().unwrap(), sbs.next().unwrap());
    let server = &lab.servers[0];
    let only_two: Vec<Reservation> = lab
        .plan
        .bindings
        .iter()
        .filter(|b| b.port.as_str() == two.port)
        .map(Reservation::from)
        .collect();
    server.set_reservations(only_two);
    let sock = PacketSocket::open(&one.ns, "eth0").unwrap();
    assert_eq!(obtain(&sock, sock.mac(), sock.mac(), 11, T).unwrap(), None);
    let ignored = server
        .counters()
        .ignored
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(ignored >= 1, "the DISCOVER never reached the server");
    let all: Vec<Reservation> = lab
        .plan
        .bindings
        .iter()
        .filter(|b| b.bridge.as_str() == "cb-agent")
        .map(Reservation::from)
        .collect();
    server.set_reservations(all);
    let lease = obtain(&sock, sock.mac(), sock.mac(), 12, T)
        .unwrap()
        .unwrap();
    assert_eq!(lease.addr, one.v4);
    assert_eq!(lease.router, Some(one.gateway_v4));
}

/// Every reply, broadcast ones included, leaves by its client's port
/// only: a sibling on the same bridge captures none of them (its xid
/// would be a channel). The control: a broadcast the host sends over
/// the bridge does reach that sibling's capture.
#[test]
fn replies_reach_their_client_and_no_sibling() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let mut sbs = lab.topo.sandboxes_of("agent");
    let (one, two) = (sbs.next().unwrap(), sbs.next().unwrap());
    let sibling = Capture::open(&two.ns, "eth0").unwrap();
    let sock = PacketSocket::open(&one.ns, "eth0").unwrap();
    // Broadcast flag set (the drill's client asks for broadcast replies):
    // the OFFER and the ACK go to ff:ff:ff:ff:ff:ff and 255.255.255.255.
    let lease = obtain(&sock, sock.mac(), sock.mac(), 21, T)
        .unwrap()
        .unwrap();
    assert_eq!(lease.addr, one.v4);
    let seen = sibling
        .wait_for(Duration::from_millis(500), |r| {
            parse_reply(&r.frame).is_some()
        })
        .unwrap();
    assert_eq!(seen, None, "a sibling saw a DHCP reply");

    // Control: a broadcast from the host over the bridge reaches it.
    let marker = Marker::fresh();
    let host = PacketSocket::open(&lab.topo.host, "cb-agent").unwrap();
    let f = frame::ip(
        &Link::new(host.mac(), BROADCAST),
        IpAddr::V4(one.gateway_v4),
        IpAddr::V4(Ipv4Addr::BROADCAST),
        64,
        Transport::Udp { sport: 9, dport: 9 },
        marker.bytes(),
    )
    .unwrap();
    host.send(&f).unwrap();
    assert!(
        sibling.saw(&marker, T).unwrap(),
        "control: the sibling's capture sees no broadcast at all"
    );
}

/// A client that declines or releases its own address takes nothing
/// away: the reservation is the port's binding, so the next DISCOVER is
/// offered the same address at once (dnsmasq holds a declined static
/// address back for ten minutes), and the lease file keeps it.
#[test]
fn decline_and_release_take_nothing_away() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let one = lab.topo.sandbox("agent").unwrap();
    let sock = PacketSocket::open(&one.ns, "eth0").unwrap();
    let lease = obtain(&sock, sock.mac(), sock.mac(), 31, T)
        .unwrap()
        .unwrap();
    let decline = ClientMessage::decline(32, sock.mac(), lease.addr, lease.server);
    sock.send(&decline.frame(sock.mac()).unwrap()).unwrap();
    let release = ClientMessage::release(33, sock.mac(), lease.addr, lease.server);
    let server_mac = PacketSocket::open(&lab.topo.host, "cb-agent")
        .unwrap()
        .mac();
    sock.send(&release.release_frame(sock.mac(), server_mac).unwrap())
        .unwrap();
    // Neither gets an answer.
    for xid in [32, 33] {
        let any = corral_drill::raw::dhcp::await_reply(
            &sock,
            xid,
            &[MessageType::Offer, MessageType::Ack, MessageType::Nak],
            Duration::from_millis(300),
        )
        .unwrap();
        assert_eq!(any, None);
    }
    let again = obtain(&sock, sock.mac(), sock.mac(), 34, T)
        .unwrap()
        .unwrap();
    assert_eq!(again.addr, one.v4);
    let leases = corral_gateway::leases(
        lab.state.path(),
        &corral_sandbox_core::BridgeName::new("cb-agent").unwrap(),
    )
    .unwrap();
    assert!(
        leases.iter().any(|l| l.address == IpAddr::V4(one.v4)),
        "{leases:?}"
    );
}
