//! corral's own resolver (`dns = "corral"`) in production shape: a
//! profile applied through `HostService` (rules, bridge, dnsmasq serving
//! the leases only, the resolver's record) inside an anonymous network
//! namespace, and the gateway supervisor hosting the resolver.
//!
//! - No dnsmasq runs on the bridge (its status is `hosted`).
//! - Control: with no supervisor nothing answers on the gateway address
//!   and the start gate refuses, saying who serves corral's resolver.
//! - With the supervisor the resolver answers and the gate passes; a name
//!   the profile lists is forwarded (its upstream is unreachable in the
//!   namespace, which has no route: SERVFAIL naming the upstream, nothing
//!   leaves), an unlisted one refused with the reason.
//! - The resolver's decisions reach the audit trail through the
//!   collector (its own JSON lines, no log scraping).
//! - A re-apply that drops the name: the resolver is replaced, and the
//!   name is refused from then on.
//! - Back on `dns = "gateway"`: the record goes, corral's resolver stops,
//!   dnsmasq answers.
//! - corral's DHCP server is hosted with the resolver: a port bound as the
//!   lifecycle binds one gets no lease before the supervisor runs
//!   (no dnsmasq serves the bridge: the control) and its
//!   reservation once it does.
//! - A `none` profile on corral's gateway: DHCP alone, no resolver; the
//!   gate asks the gateway's socket whether anything hosts it.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_egress::netns::Netns;
use corral_egress::plan::PortBinding;
use corral_gateway::resolver::{extended_errors, recorded};
use corral_sandbox_core::{Config, ProfileName};
use corral_service::audit::{Collector, NoNics};
use corral_service::config::{LoadedConfig, Origin};
use corral_service::gate::{self, GateError, Missing};
use corral_service::host::{HostService, plan_config};
use corral_service::ports::bind_new;
use corral_service::store::Store;
use corral_service::supervise::{GatewaySupervisor, SupervisorHandle};
use corral_service::target::Target;
use hickory_proto::op::{Edns, Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 97, 3, 1);

fn config(allow: &str, dns: &str) -> Config {
    config_with(allow, dns, "")
}

/// [`config`] with `extra` lines in the profile.
fn config_with(allow: &str, dns: &str, extra: &str) -> Config {
    let text = format!(
        r#"
[host]
dns_upstreams = ["192.0.2.53"]

[[profile]]
name = "agent"
bridge = "cb-rsv"
subnet = "10.97.3.0/24"
mode = "allowlist"
dns = "{dns}"
allow = ["{allow}"]
{extra}
"#
    );
    Config::from_toml_str(&text, "corral.toml").unwrap()
}

struct Lab {
    ns: Netns,
    path: String,
    state: tempfile::TempDir,
}

impl Lab {
    fn new() -> Self {
        let ns = Netns::new().unwrap();
        let path = format!("/proc/{}/fd/{}", std::process::id(), ns.fd().as_raw_fd());
        Self {
            ns,
            path,
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn service(&self) -> HostService {
        HostService::new(
            Target::open(Some(&self.path)).unwrap(),
            self.state.path().to_owned(),
        )
    }

    fn apply(&self, config: Config) {
        let planned = plan_config(LoadedConfig {
            config,
            origin: Origin::Builtin,
        })
        .unwrap();
        self.service().apply(&planned).unwrap();
    }

    /// One EDNS query to the gateway from inside the namespace; `None`:
    /// no answer.
    fn ask(&self, name: &str) -> Option<Message> {
        ask_in(&self.ns, name, Duration::from_millis(500))
    }

    fn gate(&self, config: &Config) -> Result<gate::GatePass, Box<GateError>> {
        gate::check(
            config,
            &ProfileName::new("agent").unwrap(),
            Some(&self.path),
            self.state.path(),
        )
        .map_err(Box::new)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Ok(t) = Target::open(Some(&self.path)) {
            let _ = HostService::new(t, self.state.path().to_owned()).teardown();
        }
    }
}

/// One EDNS query to the gateway from inside `ns`, waiting up to `wait`;
/// `None`: no answer.
fn ask_in(ns: &Netns, name: &str, wait: Duration) -> Option<Message> {
    let mut q = Message::new();
    q.set_id(0x3131).set_recursion_desired(true);
    q.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    q.set_edns(Edns::new());
    let bytes = q.to_vec().unwrap();
    ns.run(move || {
        let s = UdpSocket::bind("0.0.0.0:0").ok()?;
        s.set_read_timeout(Some(wait)).ok()?;
        s.send_to(&bytes, SocketAddr::new(GATEWAY.into(), 53))
            .ok()?;
        let mut buf = [0u8; 4096];
        let n = s.recv(&mut buf).ok()?;
        Message::from_vec(&buf[..n]).ok()
    })
    .unwrap()
}

/// Polls `done` until it holds; a correctness wait with a generous bound,
/// not a timing assertion.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A guest on a fresh port of the profile, bound as the lifecycle binds
/// one: its namespace, with `eth0` carrying the binding's MAC.
fn guest(lab: &Lab) -> (Netns, PortBinding) {
    let (binding, claim) = bind_new(
        Some(&lab.path),
        lab.state.path(),
        &ProfileName::new("agent").unwrap(),
        &[],
    )
    .unwrap();
    drop(claim);
    let guest = corral_egress::link::guest::guest_on_bridge(
        &lab.ns,
        "cb-rsv",
        binding.port.as_str(),
        binding.mac.octets(),
    );
    (guest, binding)
}

/// busybox udhcpc in `ns`, `tries` DISCOVERs a second apart: the address
/// bound, or `None` when no lease came.
fn udhcpc(ns: &Netns, tries: u32) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let client = corral_test_support::Udhcpc::in_dir(dir.path());
    ns.spawn(client.command("eth0", tries))
        .unwrap()
        .wait()
        .unwrap();
    client.bound()
}

/// The gateway supervisor, as corrald runs it, rescanning every 200 ms.
fn supervise(lab: &Lab) -> (tokio::runtime::Runtime, SupervisorHandle) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let store = Arc::new(Store::open(lab.state.path()).unwrap());
    let handle = rt.block_on(async {
        GatewaySupervisor::new(lab.state.path(), Some(&lab.path), store)
            .unwrap()
            .with_rescan(Duration::from_millis(200))
            .spawn()
    });
    (rt, handle)
}

fn texts(m: &Message) -> String {
    extended_errors(m)
        .into_iter()
        .map(|e| e.text)
        .collect::<Vec<_>>()
        .join("; ")
}

#[test]
fn the_supervisor_hosts_corrals_resolver_and_follows_each_apply() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("dnsmasq", "dnsmasq-base")
    {
        return;
    }
    let lab = Lab::new();
    let first = config("*.corral.test", "corral");
    lab.apply(first.clone());
    assert_eq!(recorded(lab.state.path()).len(), 1, "the apply records it");
    // No dnsmasq on the bridge: corral's gateway has it.
    let states = corral_gateway::status_recorded(lab.state.path());
    assert_eq!(states.len(), 1, "{states:?}");
    assert_eq!(states[0].status, corral_gateway::GatewayStatus::Hosted);

    // Control: dnsmasq serves only the leases; without a host for corral's
    // resolver nothing answers and the gate refuses, saying why.
    assert!(lab.ask("corral-gate-check").is_none(), "something answers");
    let (sandbox, binding) = guest(&lab);
    assert_eq!(
        udhcpc(&sandbox, 2),
        None,
        "a lease came with no host for corral's DHCP server (dnsmasq serves DHCPv4 here?)"
    );
    match lab.gate(&first).map_err(|e| *e) {
        Err(GateError::Refused(r)) => {
            assert!(
                r.missing
                    .iter()
                    .any(|m| matches!(m, Missing::Resolver { .. })),
                "{r}"
            );
            assert!(r.to_string().contains("corral host watch"), "{r}");
        }
        other => panic!("the gate must refuse without the resolver: {other:?}"),
    }

    let (rt, handle) = supervise(&lab);
    // The audit collector, as corrald runs it beside the supervisor.
    let _collector = Collector::try_start(lab.state.path(), Some(&lab.path), Arc::new(NoNics))
        .unwrap()
        .expect("no other collector");
    wait_until("the supervisor hosts the resolver", || {
        lab.ask("corral-gate-check").is_some()
    });
    lab.gate(&first)
        .expect("the gate passes with the resolver up");
    // corral's DHCP server came with it: the bound port gets its lease.
    assert_eq!(
        udhcpc(&sandbox, 6).as_deref(),
        Some(binding.v4.to_string().as_str()),
        "corral's DHCP server gave the bound port no lease"
    );
    // Listed: forwarded (and failing upstream, as the namespace has no
    // route); unlisted: refused by corral's policy, with the reason.
    let listed = lab.ask("pkg.corral.test").unwrap();
    assert_eq!(listed.response_code(), ResponseCode::ServFail, "{listed:?}");
    assert!(texts(&listed).contains("192.0.2.53"), "{}", texts(&listed));
    let unlisted = lab.ask("pkg.other.test").unwrap();
    assert_eq!(unlisted.response_code(), ResponseCode::NXDomain);
    assert!(
        texts(&unlisted).contains("blocked by corral profile `agent`"),
        "{}",
        texts(&unlisted)
    );

    // The resolver's own records reach the audit trail.
    let trail = lab.state.path().join("audit").join("audit.jsonl");
    wait_until("the refusal is in the audit trail", || {
        std::fs::read_to_string(&trail).is_ok_and(|t| {
            t.lines().any(|l| {
                l.contains(r#""event":"dns_refused""#) && l.contains(r#""name":"pkg.other.test""#)
            })
        })
    });

    // The name leaves the list: refused from the new resolver on.
    lab.apply(config("*.other.test", "corral"));
    wait_until("the narrowed list is served", || {
        lab.ask("pkg.corral.test")
            .is_some_and(|m| m.response_code() == ResponseCode::NXDomain)
    });
    let now = lab.ask("pkg.other.test").unwrap();
    assert_eq!(now.response_code(), ResponseCode::ServFail, "{now:?}");

    // Back on dnsmasq: the record goes and dnsmasq answers (its own
    // refusal carries no EDE text).
    lab.apply(config("*.other.test", "gateway"));
    assert!(recorded(lab.state.path()).is_empty());
    assert!(matches!(
        corral_gateway::status_recorded(lab.state.path())[0].status,
        corral_gateway::GatewayStatus::Running { .. }
    ));
    wait_until("dnsmasq answers again", || {
        lab.ask("pkg.corral.test")
            .is_some_and(|m| m.response_code() == ResponseCode::NXDomain && texts(&m).is_empty())
    });
    rt.block_on(handle.stop());
}

/// `approvals = "ask"` in production shape: the apply records the
/// profile, the supervisor hosts its resolver with the held lookups under
/// the state directory, and a decision written there (as `corral approve`
/// writes it) releases the lookup. Control: before the decision the
/// lookup has no answer; the unlisted name is not refused at once.
#[test]
fn the_supervisor_holds_an_unlisted_lookup_until_the_operator_approves() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new();
    let cfg = config_with(
        "*.corral.test",
        "corral",
        "approvals = \"ask\"\napproval_timeout = 20",
    );
    lab.apply(cfg);
    let (rt, handle) = supervise(&lab);
    wait_until("the supervisor hosts the resolver", || {
        lab.ask("pkg.corral.test").is_some()
    });
    let ns = lab.ns.try_clone().unwrap();
    let asked =
        std::thread::spawn(move || ask_in(&ns, "tools.other.test", Duration::from_secs(15)));
    let mut pending = Vec::new();
    wait_until("the lookup waits for the operator", || {
        pending = corral_gateway::approvals::pending(lab.state.path());
        !pending.is_empty()
    });
    assert_eq!(pending[0].name, "tools.other.test");
    assert_eq!(pending[0].profile, "agent");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!asked.is_finished(), "answered before any decision");
    corral_gateway::approvals::decide(
        lab.state.path(),
        &pending[0].id,
        corral_gateway::approvals::Decision::Once,
    )
    .unwrap();
    let answer = asked.join().unwrap().expect("the held lookup was answered");
    // Approved: forwarded like a listed name (and failing upstream, as
    // the namespace has no route), not refused as unlisted.
    assert_eq!(answer.response_code(), ResponseCode::ServFail, "{answer:?}");
    assert!(texts(&answer).contains("192.0.2.53"), "{}", texts(&answer));
    assert!(corral_gateway::approvals::pending(lab.state.path()).is_empty());
    rt.block_on(handle.stop());
}

/// A `none` profile on corral's gateway (`dns = "corral"`): no dnsmasq
/// and no resolver, corral's DHCP server alone. Control: with nothing
/// hosting it the bound port gets no lease and the gate refuses, saying
/// who serves it. Once the supervisor hosts it the gate passes and the
/// port gets its reservation, while nothing answers DNS on the gateway
/// address; once the supervisor stops, the gate refuses again.
#[test]
fn a_none_profile_on_corrals_gateway_gets_leases_and_no_resolver() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new();
    let text = r#"
[[profile]]
name = "agent"
bridge = "cb-rsv"
subnet = "10.97.3.0/24"
mode = "none"
dns = "corral"
"#;
    let cfg = Config::from_toml_str(text, "corral.toml").unwrap();
    lab.apply(cfg.clone());
    assert_eq!(recorded(lab.state.path()).len(), 1, "the apply records it");
    let states = corral_gateway::status_recorded(lab.state.path());
    assert_eq!(states[0].status, corral_gateway::GatewayStatus::Hosted);

    let (sandbox, binding) = guest(&lab);
    assert_eq!(
        udhcpc(&sandbox, 2),
        None,
        "a lease came with nothing hosting"
    );
    let refused = |what: &str| match lab.gate(&cfg).map_err(|e| *e) {
        Err(GateError::Refused(r)) => {
            assert!(
                r.missing
                    .iter()
                    .any(|m| matches!(m, Missing::Hosted { .. })),
                "{what}: {r}"
            );
            assert!(r.to_string().contains("corral host watch"), "{what}: {r}");
        }
        other => panic!("{what}: the gate must refuse: {other:?}"),
    };
    refused("before the supervisor");

    let (rt, handle) = supervise(&lab);
    wait_until("the supervisor hosts corral's gateway", || {
        lab.gate(&cfg).is_ok()
    });
    let pass = lab.gate(&cfg).unwrap();
    assert_eq!((pass.gateway_pid, pass.resolver), (None, None), "{pass:?}");
    assert_eq!(
        udhcpc(&sandbox, 6).as_deref(),
        Some(binding.v4.to_string().as_str()),
        "corral's DHCP server gave the bound port no lease"
    );
    assert!(
        lab.ask("corral-gate-check").is_none(),
        "something answers DNS on a `none` profile's gateway"
    );

    rt.block_on(handle.stop());
    wait_until("the gate refuses once nothing hosts it", || {
        lab.gate(&cfg).is_err()
    });
    refused("after the supervisor");
}
