//! The gateway half of the TTL rule, with the real kernel and a real
//! dnsmasq: an answer puts its address into the profile's set, and the
//! element lives exactly the set's default timeout (dnsmasq 2.90 passes no
//! timeout of its own). The test creates `inet corral <profile>-dns4` with
//! a 3 s default timeout itself, as the plan must (see `gateway` docs).

// Test helpers outside #[test] fns unwrap too: a failed setup is a failed test.
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use corral_egress::link::Links;
use corral_egress::netns::Netns;
use corral_egress::nft::read_live;
use corral_gateway::probe::query;
use corral_gateway::test_upstream::TestUpstream;
use corral_gateway::wire::TYPE_A;
use corral_gateway::{DnsTiming, Gateway, GatewaySpec, NFT_TABLE};
use corral_sandbox_core::{BlockAction, BridgeName, DnsPolicy, EgressMode, Profile, ProfileName};
use ipnet::IpNet;
use nftnl::{Batch, MsgType, ProtoFamily, Table, set::Set};

const UPSTREAM: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 53);
/// Global (AS112, RFC 7534) and so learnable: the gateway turns answers in
/// corral's reserved ranges, benchmarking space included, into NXDOMAIN.
const ANSWER: Ipv4Addr = Ipv4Addr::new(192, 175, 48, 31);
const SET_TIMEOUT: Duration = Duration::from_secs(3);

/// `table inet corral { set <name> { type ipv4_addr; flags timeout; timeout 3s } }`.
fn create_timeout_set(name: &std::ffi::CStr) -> std::io::Result<()> {
    let mut batch = Batch::new();
    let table_name = std::ffi::CString::new(NFT_TABLE).unwrap();
    let table = Table::new(&table_name, ProtoFamily::Inet);
    batch.add(&table, MsgType::Add);
    let set: Set<Ipv4Addr> = Set::new_named(name, 1, &table, ProtoFamily::Inet);
    let ms = u64::try_from(SET_TIMEOUT.as_millis()).unwrap();
    // SAFETY: `set` owns a valid nftnl_set for these calls; the attributes
    // are plain integers copied by libnftnl.
    unsafe {
        nftnl_sys::nftnl_set_set_u32(
            set.as_ptr().as_ptr(),
            nftnl_sys::NFTNL_SET_FLAGS as u16,
            libc::NFT_SET_TIMEOUT as u32,
        );
        nftnl_sys::nftnl_set_set_u64(
            set.as_ptr().as_ptr(),
            nftnl_sys::NFTNL_SET_TIMEOUT as u16,
            ms,
        );
    }
    batch.add(&set, MsgType::Add);
    let batch = batch.finalize();
    let socket = mnl::Socket::new(mnl::Bus::Netfilter)?;
    let portid = socket.portid();
    socket.send_all(&batch)?;
    let mut buffer = vec![0; nftnl::nft_nlmsg_maxsize() as usize];
    let mut expected = batch.sequence_numbers();
    while !expected.is_empty() {
        for message in socket.recv(&mut buffer[..])? {
            let seq = expected
                .next()
                .ok_or_else(|| std::io::Error::other("unexpected ack"))?;
            mnl::cb_run(message?, seq, portid)?;
        }
    }
    Ok(())
}

fn in_set(ns: &Netns, set: &str, ip: Ipv4Addr) -> bool {
    let live = ns.run(read_live).unwrap().unwrap();
    live.tables
        .iter()
        .flat_map(|t| &t.sets)
        .filter(|s| s.name == set)
        .flat_map(|s| &s.elements)
        .any(|r| r.start == IpAddr::V4(ip))
}

#[test]
fn an_answer_enters_the_set_and_expires_with_the_set_timeout() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let profile = Profile {
        name: ProfileName::new("agent").unwrap(),
        bridge: BridgeName::new("cb-agent").unwrap(),
        subnet_v4: "10.99.7.0/24".parse().unwrap(),
        subnet_v6: None,
        mode: EgressMode::Allowlist,
        allow: vec!["api.corral.test".parse().unwrap()],
        block: BlockAction::Reject,
        dns: DnsPolicy::Gateway,
        allow_unresolved: true,
        learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
        approvals: Default::default(),
        flows: Default::default(),
        deny: Vec::new(),
    };
    let timing = DnsTiming {
        client_ttl_cap: Duration::from_secs(1),
        set_timeout: SET_TIMEOUT,
    };
    let ns = Netns::new().unwrap();
    let gw_addr = profile.gateway_v4();
    ns.run_async(|| async {
        let links = Links::connect()?;
        links.create_bridge(profile.bridge.as_str()).await?;
        links
            .add_address(
                profile.bridge.as_str(),
                IpNet::V4(ipnet::Ipv4Net::new(gw_addr, 24).unwrap()),
            )
            .await?;
        links.set_up(profile.bridge.as_str()).await
    })
    .unwrap()
    .unwrap();
    ns.run(|| create_timeout_set(c"agent-dns4"))
        .unwrap()
        .unwrap();
    let upstream = ns
        .run(|| TestUpstream::bind(SocketAddr::new(UPSTREAM.into(), 53)))
        .unwrap()
        .unwrap();
    upstream.set("api.corral.test", &[ANSWER.into()], 3600);

    let state = tempfile::tempdir().unwrap();
    let spec = GatewaySpec::from_profile(&profile, &[SocketAddr::new(UPSTREAM.into(), 53)], timing)
        .unwrap();
    let gw = Gateway::new(state.path(), &profile.bridge);
    gw.start_in(&spec, &ns).unwrap();
    struct Stop<'a>(&'a Gateway);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = self.0.stop();
        }
    }
    let _stop = Stop(&gw);

    assert!(!in_set(&ns, "agent-dns4", ANSWER));
    let server = SocketAddr::new(gw_addr.into(), 53);
    let r = ns
        .run(|| query(server, "api.corral.test", TYPE_A, Duration::from_secs(2)))
        .unwrap()
        .unwrap();
    let answered = Instant::now();
    assert_eq!(r.answers.len(), 1, "{r:?}");
    assert_eq!(r.answers[0].ttl, 1, "the upstream's 3600 s TTL is capped");
    assert!(
        in_set(&ns, "agent-dns4", ANSWER),
        "the answer did not enter the set"
    );

    // Still there shortly before the timeout, gone shortly after.
    std::thread::sleep(
        (SET_TIMEOUT - Duration::from_millis(800)).saturating_sub(answered.elapsed()),
    );
    assert!(
        in_set(&ns, "agent-dns4", ANSWER),
        "expired early, at {:?}",
        answered.elapsed()
    );
    std::thread::sleep(
        (SET_TIMEOUT + Duration::from_millis(800)).saturating_sub(answered.elapsed()),
    );
    assert!(
        !in_set(&ns, "agent-dns4", ANSWER),
        "still there at {:?}",
        answered.elapsed()
    );

    // The next lookup puts it back.
    ns.run(|| query(server, "api.corral.test", TYPE_A, Duration::from_secs(2)))
        .unwrap()
        .unwrap();
    assert!(in_set(&ns, "agent-dns4", ANSWER));
}
