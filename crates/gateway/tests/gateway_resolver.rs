//! corral's own resolver on a lab bridge, with real packets: the netns
//! topology with corral's rules applied, the profile's dnsmasq stopped and
//! `resolver::Resolver` serving the gateway address in its place (bound
//! to the bridge), learning into the plan's sets through netlink.
//!
//! Each test's control is the same sandbox before the lookup (or with the
//! lookup refused): the address is blocked by corral's rules, so only the
//! resolver's learning can have opened it.

// Test helpers outside #[test] fns unwrap too: a failed setup is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod gateway_lab;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use corral_drill::lab::Observed;
use corral_egress::netns::Netns;
use corral_egress::nft;
use corral_egress::plan::TableFamily;
use corral_gateway::DnsTiming;
use corral_gateway::approvals::{self, Approvals};
use corral_gateway::dhcp::Reservation;
use corral_gateway::resolver::{
    Askers, AuditRecord, Bounds, FileSink, Hosted, NftLearner, Outcome, Policy, Resolver,
    Upstreams, extended_errors,
};
use corral_gateway::wire::{RCODE_NXDOMAIN, TYPE_A};
use corral_gateway::{LearnSets, probe};
use corral_sandbox_core::Profile;
use gateway_lab::{
    CDN_ADDR, Env, ROTATED_ADDR, T, UPSTREAM, allowlist_profile, ask, env_for_corrals_resolver, tcp,
};
use hickory_proto::op::{Edns, Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

const SET: &str = "agent-dns4";

/// Stops the profile's dnsmasq and serves its gateway address with
/// corral's resolver instead, until dropped.
fn serve(env: &Env, profile: &Profile, bounds: Bounds) -> Hosted {
    serve_with(env, profile, bounds, |r| r)
}

/// [`serve`], with `adjust` given the resolver before it starts.
fn serve_with(
    env: &Env,
    profile: &Profile,
    bounds: Bounds,
    adjust: impl FnOnce(Resolver) -> Resolver,
) -> Hosted {
    for gw in &env.gateways.0 {
        gw.stop().unwrap();
    }
    let sb = env.topo.sandbox(profile.name.as_str()).unwrap();
    let policy = Policy::for_profile(profile, env.plan.host_networks.as_deref().unwrap_or(&[]));
    let resolver = Resolver::new(
        policy,
        LearnSets::of(profile),
        Upstreams::new(vec![SocketAddr::new(UPSTREAM.into(), 53)], T).unwrap(),
        Arc::new(NftLearner),
        Askers::fixed(env.plan.bindings.iter().map(Reservation::from).collect()),
        bounds,
    );
    Hosted::start(
        &env.topo.host,
        adjust(resolver),
        &[SocketAddr::new(sb.gateway_v4.into(), 53)],
        profile.bridge.as_str(),
    )
    .unwrap()
}

/// The learned set's elements: (address, milliseconds left).
fn learned(env: &Env) -> Vec<(IpAddr, u64)> {
    let live = env
        .topo
        .host
        .run(|| nft::read_set(TableFamily::Inet, SET))
        .unwrap()
        .unwrap();
    live.tables
        .iter()
        .flat_map(|t| &t.sets)
        .filter(|s| s.name == SET)
        .flat_map(|s| {
            s.elements
                .iter()
                .map(|r| r.start)
                .zip(s.expires_ms.iter().copied())
        })
        .collect()
}

fn timing() -> DnsTiming {
    DnsTiming {
        client_ttl_cap: Duration::from_secs(60),
        set_timeout: Duration::from_secs(600),
    }
}

#[test]
fn an_address_is_reachable_only_once_corrals_resolver_learned_it() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let profile = allowlist_profile();
    let env = env_for_corrals_resolver(vec![profile.clone()], timing());
    let served = serve(&env, &profile, Bounds::default());
    let sb = env.topo.sandbox("agent").unwrap();
    env.upstream
        .set("api.corral.test", &[ROTATED_ADDR.into()], 3600);
    env.upstream
        .set("img.cdn.corral.test", &[CDN_ADDR.into()], 20);

    // Control: corral's rules block both addresses before any lookup.
    assert!(tcp(&sb.ns, ROTATED_ADDR).blocked(), "open before a lookup");
    assert!(tcp(&sb.ns, CDN_ADDR).blocked(), "open before a lookup");

    let r = ask(&sb.ns, sb.gateway_v4, "api.corral.test", TYPE_A).unwrap();
    assert_eq!(r.answers.len(), 1, "{r:?}");
    assert_eq!(r.answers[0].addr, IpAddr::V4(ROTATED_ADDR));
    assert!(r.answers[0].ttl <= 60, "TTL not clamped: {r:?}");
    assert_eq!(tcp(&sb.ns, ROTATED_ADDR), Observed::Connected);
    // The element lives the answer's TTL (clamped) and the grace, not
    // the set's 600 s default.
    let bounds = Bounds::default();
    let most = (Duration::from_secs(60) + bounds.learn_grace).as_millis() as u64;
    let elems = learned(&env);
    let (_, left) = elems
        .iter()
        .find(|(a, _)| *a == IpAddr::V4(ROTATED_ADDR))
        .unwrap_or_else(|| panic!("not learned: {elems:?}"));
    assert!(
        *left <= most && *left > most - 10_000,
        "{left} ms left, expected about {most}"
    );

    // Asked again: the add of an address already learned does not fail
    // the answer, and refreshes its lifetime.
    let r = ask(&sb.ns, sb.gateway_v4, "api.corral.test", TYPE_A).unwrap();
    assert_eq!(r.answers.len(), 1, "{r:?}");

    // A wildcard's name over TCP, with a short TTL: learned for the floor
    // and the grace at least.
    let r = sb
        .ns
        .run(|| {
            probe::query_tcp(
                SocketAddr::new(sb.gateway_v4.into(), 53),
                "img.cdn.corral.test",
                TYPE_A,
                T,
            )
        })
        .unwrap()
        .unwrap();
    assert_eq!(r.answers.len(), 1, "{r:?}");
    assert_eq!(tcp(&sb.ns, CDN_ADDR), Observed::Connected);
    let (_, left) = learned(&env)
        .into_iter()
        .find(|(a, _)| *a == IpAddr::V4(CDN_ADDR))
        .unwrap();
    let least = (Duration::from_secs(20) + bounds.learn_grace).as_millis() as u64;
    assert!(left > least - 10_000 && left <= least, "{left} ms left");

    // An unlisted name: refused by the policy, never asked upstream,
    // nothing learned.
    let before = env.upstream.queries().len();
    let r = ask(&sb.ns, sb.gateway_v4, "evil.corral.test", TYPE_A).unwrap();
    assert_eq!(r.rcode, RCODE_NXDOMAIN, "{r:?}");
    assert_eq!(env.upstream.queries().len(), before);

    let c = &served.resolver().counters;
    assert_eq!(c.learned.load(Ordering::Relaxed), 3);
    assert_eq!(c.learn_failed.load(Ordering::Relaxed), 0);
}

#[test]
fn only_the_sandbox_that_resolved_a_name_reaches_its_address_and_neither_after_its_ttl() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let profile = allowlist_profile();
    let env = env_for_corrals_resolver(vec![profile.clone()], timing());
    let bounds = Bounds {
        learn_floor: Duration::from_secs(1),
        learn_grace: Duration::from_secs(1),
        ..Bounds::default()
    };
    let _served = serve(&env, &profile, bounds);
    let mut sbs = env.topo.sandboxes_of("agent");
    let (a, b) = (sbs.next().unwrap(), sbs.next().unwrap());
    env.upstream
        .set("api.corral.test", &[ROTATED_ADDR.into()], 1);

    // Control: the address is blocked for both before any lookup.
    assert!(tcp(&a.ns, ROTATED_ADDR).blocked(), "open before a lookup");
    assert!(tcp(&b.ns, ROTATED_ADDR).blocked(), "open before a lookup");

    let r = ask(&a.ns, a.gateway_v4, "api.corral.test", TYPE_A).unwrap();
    assert_eq!(r.answers.len(), 1, "{r:?}");
    assert_eq!(tcp(&a.ns, ROTATED_ADDR), Observed::Connected);
    // The same profile's other sandbox did not ask: the address is not
    // its to reach.
    assert!(
        tcp(&b.ns, ROTATED_ADDR).blocked(),
        "a sibling reached an address only the first sandbox resolved"
    );
    let pinned: Vec<IpAddr> = env
        .topo
        .host
        .run(|| nft::read_set(TableFamily::Inet, SET))
        .unwrap()
        .unwrap()
        .tables
        .iter()
        .flat_map(|t| &t.sets)
        .flat_map(|s| s.askers.clone())
        .collect();
    assert_eq!(pinned, [IpAddr::V4(a.v4)], "the element names its asker");

    // Control for the sibling: its own lookup opens the address for it,
    // so what blocked it was the pin, not its path.
    let r = ask(&b.ns, b.gateway_v4, "api.corral.test", TYPE_A).unwrap();
    assert_eq!(r.answers.len(), 1, "{r:?}");
    assert_eq!(tcp(&b.ns, ROTATED_ADDR), Observed::Connected);

    // After the TTL (1 s, floor 1 s, grace 1 s) neither reaches it.
    std::thread::sleep(Duration::from_millis(2_500));
    assert!(learned(&env).is_empty(), "{:?}", learned(&env));
    assert!(tcp(&a.ns, ROTATED_ADDR).blocked(), "open after the TTL");
    assert!(tcp(&b.ns, ROTATED_ADDR).blocked(), "open after the TTL");
}

/// The lookup `name` from `sb`, asked over UDP with EDNS on a thread of
/// its own (it is held while the test decides).
fn ask_later(
    sb: &corral_drill::lab::topology::SandboxNs,
    name: &str,
) -> std::thread::JoinHandle<Option<Message>> {
    let ns = sb.ns.try_clone().unwrap();
    let (server, name) = (sb.gateway_v4, name.to_owned());
    std::thread::spawn(move || send(&ns, server, &edns_query(&name), Duration::from_secs(10)))
}

/// The one request waiting under `state`, once it appears.
fn waiting(state: &std::path::Path) -> approvals::Request {
    for _ in 0..100 {
        if let Some(r) = approvals::pending(state).pop() {
            return r;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no lookup waits for approval");
}

#[test]
fn a_held_lookup_answers_once_approved_and_is_refused_when_denied_or_undecided() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let profile = Profile {
        approvals: corral_sandbox_core::Approvals::Ask { timeout_secs: 2 },
        ..allowlist_profile()
    };
    let env = env_for_corrals_resolver(vec![profile.clone()], timing());
    let state = env.state.path().to_owned();
    let gateway_dir = corral_state_files::StateDir::open(&state)
        .unwrap()
        .subdir("gateway")
        .unwrap()
        .subdir(profile.bridge.as_str())
        .unwrap();
    let held = Approvals::open(&gateway_dir, "agent", "cb-agent", Duration::from_secs(2)).unwrap();
    let _served = serve_with(&env, &profile, Bounds::default(), |r| r.holding(held));
    let mut sbs = env.topo.sandboxes_of("agent");
    let (a, b) = (sbs.next().unwrap(), sbs.next().unwrap());
    // Unlisted (the list has api.corral.test and *.cdn.corral.test).
    env.upstream
        .set("tools.corral.test", &[CDN_ADDR.into()], 60);
    env.upstream.set("deny.corral.test", &[CDN_ADDR.into()], 60);
    env.upstream.set("late.corral.test", &[CDN_ADDR.into()], 60);

    // Control: blocked for both before anything is approved.
    assert!(tcp(&a.ns, CDN_ADDR).blocked(), "open before an approval");
    assert!(tcp(&b.ns, CDN_ADDR).blocked(), "open before an approval");

    // Held, listed, approved: the held lookup answers and connects.
    let asked = ask_later(a, "tools.corral.test");
    let request = waiting(&state);
    assert_eq!(
        (
            request.asker,
            request.name.as_str(),
            request.profile.as_str()
        ),
        (IpAddr::V4(a.v4), "tools.corral.test", "agent")
    );
    assert!(
        env.upstream
            .queried_names()
            .iter()
            .all(|q| !q.contains("tools")),
        "asked upstream before the decision"
    );
    approvals::decide(&state, &request.id, approvals::Decision::Once).unwrap();
    let answer = asked.join().unwrap().expect("the held lookup was answered");
    assert_eq!(answer.response_code(), ResponseCode::NoError, "{answer:?}");
    assert_eq!(answer.answers().len(), 1, "{answer:?}");
    assert_eq!(tcp(&a.ns, CDN_ADDR), Observed::Connected);
    // Pinned: the sandbox that asked, not its sibling.
    assert!(
        tcp(&b.ns, CDN_ADDR).blocked(),
        "a sibling reached an approved name's address"
    );
    assert!(approvals::pending(&state).is_empty());

    // Denied: refused with the reason, nothing learned.
    let asked = ask_later(b, "deny.corral.test");
    let request = waiting(&state);
    approvals::decide(&state, &request.id, approvals::Decision::Deny).unwrap();
    let answer = asked
        .join()
        .unwrap()
        .expect("the denied lookup was answered");
    assert_eq!(answer.response_code(), ResponseCode::NXDomain);
    let why = extended_errors(&answer);
    assert!(
        why.iter()
            .any(|e| e.text.contains("the operator denied `deny.corral.test`")),
        "{why:?}"
    );
    assert!(tcp(&b.ns, CDN_ADDR).blocked(), "open after a denial");

    // Undecided: refused once the timeout passes, saying so.
    let asked = ask_later(b, "late.corral.test");
    let request = waiting(&state);
    let answer = asked
        .join()
        .unwrap()
        .expect("the undecided lookup was answered");
    assert_eq!(answer.response_code(), ResponseCode::NXDomain);
    let why = extended_errors(&answer);
    assert!(
        why.iter()
            .any(|e| e.text.contains("did not decide within 2 s") && e.text.contains(&request.id)),
        "{why:?}"
    );
    assert!(approvals::pending(&state).is_empty());
    assert!(tcp(&b.ns, CDN_ADDR).blocked(), "open after a timeout");
}

/// A UDP query with EDNS, so a refusal can carry its reason.
fn ask_edns(ns: &Netns, server: Ipv4Addr, name: &str) -> Message {
    try_ask_edns(ns, server, name).expect("no answer")
}

/// [`ask_edns`]; `None`: no answer.
fn try_ask_edns(ns: &Netns, server: Ipv4Addr, name: &str) -> Option<Message> {
    send(ns, server, &edns_query(name), T)
}

/// An A query for `name` with EDNS.
fn edns_query(name: &str) -> Message {
    let mut q = Message::new();
    q.set_id(0x5151).set_recursion_desired(true);
    q.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    q.set_edns(Edns::new());
    q
}

/// Sends `q` over UDP from `ns` to `server`:53 and waits up to `wait`;
/// `None`: no answer.
fn send(ns: &Netns, server: Ipv4Addr, q: &Message, wait: Duration) -> Option<Message> {
    let bytes = q.to_vec().unwrap();
    ns.run(move || {
        let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        s.set_read_timeout(Some(wait)).unwrap();
        s.send_to(&bytes, SocketAddr::new(server.into(), 53))
            .unwrap();
        let mut buf = [0u8; 4096];
        let n = s.recv(&mut buf).ok()?;
        Some(Message::from_vec(&buf[..n]).unwrap())
    })
    .unwrap()
}

#[test]
fn a_full_learned_set_refuses_new_names_and_keeps_what_it_has() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let mut profile = allowlist_profile();
    profile.learned_max = 1;
    let env = env_for_corrals_resolver(vec![profile.clone()], timing());
    let served = serve(&env, &profile, Bounds::default());
    let sb = env.topo.sandbox("agent").unwrap();
    env.upstream
        .set("api.corral.test", &[ROTATED_ADDR.into()], 3600);
    env.upstream
        .set("img.cdn.corral.test", &[CDN_ADDR.into()], 3600);

    let r = ask(&sb.ns, sb.gateway_v4, "api.corral.test", TYPE_A).unwrap();
    assert_eq!(r.answers.len(), 1, "{r:?}");
    assert_eq!(tcp(&sb.ns, ROTATED_ADDR), Observed::Connected);

    // The set holds its one element: the next name's address cannot be
    // learned, so it is not handed out, and the refusal says why.
    let m = ask_edns(&sb.ns, sb.gateway_v4, "img.cdn.corral.test");
    assert_eq!(m.response_code(), ResponseCode::Refused, "{m:?}");
    assert!(m.answers().is_empty(), "{m:?}");
    let why = extended_errors(&m);
    assert!(
        why.iter().any(|e| e.text.contains("learned_max")),
        "{why:?}"
    );
    assert!(tcp(&sb.ns, CDN_ADDR).blocked());
    // The old element is untouched.
    assert_eq!(tcp(&sb.ns, ROTATED_ADDR), Observed::Connected);
    assert_eq!(learned(&env).len(), 1);
    // The name it holds is still answered (its add changes nothing).
    let r = ask(&sb.ns, sb.gateway_v4, "api.corral.test", TYPE_A).unwrap();
    assert_eq!(r.answers.len(), 1, "{r:?}");
    assert_eq!(
        served
            .resolver()
            .counters
            .learn_failed
            .load(Ordering::Relaxed),
        1
    );
}

#[test]
fn a_resolver_whose_record_changed_refuses_and_lets_go_of_its_port() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let profile = allowlist_profile();
    let env = env_for_corrals_resolver(vec![profile.clone()], timing());
    let sb = env.topo.sandbox("agent").unwrap();
    env.upstream
        .set("api.corral.test", &[ROTATED_ADDR.into()], 3600);
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("resolver.json");
    std::fs::write(&record, b"v1").unwrap();
    let id = corral_gateway::resolver::RecordId::of(&record).unwrap();
    let hosted = serve_with(&env, &profile, Bounds::default(), |r| {
        r.watching(record.clone(), id)
    });
    let at = hosted.at()[0];
    let r = ask(&sb.ns, sb.gateway_v4, "api.corral.test", TYPE_A).unwrap();
    assert_eq!(r.answers.len(), 1, "{r:?}");

    // The apply replaces the record (a new file): from then on nothing is
    // answered from the old policy, and the port is let go.
    std::fs::write(dir.path().join("new"), b"v2").unwrap();
    std::fs::rename(dir.path().join("new"), &record).unwrap();
    assert!(!hosted.resolver().is_current());
    // (Asked at once, the old resolver refuses with the reason; asked
    // after its record check, it is gone and nothing answers.)
    if let Some(m) = try_ask_edns(&sb.ns, sb.gateway_v4, "api.corral.test") {
        assert_eq!(m.response_code(), ResponseCode::ServFail, "{m:?}");
        assert!(m.answers().is_empty());
        assert!(
            extended_errors(&m)
                .iter()
                .any(|e| e.text.contains("being replaced")),
            "{m:?}"
        );
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while hosted.is_serving() {
        assert!(std::time::Instant::now() < deadline, "still serving");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The port is free again: another server can bind it.
    env.topo
        .host
        .run(|| std::net::UdpSocket::bind(at))
        .unwrap()
        .unwrap();
}

/// Issue 26, class 4, with corral's resolver: a hostile authority's long
/// answer is cut to the answer cap before anything is learned.
#[test]
fn a_long_answer_is_cut_to_the_cap_before_it_is_learned() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let profile = allowlist_profile();
    let env = env_for_corrals_resolver(vec![profile.clone()], timing());
    let flood: Vec<IpAddr> = (0..300u32)
        .map(|i| {
            IpAddr::V4(Ipv4Addr::from(
                u32::from(Ipv4Addr::new(192, 175, 49, 0)) + i,
            ))
        })
        .collect();
    env.upstream.set("many.cdn.corral.test", &flood, 3600);
    // Control: the authority's own answer, asked from the host, is whole.
    let whole = env
        .topo
        .host
        .run(|| {
            probe::query_tcp(
                SocketAddr::new(UPSTREAM.into(), 53),
                "many.cdn.corral.test",
                TYPE_A,
                T,
            )
        })
        .unwrap()
        .unwrap();
    assert_eq!(whole.answers.len(), 300);

    let served = serve(&env, &profile, Bounds::default());
    let sb = env.topo.sandbox("agent").unwrap();
    let r = sb
        .ns
        .run(|| {
            probe::query_tcp(
                SocketAddr::new(sb.gateway_v4.into(), 53),
                "many.cdn.corral.test",
                TYPE_A,
                T,
            )
        })
        .unwrap()
        .unwrap();
    let cap = corral_gateway::resolver::DEFAULT_ANSWER_CAP;
    assert_eq!(r.answers.len(), cap, "{r:?}");
    let held = learned(&env);
    assert_eq!(held.len(), cap, "{held:?}");
    // What was handed out is exactly what was learned.
    for a in &r.answers {
        assert!(held.iter().any(|(h, _)| *h == a.addr), "{a:?} not learned");
    }
    assert_eq!(
        served.resolver().counters.cut.load(Ordering::Relaxed),
        (300 - cap) as u64
    );
}

/// Sends `name` (raw labels, any bytes) as an A query from `ns`; waits
/// for the answer.
fn ask_raw(ns: &Netns, server: Ipv4Addr, labels: &[&[u8]]) -> Option<Message> {
    let mut q = Message::new();
    q.set_id(0x7171).set_recursion_desired(true);
    let name = Name::from_labels(labels.iter().copied()).unwrap();
    q.add_query(Query::query(name, RecordType::A));
    send(ns, server, &q, T)
}

#[test]
fn every_decision_is_in_the_resolvers_own_trail_names_with_control_bytes_escaped() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let profile = allowlist_profile();
    let env = env_for_corrals_resolver(vec![profile.clone()], timing());
    let sb = env.topo.sandbox("agent").unwrap();
    env.upstream
        .set("api.corral.test", &[ROTATED_ADDR.into()], 3600);
    let dir = tempfile::tempdir().unwrap();
    let trail = dir.path().join(corral_gateway::resolver::AUDIT_FILE);
    let _hosted = serve_with(&env, &profile, Bounds::default(), |r| {
        r.with_audit(Arc::new(FileSink::open(&trail).unwrap()))
    });

    let r = ask(&sb.ns, sb.gateway_v4, "api.corral.test", TYPE_A).unwrap();
    assert_eq!(r.answers.len(), 1);
    // Control bytes in a listed wildcard's label and in an unlisted name:
    // both answered (the first forwarded), both on record.
    let listed = ask_raw(
        &sb.ns,
        sb.gateway_v4,
        &[b"a\x07b", b"cdn", b"corral", b"test"],
    )
    .unwrap();
    let unlisted = ask_raw(&sb.ns, sb.gateway_v4, &[b"x\x01y", b"evil", b"test"]).unwrap();
    assert_eq!(unlisted.response_code(), ResponseCode::NXDomain);
    assert_ne!(listed.response_code(), ResponseCode::Refused);

    let text = std::fs::read_to_string(&trail).unwrap();
    let records: Vec<AuditRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 3, "{text}");
    let src: IpAddr = sb.v4.into();
    assert!(
        records.iter().all(|r| r.src == src && r.qtype == "A"),
        "{text}"
    );
    assert_eq!(records[0].name, "api.corral.test");
    assert_eq!(records[0].outcome, Outcome::Answered);
    assert_eq!(records[0].addresses, [IpAddr::V4(ROTATED_ADDR)]);
    assert_eq!(records[1].name, "a\\007b.cdn.corral.test", "{text}");
    assert_eq!(records[1].outcome, Outcome::Answered);
    assert_eq!(records[2].name, "x\\001y.evil.test", "{text}");
    assert_eq!(records[2].outcome, Outcome::Refused);
    // No raw control byte reaches the file.
    assert!(!text.bytes().any(|b| b < 0x20 && b != b'\n'), "{text:?}");
}
