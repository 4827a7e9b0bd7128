//! DHCP through the quarantine and through fragments, and the gateway's
//! broadcast replies as a channel between siblings (docs/security.md, L2
//! classes 6 and 7), with real frames and the real gateway (dnsmasq with the
//! reservations the lifecycle writes): each attack first lands on the lab
//! without corral's rules (the control), then is held once corral is
//! applied, while the legitimate exchange still works.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use corral_drill::attack::dhcp::{self, Shape};
use corral_drill::attack::l2::Attacker;
use corral_drill::attack::{Outcome, gateway_mac};
use corral_drill::lab::topology::SandboxNs;
use corral_drill::lab::{Lab, LabGateways};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;

const T: Duration = Duration::from_millis(1500);

fn lab() -> Lab {
    Lab::new(&Config::builtin_default().profiles, &Resolution::new()).unwrap()
}

/// The attacker and its sibling: two sandboxes of the `internet` profile
/// (IPv4 and IPv6, a resolver on the gateway).
fn pair(lab: &Lab) -> (&SandboxNs, &SandboxNs) {
    let mut it = lab.topo.sandboxes_of("internet");
    (it.next().unwrap(), it.next().unwrap())
}

fn landed(o: Outcome, what: &str) {
    assert!(o.landed, "control: {what} did not land: {}", o.detail);
    eprintln!("control, {what}: {}", o.detail);
}

fn held(o: Outcome, what: &str) {
    assert!(!o.landed, "{what} landed through corral: {}", o.detail);
    eprintln!("enforced, {what}: {}", o.detail);
}

/// The victim's own lease, as its own MAC.
fn leases(sb: &SandboxNs, xid: u32) {
    let l = dhcp::lease(sb, xid, T).unwrap();
    assert_eq!(l.map(|l| l.addr), Some(sb.v4), "{}'s own lease", sb.name);
}

/// busybox udhcpc in `sb` on eth0 (its client identifier included, as a
/// real client sends it): the address it was given.
fn udhcpc(sb: &SandboxNs, dir: &Path) -> String {
    let client = corral_test_support::Udhcpc::in_dir(dir);
    let status = sb
        .ns
        .spawn(client.command("eth0", 6))
        .unwrap()
        .wait()
        .unwrap();
    assert!(status.success(), "udhcpc got no lease ({status})");
    client.bound().unwrap()
}

/// Class 6 from a bound port: a DISCOVER and a DECLINE cut into fragments
/// (the first ends before `chaddr`, the second has no transport header)
/// and fragmented DNS queries, IPv4 and IPv6. Control: without corral's
/// rules each lands (the fragmented DECLINE takes the sibling's lease
/// away); with them the unfragmented DISCOVER and queries are still
/// answered and the fragmented ones are not.
#[test]
fn class6_fragments_from_a_bound_port_never_reach_the_gateway() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let (a, b) = pair(&lab);
    let mac = |sb| gateway_mac(&lab.topo, sb).unwrap();
    let servers = [IpAddr::from(a.gateway_v4), a.gateway_v6.unwrap().into()];
    lab.control().unwrap();
    {
        let gw = LabGateways::start(&lab).unwrap();
        gw.upstream
            .set(dhcp::QUERY_NAME, &["198.18.1.2".parse().unwrap()], 60);
        let att = Attacker::new(a).unwrap();
        landed(
            dhcp::offer_for(&att, att.mac(), 0x0f01, Shape::Fragments, T).unwrap(),
            "a fragmented DISCOVER",
        );
        for s in servers {
            assert!(
                dhcp::dns_answered(a, s, mac(a), true, T).unwrap(),
                "control: a fragmented query to {s} was not answered"
            );
        }
        leases(b, 0x0f02);
        landed(
            dhcp::declined(&att, b, Shape::Fragments, T).unwrap(),
            "a fragmented DECLINE of the sibling's address",
        );
    }
    // Fresh gateways: dnsmasq holds a declined reservation back for ten
    // minutes.
    lab.apply().unwrap();
    let gw = LabGateways::start(&lab).unwrap();
    gw.upstream
        .set(dhcp::QUERY_NAME, &["198.18.1.2".parse().unwrap()], 60);
    let att = Attacker::new(a).unwrap();
    landed(
        dhcp::offer_for(&att, att.mac(), 0x0f03, Shape::Whole, T).unwrap(),
        "the unfragmented DISCOVER through corral",
    );
    held(
        dhcp::offer_for(&att, att.mac(), 0x0f04, Shape::Fragments, T).unwrap(),
        "a fragmented DISCOVER",
    );
    for s in servers {
        assert!(
            dhcp::dns_answered(a, s, mac(a), false, T).unwrap(),
            "an unfragmented query to {s} was not answered through corral"
        );
        assert!(
            !dhcp::dns_answered(a, s, mac(a), true, T).unwrap(),
            "a fragmented query to {s} was answered through corral"
        );
    }
    for shape in [Shape::Fragments, Shape::Whole] {
        held(
            dhcp::declined(&att, b, shape, T).unwrap(),
            &format!("a {shape:?} DECLINE of the sibling's address"),
        );
    }
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(udhcpc(b, dir.path()), b.v4.to_string());
}

/// Class 6 from a quarantined port (one nobody bound): a DISCOVER naming
/// a bound sibling's MAC gets the sibling's reservation offered, and its
/// DECLINE disables it, without corral's rules; through corral neither
/// reaches the gateway, the sibling keeps its lease and its reservation
/// is still offered to it.
#[test]
fn class6_a_quarantined_port_cannot_name_a_bound_mac() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let mut lab = lab();
    let (a, b) = pair(&lab);
    let a_port = a.port.clone();
    let b_mac = b.mac.octets();
    lab.control().unwrap();
    {
        let _gw = LabGateways::start(&lab).unwrap();
        let (a, b) = pair(&lab);
        let att = Attacker::new(a).unwrap();
        let o = dhcp::offer_for(&att, b_mac, 0x0e01, Shape::Whole, T).unwrap();
        assert!(o.detail.contains(&b.v4.to_string()), "{}", o.detail);
        landed(o, "a DISCOVER naming the sibling's MAC");
        landed(
            dhcp::declined(&att, b, Shape::Whole, T).unwrap(),
            "a DECLINE naming the sibling's MAC",
        );
    }
    // Everyone but `a` bound (and reserved).
    let rest: Vec<_> = lab
        .plan
        .bindings
        .iter()
        .filter(|x| x.port.as_str() != a_port)
        .cloned()
        .collect();
    lab.plan = lab.plan.with_bindings(&lab.profiles, rest).unwrap();
    let report = lab.apply().unwrap();
    assert!(
        report.ports.iter().any(|p| p.port == a_port && !p.bound),
        "{:#?}",
        report.ports
    );
    let _gw = LabGateways::start(&lab).unwrap();
    let (a, b) = pair(&lab);
    let att = Attacker::new(a).unwrap();
    held(
        dhcp::offer_for(&att, b_mac, 0x0e02, Shape::Whole, T).unwrap(),
        "a DISCOVER naming the sibling's MAC",
    );
    held(
        dhcp::declined(&att, b, Shape::Whole, T).unwrap(),
        "a DECLINE naming the sibling's MAC",
    );
    // Its own MAC still reaches the gateway (which has no reservation for
    // it): the quarantine still lets DHCP through.
    let cap = corral_drill::raw::Capture::open(&lab.topo.host, &a.bridge).unwrap();
    att.send(
        &corral_drill::raw::dhcp::ClientMessage::discover(0x0e03, att.mac())
            .frame(att.mac())
            .unwrap(),
    )
    .unwrap();
    // Ethernet 14 + IPv4 20 + UDP 8, then the xid at BOOTP offset 4.
    let xid_at = 14 + 20 + 8 + 4;
    let seen = cap
        .wait_for(T, |r| {
            r.direction == corral_drill::raw::Direction::Incoming
                && r.frame.get(6..12) == Some(&att.mac()[..])
                && r.frame.get(xid_at..xid_at + 4) == Some(&0x0e03u32.to_be_bytes()[..])
        })
        .unwrap();
    assert!(
        seen.is_some(),
        "the quarantined port's own DISCOVER was dropped"
    );
    leases(b, 0x0e04);
}

/// Class 7: the gateway's broadcast OFFER to one client (which echoes
/// its transaction id) reaches a sibling's port without corral's rules;
/// through corral only the client's own port gets it, and real clients
/// still get their leases.
#[test]
fn class7_a_broadcast_offer_reaches_its_client_alone() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let (a, b) = pair(&lab);
    lab.control().unwrap();
    {
        let _gw = LabGateways::start(&lab).unwrap();
        let att = Attacker::new(a).unwrap();
        let (own, o) = dhcp::broadcast_echo(&att, b, 0x0d01, T).unwrap();
        assert!(own, "control: the attacker got no offer");
        landed(o, "the broadcast offer seen by a sibling");
    }
    lab.apply().unwrap();
    let _gw = LabGateways::start(&lab).unwrap();
    let att = Attacker::new(a).unwrap();
    let (own, o) = dhcp::broadcast_echo(&att, b, 0x0d02, T).unwrap();
    assert!(own, "the client got no offer of its own through corral");
    held(o, "the broadcast offer seen by a sibling");
    let (own, o) = dhcp::broadcast_echo(&Attacker::new(b).unwrap(), a, 0x0d03, T).unwrap();
    assert!(own, "the sibling got no offer of its own through corral");
    held(o, "the sibling's broadcast offer seen by the first");
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(udhcpc(a, dir.path()), a.v4.to_string());
    assert!(lab.host.verify(&lab.plan).unwrap().is_empty());
}

/// The drop log follows the new rules: a fragment from a bound port is
/// recorded under `l2-port-ip4/fragment` naming its sandbox, the
/// gateway's broadcast OFFER withheld from a sibling's port under
/// `l2-postrouting/dhcp-reply`. Control: on bare bridges neither is
/// recorded (and both frames get through).
#[test]
fn the_new_drops_are_logged_under_their_rule_ids() {
    if !corral_test_support::gate::netns() {
        return;
    }
    use corral_drill::lab::topology::PUBLIC_V4;
    use corral_drill::raw::fragment;
    use corral_drill::raw::frame::{self, Link, Transport};
    use corral_egress::droplog::{self as log, BindingAttribution, Entry, Reader};
    use std::net::Ipv4Addr;
    use std::time::Instant;

    fn entries_to(reader: &mut Reader, dst: IpAddr, wait: Duration) -> Vec<Entry> {
        let end = Instant::now() + wait;
        let mut out = Vec::new();
        while let Some(e) = reader
            .next_timeout(Some(end.saturating_duration_since(Instant::now())))
            .unwrap()
        {
            if e.dst == dst {
                out.push(e);
            }
        }
        out
    }

    let lab = lab();
    let (a, b) = pair(&lab);
    lab.control().unwrap();
    let mut reader = Reader::open_in(&lab.topo.host, log::GROUP).unwrap();
    let target = IpAddr::V4(PUBLIC_V4[0]);
    let shoot = || {
        let f = frame::ip(
            &Link::new(a.mac.octets(), gateway_mac(&lab.topo, a).unwrap()),
            a.v4.into(),
            target,
            64,
            Transport::Udp {
                sport: 40_000,
                dport: 4500,
            },
            &[0x55; 64],
        )
        .unwrap();
        let tx = corral_drill::raw::PacketSocket::open(&a.ns, "eth0").unwrap();
        for piece in fragment::split(&f, 16).unwrap() {
            tx.send(&piece).unwrap();
        }
    };
    let offer = |xid| {
        let att = Attacker::new(a).unwrap();
        dhcp::broadcast_echo(&att, b, xid, T).unwrap()
    };
    let broadcast = IpAddr::V4(Ipv4Addr::BROADCAST);
    {
        let _gw = LabGateways::start(&lab).unwrap();
        shoot();
        let (own, seen) = offer(0x0c01);
        assert!(own && seen.landed, "control: {}", seen.detail);
        assert!(entries_to(&mut reader, target, Duration::from_millis(500)).is_empty());
        assert!(entries_to(&mut reader, broadcast, Duration::from_millis(100)).is_empty());
    }
    lab.apply().unwrap();
    let _gw = LabGateways::start(&lab).unwrap();
    let who = BindingAttribution::new(&lab.plan.bindings, |p| {
        lab.topo
            .sandboxes
            .iter()
            .find(|s| s.port == p.port.as_str())
            .map(|s| s.name.clone())
    });
    shoot();
    let got = entries_to(&mut reader, target, Duration::from_millis(500));
    assert!(!got.is_empty(), "no record of the fragments");
    for e in &got {
        let rec = e.blocked(&who);
        eprintln!("{}", serde_json::to_string(&rec).unwrap());
        assert_eq!(rec.rule, "l2-port-ip4/fragment");
        assert_eq!(rec.sandbox.as_deref(), Some(a.name.as_str()));
    }
    let (own, seen) = offer(0x0c02);
    assert!(own && !seen.landed, "{}", seen.detail);
    // The host's own copy of its broadcast meets the inet rules too (and
    // is logged there, as before): only the bridge table's records count.
    let got: Vec<Entry> = entries_to(&mut reader, broadcast, Duration::from_millis(500))
        .into_iter()
        .filter(|e| {
            e.blocked(&who)
                .rule
                .starts_with(corral_egress::plan::droplog::L2_PREFIX)
        })
        .collect();
    assert!(!got.is_empty(), "no record of the withheld offer");
    for e in &got {
        let rec = e.blocked(&who);
        eprintln!("{}", serde_json::to_string(&rec).unwrap());
        assert_eq!(rec.rule, "l2-postrouting/dhcp-reply");
        assert_eq!(e.indev, None, "postrouting has no input interface");
    }
}

/// A DECLINE with the attacker's own `chaddr` (all the bridge lets a bound
/// port name) but the sibling's client identifier (option 61, which no
/// nft rule can read): dnsmasq finds the sibling's lease by that
/// identifier and drops it. Control: the gateway's configuration without
/// `dhcp-ignore-clid`, run by hand on the bare bridges (the sibling's
/// lease leaves the lease file). Through corral's gateway the sibling's
/// lease stays.
#[test]
fn class6_a_siblings_client_identifier_does_not_reach_its_lease() {
    if !corral_test_support::gate::netns() {
        return;
    }
    use corral_drill::lab::gateways::UPSTREAM;
    use corral_gateway::{DnsTiming, GatewayPaths, GatewaySpec, render, reservations_text};
    use std::net::SocketAddr;

    // The DECLINE, from `a`'s own MAC and `chaddr`, with `b`'s client
    // identifier as busybox udhcpc sends it (type 1, the MAC).
    let decline = |a: &SandboxNs, b: &SandboxNs| {
        let mut p = corral_drill::raw::dhcp::ClientMessage::discover(0x0b01, a.mac.octets())
            .payload()[..240]
            .to_vec();
        p.extend_from_slice(&[53, 1, 4, 50, 4]);
        p.extend_from_slice(&b.v4.octets());
        p.extend_from_slice(&[54, 4]);
        p.extend_from_slice(&a.gateway_v4.octets());
        p.extend_from_slice(&[61, 7, 1]);
        p.extend_from_slice(&b.mac.octets());
        p.push(255);
        p.resize(300, 0);
        let f = corral_drill::raw::frame::ip(
            &corral_drill::raw::frame::Link::new(a.mac.octets(), [0xff; 6]),
            std::net::Ipv4Addr::UNSPECIFIED.into(),
            std::net::Ipv4Addr::BROADCAST.into(),
            64,
            corral_drill::raw::frame::Transport::Udp {
                sport: 68,
                dport: 67,
            },
            &p,
        )
        .unwrap();
        Attacker::new(a).unwrap().send(&f).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    };
    let holds = |leases: &Path, b: &SandboxNs| {
        std::fs::read_to_string(leases)
            .unwrap_or_default()
            .contains(&format!(" {} ", b.v4))
    };

    let lab = lab();
    let (a, b) = pair(&lab);
    let profile = lab.profiles.get("internet").unwrap();
    lab.control().unwrap();
    {
        // The control gateway: corral's configuration less the one line.
        let spec = GatewaySpec::from_profile(
            profile,
            &[SocketAddr::new(UPSTREAM.into(), 53)],
            DnsTiming::default(),
        )
        .unwrap();
        let text = render(&spec).unwrap();
        assert!(text.contains("\ndhcp-ignore-clid\n"), "{text}");
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let file = |n: &str| dir.path().join(n);
        std::fs::write(file("conf"), text.replace("\ndhcp-ignore-clid\n", "\n")).unwrap();
        std::fs::write(
            file("hosts"),
            reservations_text(&profile.bridge, &lab.plan.bindings),
        )
        .unwrap();
        let mut cmd = Command::new(corral_gateway::DEFAULT_DNSMASQ);
        cmd.arg(format!("--conf-file={}", file("conf").display()))
            .arg(format!("--pid-file={}", file("pid").display()))
            .arg(format!("--dhcp-leasefile={}", file("leases").display()))
            .arg(format!("--dhcp-hostsfile={}", file("hosts").display()))
            .arg(format!("--log-facility={}", file("log").display()));
        let status = lab.topo.host.spawn(cmd).unwrap().wait().unwrap();
        assert!(status.success(), "the control dnsmasq did not start");
        let pid: i32 = std::fs::read_to_string(file("pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let dir_for_udhcpc = tempfile::tempdir().unwrap();
        assert_eq!(udhcpc(b, dir_for_udhcpc.path()), b.v4.to_string());
        std::thread::sleep(Duration::from_millis(300));
        let before = holds(&file("leases"), b);
        decline(a, b);
        let after = holds(&file("leases"), b);
        // SAFETY: a plain signal to the daemon this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        assert!(before, "control: the sibling's lease was not recorded");
        assert!(!after, "control: the sibling's lease survived the DECLINE");
        eprintln!("control: the DECLINE with the sibling's identifier dropped its lease");
    }
    lab.apply().unwrap();
    let gw = LabGateways::start(&lab).unwrap();
    let lease_file = GatewayPaths::new(gw.state_dir(), &profile.bridge).leases();
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(udhcpc(b, dir.path()), b.v4.to_string());
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        holds(&lease_file, b),
        "the sibling's lease was not recorded"
    );
    decline(a, b);
    assert!(
        holds(&lease_file, b),
        "the sibling's lease left with a DECLINE naming its identifier"
    );
    leases(b, 0x0b02);
}

/// Classes 6 and 7 against corral's own DHCP server (`dns = "corral"`:
/// corral's resolver and DHCP server serve the bridge, dnsmasq only its
/// router advertisements), **without** corral's rules first: the server
/// alone holds them. A DISCOVER naming the sibling's MAC is answered out of
/// the sibling's port, never the attacker's; a DECLINE naming it, whole or
/// in fragments, takes nothing away; a broadcast offer reaches its client
/// alone. The controls are the dnsmasq runs above, where each lands on the
/// bare lab. Then the same holds with the rules applied, and a stock
/// client gets its lease through both.
#[test]
fn corrals_dhcp_server_holds_classes_6_and_7_without_the_rules() {
    if !corral_test_support::gate::netns() {
        return;
    }
    on_corrals_gateway(|_lab, gw, a, b, when| {
        assert_eq!(gw.resolvers.len(), 1, "corral's gateway is hosted");
        let att = Attacker::new(a).unwrap();
        leases(b, 0x0c01);
        held(
            dhcp::offer_for(&att, b.mac.octets(), 0x0c02, Shape::Whole, T).unwrap(),
            &format!("{when}: a DISCOVER naming the sibling's MAC"),
        );
        for shape in [Shape::Whole, Shape::Fragments] {
            held(
                dhcp::declined(&att, b, shape, T).unwrap(),
                &format!("{when}: a {shape:?} DECLINE of the sibling's address"),
            );
        }
        let (own, o) = dhcp::broadcast_echo(&att, b, 0x0c03, T).unwrap();
        assert!(own, "{when}: the client got no offer of its own");
        held(o, &format!("{when}: the broadcast offer seen by a sibling"));
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(udhcpc(a, dir.path()), a.v4.to_string(), "{when}");
        let served = gw.resolvers[0].dhcp().counters();
        assert!(
            served.replied.load(std::sync::atomic::Ordering::Relaxed) >= 4,
            "{when}: corral's server did not answer these"
        );
    });
}

/// A lab whose one profile corral's own gateway serves (`dns = "corral"`,
/// IPv4 and a /64).
fn corral_gateway_lab() -> Lab {
    let cfg = Config::from_toml_str(
        r#"
[[profile]]
name = "dev"
bridge = "cb-dev"
subnet = "10.9.0.0/24"
subnet_v6 = "fd00:9::/64"
mode = "allowlist"
dns = "corral"
allow = ["*.corral.test"]
"#,
        "corral.toml",
    )
    .unwrap();
    Lab::new(&cfg.profiles, &Resolution::new()).unwrap()
}

/// Whether `r` is a router advertisement (Ethernet, IPv6 without
/// extension headers, ICMPv6 type 134).
fn is_advert(r: &corral_drill::raw::Received) -> bool {
    let f = &r.frame;
    f.get(12..14) == Some(&[0x86, 0xdd][..]) && f.get(20) == Some(&58) && f.get(54) == Some(&134)
}

/// corral's router advertisements (`dns = "corral"`, dnsmasq sends none
/// there): a sandbox's solicitation is answered out of its own port
/// alone, once however often it asks within a second, and a sibling's
/// capture sees nothing of it (control: a frame the host floods over the
/// bridge reaches that capture). Through corral's rules and, first,
/// without them: the advertiser alone decides where its answer goes.
#[test]
fn corrals_router_advertisements_answer_the_soliciting_port_alone() {
    if !corral_test_support::gate::netns() {
        return;
    }
    on_corrals_gateway(|lab, gw, a, b, when| {
        let adverts = gw.resolvers[0].adverts().expect("a /64: advertisements");
        // The round every port gets at start is over before anyone asks.
        std::thread::sleep(Duration::from_millis(300));
        let own = corral_drill::raw::Capture::open(&a.ns, "eth0").unwrap();
        let sibling = corral_drill::raw::Capture::open(&b.ns, "eth0").unwrap();
        let before = adverts
            .counters()
            .sent
            .load(std::sync::atomic::Ordering::Relaxed);
        for _ in 0..5 {
            corral_drill::slaac::solicit(&a.ns).unwrap();
        }
        let first = own.wait_for(T, is_advert).unwrap();
        assert!(
            first.is_some(),
            "{when}: the soliciting sandbox got no advertisement ({:?} sent, {:?} ignored, {:?} failed)",
            adverts.counters().sent,
            adverts.counters().ignored,
            adverts.counters().failed
        );
        assert_eq!(
            own.wait_for(Duration::from_millis(500), is_advert)
                .unwrap()
                .map(|r| r.frame.len()),
            None,
            "{when}: five solicitations within a second got more than one answer"
        );
        assert_eq!(
            sibling
                .wait_for(Duration::from_millis(300), is_advert)
                .unwrap()
                .map(|r| r.frame.len()),
            None,
            "{when}: a sibling saw the answer to another sandbox's solicitation"
        );
        let sent = adverts
            .counters()
            .sent
            .load(std::sync::atomic::Ordering::Relaxed)
            - before;
        assert_eq!(
            sent, 1,
            "{when}: {sent} advertisements for one sandbox's five solicitations"
        );
        // Control: the sibling's capture sees what the bridge floods.
        let marker = corral_drill::raw::Marker::fresh();
        let host = corral_drill::raw::PacketSocket::open(&lab.topo.host, "cb-dev").unwrap();
        let f = corral_drill::raw::frame::ip(
            &corral_drill::raw::frame::Link::new(host.mac(), corral_drill::raw::frame::BROADCAST),
            IpAddr::V4(a.gateway_v4),
            IpAddr::V4(std::net::Ipv4Addr::BROADCAST),
            64,
            corral_drill::raw::frame::Transport::Udp { sport: 9, dport: 9 },
            marker.bytes(),
        )
        .unwrap();
        host.send(&f).unwrap();
        assert!(
            sibling.saw(&marker, T).unwrap(),
            "control: the sibling's capture sees nothing"
        );
    });
}

/// Runs `each` on [`corral_gateway_lab`] twice, with corral's gateway
/// started afresh each time: first on bare bridges (no corral rules:
/// what corral's gateway holds by itself), then with the rules applied
/// (checked in force afterwards). `each` gets the lab, the gateways, the
/// profile's two sandboxes and which run it is.
fn on_corrals_gateway(mut each: impl FnMut(&Lab, &LabGateways, &SandboxNs, &SandboxNs, &str)) {
    let lab = corral_gateway_lab();
    let mut it = lab.topo.sandboxes_of("dev");
    let (a, b) = (it.next().unwrap(), it.next().unwrap());
    lab.control().unwrap();
    each(&lab, &LabGateways::start(&lab).unwrap(), a, b, "bare");
    lab.apply().unwrap();
    each(
        &lab,
        &LabGateways::start(&lab).unwrap(),
        a,
        b,
        "through corral",
    );
    assert!(lab.host.verify(&lab.plan).unwrap().is_empty());
}
