//! dnsmasq's edges, measured with the real kernel and a real dnsmasq
//! (docs/gateway.md, "TTLs and set timeouts").
//!
//! 1. The nftset add happens only for forwarded answers: with corral's
//!    configuration (`cache-size=0`) every answer a sandbox receives is
//!    forwarded, so its address is in the learned set the moment the answer
//!    arrives, even when the element was removed since the last lookup.
//!    The control is the same configuration with the cache on: the second
//!    answer comes from the cache and its element is NOT there — the
//!    failure this test exists to catch, shown to be detectable.
//! 2. The TTL rule's edge: a lookup does not extend an element (dnsmasq
//!    adds without a timeout, the kernel keeps the first expiry), so an
//!    answer given late in an element's life outlives it by up to the
//!    client TTL cap; the test measures that window.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use corral_egress::link::Links;
use corral_egress::netns::Netns;
use corral_egress::nft::read_live;
use corral_gateway::probe::query;
use corral_gateway::test_upstream::TestUpstream;
use corral_gateway::wire::TYPE_A;
use corral_gateway::{DnsTiming, GatewaySpec, render};
use corral_sandbox_core::{BlockAction, BridgeName, DnsPolicy, EgressMode, Profile, ProfileName};
use ipnet::IpNet;

const UPSTREAM: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 53);
const ANSWER: Ipv4Addr = Ipv4Addr::new(192, 175, 48, 9);
const NAME: &str = "api.corral.test";
const SET: &str = "edge-dns4";

fn profile() -> Profile {
    Profile {
        name: ProfileName::new("edge").unwrap(),
        bridge: BridgeName::new("cb-edge").unwrap(),
        subnet_v4: "10.99.9.0/24".parse().unwrap(),
        subnet_v6: None,
        mode: EgressMode::Allowlist,
        allow: vec![NAME.parse().unwrap()],
        block: BlockAction::Reject,
        dns: DnsPolicy::Gateway,
        allow_unresolved: true,
        learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
        approvals: Default::default(),
        flows: Default::default(),
        deny: Vec::new(),
    }
}

fn nft(ns: &Netns, script: &str) {
    let out = ns
        .run(|| {
            Command::new("nft")
                .args(["-f", "-"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .and_then(|mut c| {
                    use std::io::Write;
                    c.stdin.take().unwrap().write_all(script.as_bytes())?;
                    c.wait_with_output()
                })
        })
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "nft: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn in_set(ns: &Netns) -> bool {
    let live = ns.run(read_live).unwrap().unwrap();
    live.tables
        .iter()
        .flat_map(|t| &t.sets)
        .filter(|s| s.name == SET)
        .flat_map(|s| &s.elements)
        .any(|r| r.start == IpAddr::V4(ANSWER))
}

/// A namespace with the profile's bridge and gateway address, the learned
/// set (`timeout` as the plan would make it) and the upstream.
struct Rig {
    ns: Netns,
    upstream: TestUpstream,
    dir: tempfile::TempDir,
    pid: Option<u32>,
}

impl Rig {
    fn new(set_timeout: Duration) -> Self {
        let p = profile();
        let ns = Netns::new().unwrap();
        let gw = p.gateway_v4();
        ns.run_async(|| async {
            let links = Links::connect()?;
            links.create_bridge(p.bridge.as_str()).await?;
            links
                .add_address(
                    p.bridge.as_str(),
                    IpNet::V4(ipnet::Ipv4Net::new(gw, 24).unwrap()),
                )
                .await?;
            links.set_up("lo").await?;
            links.set_up(p.bridge.as_str()).await
        })
        .unwrap()
        .unwrap();
        nft(
            &ns,
            &format!(
                "add table inet corral\nadd set inet corral {SET} {{ type ipv4_addr; flags timeout; timeout {}ms; }}\n",
                set_timeout.as_millis()
            ),
        );
        let upstream = ns
            .run(|| TestUpstream::bind(SocketAddr::new(UPSTREAM.into(), 53)))
            .unwrap()
            .unwrap();
        upstream.set(NAME, &[ANSWER.into()], 3600);
        Self {
            ns,
            upstream,
            dir: tempfile::tempdir().unwrap(),
            pid: None,
        }
    }

    /// Starts dnsmasq on `text` (corral's rendered configuration, or an
    /// edit of it) in the namespace.
    fn start(&mut self, text: &str) {
        let conf = self.dir.path().join("dnsmasq.conf");
        let pidfile = self.dir.path().join("dnsmasq.pid");
        // dnsmasq drops to `nobody`, who must be able to read it.
        std::fs::write(&conf, text).unwrap();
        let mut cmd = Command::new("dnsmasq");
        cmd.arg(format!("--conf-file={}", conf.display()))
            .arg(format!("--pid-file={}", pidfile.display()))
            .arg("--dhcp-leasefile=/dev/null")
            .arg(format!(
                "--log-facility={}",
                self.dir.path().join("dnsmasq.log").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let out = self.ns.spawn(cmd).unwrap().wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "dnsmasq: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.pid = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|p| p.trim().parse().ok());
    }

    fn ask(&self) -> Vec<(IpAddr, u32)> {
        let server = SocketAddr::new(profile().gateway_v4().into(), 53);
        let r = self
            .ns
            .run(|| query(server, NAME, TYPE_A, Duration::from_secs(2)))
            .unwrap()
            .unwrap();
        r.answers.iter().map(|a| (a.addr, a.ttl)).collect()
    }

    fn forget(&self) {
        nft(&self.ns, &format!("flush set inet corral {SET}\n"));
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if let Some(pid) = self.pid.and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: plain kill(2) of the dnsmasq this rig started.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    }
}

fn corral_conf(timing: DnsTiming) -> String {
    let spec =
        GatewaySpec::from_profile(&profile(), &[SocketAddr::new(UPSTREAM.into(), 53)], timing)
            .unwrap();
    render(&spec).unwrap()
}

/// Asks `rounds` times, removing the element before each ask after the
/// first; returns how many answers arrived without their element in the
/// set, and how many queries the upstream saw.
fn answers_without_element(rig: &Rig, rounds: usize) -> (usize, usize) {
    rig.upstream.clear_log();
    let mut missing = 0;
    for i in 0..rounds {
        if i > 0 {
            rig.forget();
            assert!(!in_set(&rig.ns));
        }
        let answers = rig.ask();
        assert_eq!(answers.first().map(|a| a.0), Some(IpAddr::V4(ANSWER)));
        if !in_set(&rig.ns) {
            missing += 1;
        }
    }
    (missing, rig.upstream.queries().len())
}

#[test]
fn no_answer_reaches_a_sandbox_without_its_element_in_the_set() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("dnsmasq", "dnsmasq-base")
        || !corral_test_support::gate::tool("nft", "nftables")
    {
        return;
    }
    const ROUNDS: usize = 20;
    let conf = corral_conf(DnsTiming::default());
    assert!(conf.contains("\ncache-size=0\n"), "{conf}");

    // Control: the cache on. The answers after the first come from the
    // cache, never reach the upstream, and leave the set empty.
    let mut rig = Rig::new(Duration::from_secs(600));
    rig.start(&conf.replace("\ncache-size=0\n", "\ncache-size=150\n"));
    let (missing, forwarded) = answers_without_element(&rig, ROUNDS);
    eprintln!("cache on: {missing}/{ROUNDS} answers without their element, {forwarded} forwarded");
    assert_eq!(forwarded, 1, "control: the cache answered");
    assert_eq!(missing, ROUNDS - 1, "control: cached answers add nothing");
    drop(rig);

    // corral's configuration: every answer forwarded, every element there.
    let mut rig = Rig::new(Duration::from_secs(600));
    rig.start(&conf);
    let (missing, forwarded) = answers_without_element(&rig, ROUNDS);
    eprintln!("cache off: {missing}/{ROUNDS} answers without their element, {forwarded} forwarded");
    assert_eq!(forwarded, ROUNDS);
    assert_eq!(
        missing, 0,
        "an answer reached the sandbox without its element"
    );
}

#[test]
fn a_late_answer_outlives_its_element_by_at_most_the_ttl_cap() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("dnsmasq", "dnsmasq-base")
        || !corral_test_support::gate::tool("nft", "nftables")
    {
        return;
    }
    let timing = DnsTiming {
        client_ttl_cap: Duration::from_secs(1),
        set_timeout: Duration::from_secs(3),
    };
    let mut rig = Rig::new(timing.set_timeout);
    rig.start(&corral_conf(timing));
    let first = rig.ask();
    let added = Instant::now();
    assert!(in_set(&rig.ns));
    // A second lookup late in the element's life: answered (and re-added,
    // which the kernel ignores for an element that exists).
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(added.elapsed()));
    let late = rig.ask();
    let late_at = added.elapsed();
    let ttl = late.first().map_or(0, |a| a.1);
    assert_eq!(first.first().map(|a| a.1), Some(1), "TTL capped to 1 s");
    assert_eq!(ttl, 1);
    // When does the element go?
    let gone_at = loop {
        if !in_set(&rig.ns) {
            break added.elapsed();
        }
        assert!(added.elapsed() < Duration::from_secs(6), "never expired");
        std::thread::sleep(Duration::from_millis(20));
    };
    let answer_valid_until = late_at + Duration::from_secs(u64::from(ttl));
    let window = answer_valid_until.saturating_sub(gone_at);
    eprintln!(
        "element added at 0, late answer at {late_at:?} (TTL {ttl} s, valid until {answer_valid_until:?}), element gone at {gone_at:?}: the answer outlived it by {window:?}"
    );
    // Not extended by the late lookup: gone at the first add + timeout.
    assert!(
        gone_at < Duration::from_millis(3400),
        "extended: {gone_at:?}"
    );
    assert!(gone_at >= Duration::from_millis(2900), "early: {gone_at:?}");
    assert!(window <= timing.client_ttl_cap, "{window:?}");
    // The next lookup after expiry puts it back (fail closed until then).
    rig.ask();
    assert!(in_set(&rig.ns));
}
