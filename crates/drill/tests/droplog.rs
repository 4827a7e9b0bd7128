//! The drop log with real packets: each blocked packet is one record
//! naming its sandbox, destination and rule; an allowed one is none; a
//! flood is bounded by the profile's log budget, the rest counted as
//! suppressed, and the host keeps forwarding. Every probe runs first
//! against bare bridges (no corral table): no record may appear there.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use corral_drill::lab::topology::{PRIVATE, PUBLIC_V4};
use corral_drill::lab::{Lab, Observed, tcp, udp};
use corral_egress::droplog::{self, BindingAttribution, Entry, Reader};
use corral_egress::nft;
use corral_egress::plan::{AddrFamily, L4Proto, Match, RulePlan, TableFamily, droplog as rules};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::Config;
use corral_sandbox_core::{FlowLimits, ProfileSet};

const PROFILE: &str = "internet";

fn lab() -> Lab {
    let cfg = Config::builtin_default();
    // Every packet of a blocked flow is a new flow to conntrack, and the
    // flood below sends 10,000 a second: without a rate this high they
    // would meet the per-source new-flow rate (docs/security.md class 12)
    // before the rule whose logging this file is about.
    let profiles = ProfileSet::new(
        cfg.profiles
            .iter()
            .cloned()
            .map(|mut p| {
                p.flows.new_per_second = FlowLimits::MAX;
                p
            })
            .collect(),
    )
    .unwrap();
    let lab = Lab::new(&profiles, &Resolution::new()).unwrap();
    lab.control().unwrap();
    lab
}

/// Entries that arrive within `wait`, to `dst` only (the sandbox's own
/// neighbour discovery and MLD are blocked, and logged, too).
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

fn attribution(lab: &Lab) -> BindingAttribution {
    BindingAttribution::new(&lab.plan.bindings, |b| {
        lab.topo
            .sandboxes
            .iter()
            .find(|s| s.port == b.port.as_str())
            .map(|s| s.name.clone())
    })
}

#[test]
fn each_blocked_packet_is_one_record_and_an_allowed_one_none() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let mut reader = Reader::open_in(&lab.topo.host, droplog::GROUP).unwrap();
    let sb = lab.sandbox(PROFILE);
    let t = Duration::from_millis(1500);
    let blocked = [
        (tcp(PRIVATE[0], 443), "tcp", 443),
        (udp(PRIVATE[1], 4500), "udp", 4500),
        (tcp(PRIVATE[5], 443), "tcp", 443),
    ];
    let allowed = tcp(PUBLIC_V4[0], 443);

    // Control: no corral table, everything connects, nothing is logged.
    for (p, _, _) in blocked.iter().chain([&(allowed, "tcp", 443)]) {
        assert_eq!(lab.probe(sb, p, t).observed, Observed::Connected, "{p}");
        let got = entries_to(&mut reader, p.ip(), Duration::from_millis(300));
        assert!(got.is_empty(), "control {p}: {got:?}");
    }

    lab.apply().unwrap();
    let who = attribution(&lab);
    for (p, proto, port) in &blocked {
        let r = lab.probe(sb, p, t);
        assert!(r.observed.blocked(), "{p}: {r:?}");
        let got = entries_to(&mut reader, p.ip(), Duration::from_millis(500));
        assert_eq!(got.len(), 1, "{p}: {got:?}");
        let rec = got[0].blocked(&who);
        println!("{p}: {}", serde_json::to_string(&rec).unwrap());
        assert_eq!(rec.sandbox.as_deref(), Some(sb.name.as_str()), "{rec:?}");
        assert_eq!(rec.profile, PROFILE);
        assert_eq!(rec.rule, "internet-out/reserved");
        assert_eq!(rec.dst, p.ip());
        let src: IpAddr = match p.ip() {
            IpAddr::V4(_) => sb.v4.into(),
            IpAddr::V6(_) => sb.v6.unwrap().into(),
        };
        assert_eq!(rec.src, src);
        assert_eq!((rec.protocol.as_str(), rec.dport), (*proto, Some(*port)));
        assert_eq!(rec.verdict, "reject");
    }
    assert_eq!(lab.probe(sb, &allowed, t).observed, Observed::Connected);
    let got = entries_to(&mut reader, allowed.ip(), Duration::from_millis(500));
    assert!(got.is_empty(), "allowed: {got:?}");
    assert_eq!(reader.lost(), 0);
}

/// The live counters of `rule` and of its suppressing twin (the rule
/// before it) in `chain`.
fn twin_counters(lab: &Lab, chain: &str, rule: &RulePlan) -> (u64, u64) {
    let plan_chain = lab
        .plan
        .inet
        .chains
        .iter()
        .find(|c| c.name == chain)
        .unwrap();
    let i = plan_chain.rules.iter().position(|r| r == rule).unwrap();
    let texts = [&plan_chain.rules[i], &plan_chain.rules[i - 1]]
        .map(|r| nft::fingerprint(TableFamily::Inet, chain, r).unwrap());
    let live = lab.topo.host.run(nft::read_live).unwrap().unwrap();
    let lc = live.table(TableFamily::Inet).unwrap().chain(chain).unwrap();
    let count = |t: &str| -> u64 {
        lc.rules
            .iter()
            .filter(|r| r.text == t)
            .map(|r| r.packets)
            .sum()
    };
    (count(&texts[0]), count(&texts[1]))
}

#[test]
fn a_flood_is_bounded_counted_and_the_host_keeps_forwarding() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let mut reader = Reader::open_in(&lab.topo.host, droplog::GROUP).unwrap();
    lab.apply().unwrap();
    let sb = lab.sandbox(PROFILE);
    let target = PRIVATE[0];
    // The logged rule the flood meets: UDP (not TCP) to reserved4.
    let chain = format!("{PROFILE}-out");
    let logged = lab
        .plan
        .inet
        .chains
        .iter()
        .find(|c| c.name == chain)
        .unwrap()
        .rules
        .iter()
        .find(|r| {
            r.log.is_some()
                && r.matches
                    .contains(&Match::DaddrInSet(AddrFamily::V4, "reserved4".into()))
                && !r.matches.contains(&Match::L4Proto(L4Proto::Tcp))
        })
        .unwrap()
        .clone();

    const PPS: u64 = 10_000;
    const SECS: u64 = 5;
    let flood = sb
        .ns
        .try_clone()
        .unwrap()
        .run(move || {
            std::thread::spawn(move || {
                let sock = UdpSocket::bind("0.0.0.0:0").unwrap();
                let to = SocketAddr::new(target, 9);
                let start = Instant::now();
                let mut sent = 0u64;
                // 100 datagrams every 10 ms.
                for tick in 0..(SECS * 100) {
                    for _ in 0..(PPS / 100) {
                        // Rejects come back as ICMP; an unconnected
                        // socket ignores them.
                        if sock.send_to(b"flood", to).is_ok() {
                            sent += 1;
                        }
                    }
                    let next = start + Duration::from_millis(10 * (tick + 1));
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
                (sent, start.elapsed())
            })
        })
        .unwrap();

    // During the flood: the same sandbox's allowed connection still
    // goes through the host, promptly.
    std::thread::sleep(Duration::from_secs(2));
    let during = lab.probe(sb, &tcp(PUBLIC_V4[0], 443), Duration::from_secs(1));
    let (sent, took) = flood.join().unwrap();
    assert_eq!(during.observed, Observed::Connected, "{during:?}");

    let got = entries_to(&mut reader, target, Duration::from_secs(1));
    let (logged_n, suppressed_n) = twin_counters(&lab, &chain, &logged);
    let secs = took.as_secs_f64();
    let budget = u64::from(rules::BURST) + (rules::RATE as f64 * (secs + 1.0)) as u64;
    let status = lab
        .topo
        .host
        .run(nft::read_live)
        .unwrap()
        .map(|live| nft::profile_counters(&lab.plan, &live))
        .unwrap();
    let mine = status.iter().find(|c| c.profile == PROFILE).unwrap();
    println!(
        "flood: sent {sent} in {secs:.2}s; records {}; logged counter {logged_n}; suppressed counter {suppressed_n}; lost {}; profile suppressed {}; probe during flood {} ms",
        got.len(),
        reader.lost(),
        mine.suppressed_packets,
        during.ms
    );
    assert_eq!(sent, PPS * SECS);
    // Every packet was blocked by exactly one of the twins.
    assert_eq!(logged_n + suppressed_n, sent);
    // Every logged packet reached the reader (none lost), and no more.
    assert_eq!(reader.lost(), 0);
    assert_eq!(got.len() as u64, logged_n);
    assert_eq!(suppressed_n, sent - got.len() as u64);
    // Bounded by the budget: burst plus rate over the flood's duration.
    assert!(got.len() as u64 <= budget, "{} > {budget}", got.len());
    assert!(mine.suppressed_packets >= suppressed_n);
    assert!(mine.blocked_packets >= sent);
}

/// A frame the bridge table drops: a forged IPv4 source from the
/// sandbox's own MAC, and a frame from a MAC its port was not bound to.
/// Each is one record under its `l2-…` rule id, logged with the profile's
/// bridge as input interface (where the collector takes the profile from);
/// neither source is bound, so neither names a sandbox.
#[test]
fn frames_the_bridge_table_drops_are_logged_with_their_bridge() {
    if !corral_test_support::gate::netns() {
        return;
    }
    use corral_drill::attack::{mac_of, udp_frame};
    use corral_drill::raw::{Marker, PacketSocket};

    let lab = lab();
    let mut reader = Reader::open_in(&lab.topo.host, droplog::GROUP).unwrap();
    let sb = lab.sandbox(PROFILE);
    let me = mac_of(&sb.ns, "eth0").unwrap();
    let port_mac = mac_of(&lab.topo.host, &sb.port).unwrap();
    let target = SocketAddr::new(IpAddr::V4(PUBLIC_V4[0]), 4500);
    let forged: IpAddr = "10.231.2.200".parse().unwrap();
    let stranger = [0x02, 0xde, 0xad, 0xbe, 0xef, 0x01];
    let shots = [
        (me, forged, "l2-port-ip4/forged-source"),
        (stranger, IpAddr::V4(sb.v4), "l2-port-in/wrong-mac"),
    ];
    let bridge_index = {
        let bridge = sb.bridge.clone();
        lab.topo
            .host
            .run(move || nix::net::if_::if_nametoindex(bridge.as_str()))
            .unwrap()
            .unwrap()
    };
    let tx = PacketSocket::open(&sb.ns, "eth0").unwrap();
    let send = |from_mac, src: IpAddr| {
        let f = udp_frame(
            from_mac,
            port_mac,
            SocketAddr::new(src, 40_000),
            target,
            &Marker::fresh(),
        )
        .unwrap();
        tx.send(&f).unwrap();
    };

    // Control: no corral table, the frames cross and nothing is logged.
    for (mac, src, _) in &shots {
        send(*mac, *src);
    }
    let got = entries_to(&mut reader, target.ip(), Duration::from_millis(500));
    assert!(got.is_empty(), "control: {got:?}");

    lab.apply().unwrap();
    let who = attribution(&lab);
    for (mac, src, rule) in &shots {
        send(*mac, *src);
        let got = entries_to(&mut reader, target.ip(), Duration::from_millis(500));
        assert_eq!(got.len(), 1, "{rule}: {got:?}");
        let e = &got[0];
        let rec = e.blocked(&who);
        println!(
            "{rule}: {} (in {:?})",
            serde_json::to_string(&rec).unwrap(),
            e.indev
        );
        assert_eq!(rec.rule, *rule);
        assert_eq!(rec.profile, "", "the prefix names no profile");
        assert_eq!(e.indev, Some(bridge_index), "logged in on the bridge");
        assert_eq!(rec.src, *src);
        assert_eq!(rec.sandbox, None, "an unbound source names no sandbox");
        assert_eq!(rec.verdict, "drop");
        assert_eq!(e.mac, Some(*mac));
    }
}

/// A block of the guard every profile shares (issue 33): a bare TCP ACK
/// from a sandbox (no loose pickup) is one record under the shared rule's
/// id `shared_guard/loose-pickup`, naming no profile itself but logged
/// with the profile's bridge as input interface, which the plan maps to
/// the profile (where the collector takes it from); its source is bound,
/// so it names the sandbox. The profile's own blocked count holds it
/// (its `<p>-blocked` sink), so status and metrics stay per profile.
#[test]
fn a_shared_guard_block_is_logged_with_its_bridge_and_counted_for_its_profile() {
    if !corral_test_support::gate::netns() {
        return;
    }
    use corral_drill::attack::gateway_mac;
    use corral_drill::raw::PacketSocket;
    use corral_drill::raw::frame::{self, Link, TcpFlags, Transport};

    let lab = lab();
    let mut reader = Reader::open_in(&lab.topo.host, droplog::GROUP).unwrap();
    let sb = lab.sandbox(PROFILE);
    let gw = gateway_mac(&lab.topo, sb).unwrap();
    let me = corral_drill::attack::mac_of(&sb.ns, "eth0").unwrap();
    let target = SocketAddr::new(IpAddr::V4(PUBLIC_V4[0]), 443);
    let tx = PacketSocket::open(&sb.ns, "eth0").unwrap();
    let mut sport = 41_000;
    let mut send_ack = || {
        sport += 1;
        let f = frame::ip(
            &Link::new(me, gw),
            IpAddr::V4(sb.v4),
            target.ip(),
            64,
            Transport::Tcp {
                sport,
                dport: target.port(),
                flags: TcpFlags::ACK,
                seq: 0x1000,
                ack: 0x2001,
            },
            &[],
        )
        .unwrap();
        tx.send(&f).unwrap();
    };
    let bridge_index = {
        let bridge = sb.bridge.clone();
        lab.topo
            .host
            .run(move || nix::net::if_::if_nametoindex(bridge.as_str()))
            .unwrap()
            .unwrap()
    };
    let sink = corral_egress::plan::names::blocked_chain(
        &corral_sandbox_core::ProfileName::new(PROFILE).unwrap(),
    );
    let sink_count = || {
        let live = lab.topo.host.run(nft::read_live).unwrap().ok()?;
        let chain = live.table(TableFamily::Inet)?.chain(&sink)?;
        Some(chain.rules.iter().map(|r| r.packets).sum::<u64>())
    };

    // Control: no corral table, the ACK is forwarded and nothing logged.
    send_ack();
    let got = entries_to(&mut reader, target.ip(), Duration::from_millis(500));
    assert!(got.is_empty(), "control: {got:?}");
    assert_eq!(sink_count(), None, "control: no sink without the table");

    lab.apply().unwrap();
    let who = attribution(&lab);
    let before = sink_count().expect("the profile's blocked sink");
    send_ack();
    let got = entries_to(&mut reader, target.ip(), Duration::from_millis(500));
    assert_eq!(got.len(), 1, "{got:?}");
    let e = &got[0];
    let rec = e.blocked(&who);
    println!(
        "shared guard: {} (in {:?})",
        serde_json::to_string(&rec).unwrap(),
        e.indev
    );
    assert_eq!(rec.rule, "shared_guard/loose-pickup");
    assert_eq!(rec.profile, "", "the prefix names no profile");
    assert_eq!(e.indev, Some(bridge_index), "logged in on the bridge");
    let named = lab
        .plan
        .bridges
        .iter()
        .find(|b| b.name.as_str() == sb.bridge)
        .map(|b| b.profile.to_string());
    assert_eq!(
        named.as_deref(),
        Some(PROFILE),
        "the bridge names the profile"
    );
    assert_eq!(rec.sandbox.as_deref(), Some(sb.name.as_str()));
    assert_eq!(rec.src, IpAddr::V4(sb.v4));
    assert_eq!(rec.verdict, "drop");
    let after = sink_count().unwrap();
    assert!(
        after > before,
        "the profile's sink counted it: {before} → {after}"
    );
}
