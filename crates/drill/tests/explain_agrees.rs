//! `corral explain`'s evaluator against the kernel (issue 15, item 5): for
//! random profile sets and random packets (TCP, UDP, ICMP; IPv6 where the
//! profile has it) from a sandbox of the namespace lab, the verdict of
//! `HostPlan::trace` equals what the kernel does to a real packet.
//!
//! Every packet is first sent with the profile bridges up and no corral
//! rules (the control): it must reach its echo service, so a packet that
//! does not get through after apply was stopped by the rules, and a trace
//! saying "block" can be wrong. Then the plan is applied and the same
//! packets are sent again.
//!
//! Bounded: [`LABS`] profile sets, [`PACKETS`] random packets each and one
//! fixed packet to an address the gateway resolver "learned".

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use corral_drill::lab::topology::{
    HOST_SERVICE_PORT, HOST_UPLINK_V4, LAN_HOST_V4, LAN_PORT, LAN_PUBLIC_V4, LAN_PUBLIC_V6,
    PRIVATE, PUBLIC_RESOLVER_V4, PUBLIC_RESOLVER_V6, PUBLIC_V4, PUBLIC_V6, SANDBOX_PORT, SandboxNs,
    TCP_PORTS, UDP_PORTS,
};
use corral_drill::lab::{Lab, Observed, Probe, Transport, allowlisted_endpoints};
use corral_egress::plan::eval::Learned;
use corral_egress::plan::explain::one_line;
use corral_egress::plan::trace::TraceVerdict;
use corral_egress::plan::{AddrFamily, SetKind};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::{
    AllowEntry, BlockAction, BridgeName, DnsPolicy, EgressMode, Profile, ProfileName, ProfileSet,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Profile sets (one lab each).
const LABS: u32 = 4;
/// Packets per profile set.
const PACKETS: usize = 24;
/// How long a probe waits for an answer (a dropped packet costs this).
const WAIT: Duration = Duration::from_millis(400);
/// The host name allowlist entries may list, and what it resolves to.
const NAME: &str = "a.corral.test";
const NAME_ADDRS: [&str; 2] = ["203.0.113.20", "2001:db8:1::20"];
/// Addresses "learned" into every dynamic set (see [`learn`]): public
/// ones no static entry lists, with echo services of their own in the
/// lab's internet.
const LEARNED_V4: &str = "93.184.215.14";
const LEARNED_V6: &str = "2606:2800:21f:cb07::14";

/// Allow entries a random allowlist profile picks from: CIDRs and single
/// addresses of the lab's internet, with and without ports and protocols
/// (one covering private space and every sandbox subnet), IPv6 ones, a
/// name and a wildcard.
const ENTRIES: [&str; 10] = [
    "198.51.100.0/24",
    "203.0.113.10",
    "198.51.100.20:443/tcp",
    "203.0.113.0/24:4500/udp",
    "10.0.0.0/8:80",
    "[2001:db8:1::/64]:443",
    "2001:db8:1::10",
    "a.corral.test:8443/tcp",
    "*.corral.test",
    "198.51.100.53:53",
];

/// The indexes of the name and the wildcard in [`ENTRIES`].
const NAMED: usize = 7;
const WILDCARD: usize = 8;

#[derive(Debug, Clone)]
struct ProfileSpec {
    mode: EgressMode,
    block: BlockAction,
    v6: bool,
    allow: Vec<usize>,
}

fn profile_spec() -> impl Strategy<Value = ProfileSpec> {
    (
        prop_oneof![
            Just(EgressMode::None),
            Just(EgressMode::Internet),
            Just(EgressMode::Allowlist),
            Just(EgressMode::Allowlist),
        ],
        prop_oneof![Just(BlockAction::Drop), Just(BlockAction::Reject)],
        any::<bool>(),
        proptest::sample::subsequence((0..ENTRIES.len()).collect::<Vec<_>>(), 1..=5),
    )
        .prop_map(|(mode, block, v6, allow)| ProfileSpec {
            mode,
            block,
            v6,
            allow,
        })
}

/// One packet: which sandbox sends it and a selector into its candidates.
#[derive(Debug, Clone, Copy)]
struct PacketSpec {
    from: usize,
    pick: usize,
}

fn profiles(specs: &[ProfileSpec]) -> ProfileSet {
    let ps = specs
        .iter()
        .enumerate()
        .map(|(i, s)| Profile {
            name: ProfileName::new(format!("p{i}")).unwrap(),
            bridge: BridgeName::new(format!("cx{i}")).unwrap(),
            subnet_v4: format!("10.{}.0.0/24", 200 + i).parse().unwrap(),
            subnet_v6: s
                .v6
                .then(|| format!("fd00:{:x}::/64", 200 + i).parse().unwrap()),
            // The first profile always lists the names (see `learn`).
            mode: if i == 0 {
                EgressMode::Allowlist
            } else {
                s.mode
            },
            allow: if i == 0 || s.mode == EgressMode::Allowlist {
                let mut picks = s.allow.clone();
                if i == 0 {
                    picks.extend([NAMED, WILDCARD]);
                    picks.sort_unstable();
                    picks.dedup();
                }
                picks
                    .iter()
                    .map(|&e| ENTRIES[e].parse::<AllowEntry>().unwrap())
                    .collect()
            } else {
                Vec::new()
            },
            block: s.block,
            dns: DnsPolicy::Gateway,
            allow_unresolved: false,
            learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
            approvals: Default::default(),
            flows: Default::default(),
            deny: Vec::new(),
        })
        .collect();
    ProfileSet::new(ps).unwrap()
}

fn resolution() -> Resolution {
    let mut r = Resolution::new();
    r.insert(
        &NAME.parse().unwrap(),
        NAME_ADDRS.iter().map(|a| a.parse::<IpAddr>().unwrap()),
    );
    r
}

/// Every packet `sb` can send that reaches an echo service without
/// corral's rules: the internet (public, private, a public resolver),
/// the LAN, the host (its gateway and its uplink address), and the other
/// sandboxes; IPv6 only from a sandbox with IPv6.
fn candidates(lab: &Lab, sb: &SandboxNs) -> Vec<Probe> {
    let mut internet: Vec<IpAddr> = PUBLIC_V4.iter().map(|&a| IpAddr::V4(a)).collect();
    internet.extend(PRIVATE.iter().filter(|a| a.is_ipv4()));
    if sb.v6.is_some() {
        internet.extend(PUBLIC_V6.iter().map(|&a| IpAddr::V6(a)));
        internet.extend(PRIVATE.iter().filter(|a| a.is_ipv6()));
    }
    let mut out = Vec::new();
    let tcp = |ip: IpAddr, p: u16| Probe::Tcp {
        to: SocketAddr::new(ip, p),
    };
    let udp = |ip: IpAddr, p: u16| Probe::Udp {
        to: SocketAddr::new(ip, p),
    };
    for &ip in &internet {
        out.extend(TCP_PORTS.iter().map(|&p| tcp(ip, p)));
        out.extend(UDP_PORTS.iter().map(|&p| udp(ip, p)));
        out.push(Probe::Icmp { to: ip });
    }
    let mut resolvers = vec![IpAddr::V4(PUBLIC_RESOLVER_V4)];
    let mut lan = vec![IpAddr::V4(LAN_HOST_V4), IpAddr::V4(LAN_PUBLIC_V4)];
    let mut host = vec![IpAddr::V4(sb.gateway_v4), IpAddr::V4(HOST_UPLINK_V4)];
    if sb.v6.is_some() {
        resolvers.push(IpAddr::V6(PUBLIC_RESOLVER_V6));
        lan.push(IpAddr::V6(LAN_PUBLIC_V6));
        host.extend(sb.gateway_v6.map(IpAddr::V6));
    }
    for ip in resolvers {
        out.extend([tcp(ip, 53), udp(ip, 53)]);
    }
    for ip in lan {
        out.extend([tcp(ip, LAN_PORT), udp(ip, LAN_PORT), Probe::Icmp { to: ip }]);
    }
    for ip in host {
        out.extend([tcp(ip, HOST_SERVICE_PORT), Probe::Icmp { to: ip }]);
    }
    for other in lab.topo.sandboxes.iter().filter(|o| o.name != sb.name) {
        let mut ips = vec![IpAddr::V4(other.v4)];
        if sb.v6.is_some() {
            ips.extend(other.v6.map(IpAddr::V6));
        }
        for ip in ips {
            out.extend([tcp(ip, SANDBOX_PORT), udp(ip, SANDBOX_PORT)]);
        }
    }
    // Most of the above is blocked for most profiles: what the profile
    // lists (and the public internet) weighs more, so both verdicts come up.
    let own = lab
        .profiles
        .get(&sb.profile)
        .cloned()
        .into_iter()
        .collect::<Vec<_>>();
    let own = ProfileSet::new(own).unwrap();
    let mut likely: Vec<Probe> = allowlisted_endpoints(&own, &resolution())
        .into_iter()
        .filter(|(ip, _, _)| ip.is_ipv4() || sb.v6.is_some())
        .map(|(ip, port, t)| Probe::l4(t, SocketAddr::new(ip, port)))
        .collect();
    likely.extend(
        internet
            .iter()
            .filter(|a| !PRIVATE.contains(a))
            .map(|&ip| tcp(ip, 443)),
    );
    for _ in 0..4 {
        out.extend(likely.iter().copied());
    }
    out
}

/// What the gateway resolver would have learned: [`LEARNED_V4`] and
/// [`LEARNED_V6`] in every dynamic set of their family (added with `nft`
/// in the lab's host, as dnsmasq adds them), so learned accepts are
/// exercised per class.
fn learn(lab: &Lab) {
    for set in lab
        .plan
        .inet
        .sets
        .iter()
        .filter(|s| s.kind == SetKind::Dynamic)
    {
        let addr = match set.family {
            AddrFamily::V4 => LEARNED_V4,
            AddrFamily::V6 => LEARNED_V6,
        };
        let element = format!("{{ {addr} }}");
        let out = lab
            .topo
            .host
            .run(|| {
                std::process::Command::new("nft")
                    .args(["add", "element", "inet", "corral", &set.name, &element])
                    .output()
            })
            .unwrap()
            .unwrap();
        assert!(
            out.status.success(),
            "nft add element {} {element}: {}",
            set.name,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Builds the lab, sends every packet as the control and then with the
/// plan applied, and compares each kernel verdict with the trace's.
fn agree(specs: &[ProfileSpec], packets: &[PacketSpec]) -> Result<(usize, usize), TestCaseError> {
    let set = profiles(specs);
    let lab = Lab::new(&set, &resolution()).unwrap();
    let mut learned_endpoints = Vec::new();
    for ip in [LEARNED_V4, LEARNED_V6] {
        let ip: IpAddr = ip.parse().unwrap();
        learned_endpoints.extend([(ip, 8443, Transport::Tcp), (ip, 4500, Transport::Udp)]);
    }
    lab.topo.add_internet_listeners(&learned_endpoints).unwrap();
    let mut chosen: Vec<(usize, Probe)> = packets
        .iter()
        .map(|p| {
            let from = p.from % lab.topo.sandboxes.len();
            let c = candidates(&lab, &lab.topo.sandboxes[from]);
            (from, c[p.pick % c.len()])
        })
        .collect();
    // One packet every lab sends: to the learned address, from the first
    // profile (always an allowlist listing names), so a learned accept is
    // walked in every run.
    chosen.push((
        0,
        Probe::Tcp {
            to: SocketAddr::new(LEARNED_V4.parse().unwrap(), 8443),
        },
    ));

    lab.control().unwrap();
    for (from, probe) in &chosen {
        let sb = &lab.topo.sandboxes[*from];
        let r = lab.probe(sb, probe, Duration::from_secs(2));
        prop_assert_eq!(
            &r.observed,
            &Observed::Connected,
            "control: {} from {} must reach without corral's rules",
            probe,
            sb.name
        );
    }

    lab.apply().unwrap();
    learn(&lab);
    let learned: Learned = lab
        .topo
        .host
        .run(corral_egress::nft::read_live)
        .unwrap()
        .map(|live| {
            corral_egress::nft::learned(&live)
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().map(|(r, _)| r).collect()))
                .collect()
        })
        .unwrap();
    let mut blocked = 0;
    let mut learned_hits = 0;
    for (from, probe) in &chosen {
        let sb = &lab.topo.sandboxes[*from];
        let trace = lab.plan.trace(&sb.flow_of(probe), &learned);
        let mut r = lab.probe(sb, probe, WAIT);
        if r.observed == Observed::TimedOut && trace.verdict == TraceVerdict::Allow {
            // A loaded machine can be slow to answer: a drop must hold for
            // the control's patience too before it counts.
            r = lab.probe(sb, probe, Duration::from_secs(2));
        }
        let kernel = match &r.observed {
            Observed::Connected => TraceVerdict::Allow,
            o if o.blocked() => TraceVerdict::Block,
            other => {
                return Err(TestCaseError::fail(format!(
                    "{probe} from {}: the probe failed: {other:?}",
                    sb.name
                )));
            }
        };
        blocked += usize::from(kernel == TraceVerdict::Block);
        learned_hits += usize::from(trace.set.as_ref().is_some_and(|s| s.learned));
        prop_assert_eq!(
            kernel,
            trace.verdict,
            "{} from {} ({}): the kernel says {:?} ({:?}), the trace says: {}\npath {:?}",
            probe,
            sb.name,
            sb.profile,
            kernel,
            r.observed,
            one_line(&trace, &probe.to_string()),
            trace.path
        );
    }
    Ok((blocked, learned_hits))
}

#[test]
fn the_kernel_agrees_with_explain() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let started = Instant::now();
    let mut runner = TestRunner::new(Config {
        cases: LABS,
        failure_persistence: None,
        // Each shrink step builds a lab: a few are worth it.
        max_shrink_iters: 8,
        ..Config::default()
    });
    let strategy = (
        proptest::collection::vec(profile_spec(), 3),
        proptest::collection::vec(
            (0usize..64, 0usize..4096).prop_map(|(from, pick)| PacketSpec { from, pick }),
            PACKETS,
        ),
    );
    let totals = std::sync::Mutex::new((0usize, 0usize, 0usize));
    runner
        .run(&strategy, |(specs, packets)| {
            let (blocked, learned) = agree(&specs, &packets)?;
            let mut t = totals.lock().unwrap();
            t.0 += packets.len() + 1;
            t.1 += blocked;
            t.2 += learned;
            Ok(())
        })
        .unwrap();
    let (sent, blocked, learned) = *totals.lock().unwrap();
    eprintln!(
        "explain_agrees: {sent} packets in {LABS} labs, {blocked} blocked, {} allowed ({learned} by a learned element), {:.1} s",
        sent - blocked,
        started.elapsed().as_secs_f64()
    );
    // Both verdicts and a learned accept must have been exercised, or the
    // property said little.
    assert!(blocked > 0 && blocked < sent, "{blocked} of {sent} blocked");
    assert!(learned > 0, "no packet was accepted by a learned element");
}
