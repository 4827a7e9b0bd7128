//! The canary through a VM's exec path, for the kinds that cannot run
//! here: Multipass and Tart driven through their recording fake tools
//! (`corral_tests::fakes`), whose `exec` runs the command on this machine.
//! The "guest" network tools (`nc`, `ping`, `nslookup`, `getent`) are fakes
//! too, installed first on the fake's PATH: they answer as a guest behind a
//! filter would (everything refused) except for the addresses listed in
//! `state/guest.reach`, and log every call to `state/guest.log`. So these
//! tests prove corral's side — what it runs in the guest, how it reads the
//! answers, the gate, the store, the watchdog, fail-closed on a dead or
//! unknown filter — and not any real guest or filter.
//!
//! The host's side of each run (listeners, controls) happens in an
//! anonymous network namespace holding the canary addresses, never on this
//! machine's own network.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::Server;
use corral_drill::lab::{Listeners, Transport};
use corral_egress::netns::Netns;
use corral_gateway::test_upstream::TestUpstream;
use corral_provider_multipass::{MultipassConfig, MultipassProvider};
use corral_provider_tart::{TartConfig, TartProvider};
use corral_sandbox_core::sandbox::{InstanceType, ProbeSite, Sandbox, SandboxProvider};
use corral_sandbox_core::verify::{EventOutcome, FilterHealth, KindStatus};
use corral_sandbox_core::{Config, HostOs, SandboxKind};
use corral_service::hooks::{Event, Hooks};
use corral_service::sandboxes::{NewSandbox, spec_for};
use corral_service::store::EventQuery;
use corral_service::verify::watchdog::Watchdog;
use corral_service::{Backend, Origin, SandboxService, Settings, Store, Verifier, WallClock};
use corral_tests::fakes::FakeTool;

const CANARY: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)), 443);
const CANARY_V6: &str = "[2001:db8::7]:443";
const UPSTREAM: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 53)), 53);
const UNLISTED: &str = "unlisted.corral.test";

/// The guest's network tools: refused, unreachable or unanswered, except
/// for the `ADDRESS PORT` lines listed in `state/guest.reach`.
const GUEST_TOOLS: &str = r#"#!/bin/sh
d='@STATE@'
tool=${0##*/}
echo "$tool $*" >> "$d/guest.log"
reach() { grep -qx "$1 $2" "$d/guest.reach" 2>/dev/null; }
case "$tool" in
nc)
  udp=''
  while [ "$#" -gt 2 ]; do
    case "$1" in -u) udp=1; shift ;; -w) shift 2 ;; -*) shift ;; *) break ;; esac
  done
  host=$1; port=$2
  if [ -n "$udp" ]; then
    reach "$host" "$port" && { echo "nc: read(net): Connection refused"; exit 1; }
    echo "Connection to $host $port port [udp/*] succeeded!"; exit 0
  fi
  reach "$host" "$port" && { echo "Connection to $host $port port [tcp/*] succeeded!"; exit 0; }
  case "$host" in
    *:*) echo "nc: connect to $host port $port (tcp) failed: Network is unreachable" ;;
    *) echo "nc: connect to $host port $port (tcp) failed: Connection refused" ;;
  esac
  exit 1 ;;
nslookup)
  if [ "$#" -ge 2 ]; then
    reach "$2" 53 && { echo "** server can't find $1: NXDOMAIN"; exit 1; }
    echo ";; connection timed out; no servers could be reached"; exit 1
  fi
  printf "Server:\t\t10.0.2.3\nAddress:\t10.0.2.3#53\n\n** server can't find %s: NXDOMAIN\n" "$1"
  exit 1 ;;
getent)
  exit 2 ;;
ping)
  echo "1 packets transmitted, 0 received, 100% packet loss"; exit 1 ;;
esac
exit 127
"#;

/// The host's side: an anonymous namespace with the canary on `lo`, a
/// listener on it, and the upstream resolver that knows the unlisted name.
struct HostSide {
    ns: Netns,
    _listeners: Listeners,
    _upstream: TestUpstream,
}

fn host_side() -> HostSide {
    let ns = Netns::new().unwrap();
    ns.run_async(|| async {
        let links = corral_egress::link::Links::connect().unwrap();
        for ip in [CANARY.ip(), CANARY_V6.parse::<SocketAddr>().unwrap().ip()] {
            links
                .add_address("lo", ipnet::IpNet::from(ip))
                .await
                .unwrap();
        }
    })
    .unwrap();
    let listeners = Listeners::start(&ns).unwrap();
    listeners.add(CANARY, Transport::Tcp).unwrap();
    listeners
        .add(CANARY_V6.parse().unwrap(), Transport::Tcp)
        .unwrap();
    let upstream = ns.run(|| TestUpstream::bind(UPSTREAM)).unwrap().unwrap();
    upstream.set(UNLISTED, &[IpAddr::V4(Ipv4Addr::new(198, 18, 5, 5))], 30);
    HostSide {
        ns,
        _listeners: listeners,
        _upstream: upstream,
    }
}

/// The built-in profiles with a verification section (and `kinds`).
fn config(kinds: &[SandboxKind]) -> Config {
    let mut c = Config::builtin_default();
    c.host.dns_upstreams = vec![UPSTREAM.ip()];
    let v = &mut c.host.verification;
    v.kinds = kinds.to_vec();
    v.canary = Some(CANARY);
    v.canary_v6 = Some(CANARY_V6.parse().unwrap());
    v.unlisted_name = Some(UNLISTED.parse().unwrap());
    v.options.check_timeout = Duration::from_secs(2);
    c
}

fn settings(config: Config, state: &Path) -> Arc<Settings> {
    Arc::new(Settings {
        config,
        origin: Origin::Builtin,
        netns: None,
        state_dir: state.to_owned(),
    })
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn install_guest_tools(fake: &FakeTool) {
    for tool in ["nc", "ping", "nslookup", "getent"] {
        fake.install(tool, GUEST_TOOLS);
    }
}

fn guest_log(fake: &FakeTool) -> Vec<String> {
    std::fs::read_to_string(fake.state().join("guest.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

async fn vm(
    provider: &dyn SandboxProvider,
    config: &Config,
    name: &str,
    profile: &str,
) -> Box<dyn Sandbox> {
    let spec = spec_for(
        config,
        &NewSandbox {
            instance_type: InstanceType::Vm,
            ..NewSandbox::new(name, "24.04").on(profile)
        },
    )
    .unwrap();
    let sandbox = provider.create(&spec).await.unwrap();
    if sandbox.info().await.unwrap().state != corral_sandbox_core::sandbox::SandboxState::Running {
        sandbox.start().await.unwrap();
    }
    sandbox
}

#[test]
fn multipass_canary_runs_in_the_guest_through_exec() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // Built outside the runtime: the listeners' setup blocks.
    let host = host_side();
    runtime().block_on(multipass_canary_runs_in_the_guest_through_exec_in(&host));
}

async fn multipass_canary_runs_in_the_guest_through_exec_in(host: &HostSide) {
    let fake = FakeTool::multipass();
    install_guest_tools(&fake);
    let state = tempfile::tempdir().unwrap();
    let cfg = config(&[]);
    let mut mp = MultipassConfig::new(fake.staging(), cfg.profiles.clone());
    mp.timeouts.command = Duration::from_secs(20);
    let runner = corral_provider_multipass::ProcessRunner::with_search_path(fake.search_path());
    let provider =
        MultipassProvider::with_runner(mp, Arc::new(runner), SandboxKind::Multipass).unwrap();
    let store = Arc::new(Store::open(state.path()).unwrap());
    let verifier = Verifier::new(
        settings(cfg.clone(), state.path()),
        Arc::clone(&store),
        Arc::new(WallClock),
    )
    .with_host_namespace(host.ns.try_clone().unwrap());

    let sandbox = vm(&provider, &cfg, "mp-iso", "isolated").await;
    let report = verifier.verify(sandbox.as_ref()).await.unwrap();
    assert!(report.passed, "{:#?}", report.event);
    assert_eq!(report.site, ProbeSite::Guest);
    assert!(
        !report.verified,
        "multipass is enforced by corral, never 'verified'"
    );
    let kinds: Vec<&str> = report
        .event
        .checks
        .iter()
        .map(|c| c.kind.as_str())
        .collect();
    assert_eq!(
        kinds,
        [
            "canary-blocked",
            "ipv6-blocked",
            "host-lan-blocked",
            "metadata-blocked",
            "foreign-resolver-blocked"
        ]
    );
    // Exactly what ran in the guest: one tool call per check, the values
    // as arguments.
    let mut log = guest_log(&fake);
    log.sort();
    let lan = report.event.checks[2]
        .target
        .trim_start_matches("tcp ")
        .to_owned();
    let (lan_ip, lan_port) = lan.rsplit_once(':').unwrap();
    let mut want = vec![
        "nc -v -z -w 2 198.51.100.7 443".to_owned(),
        "nc -v -z -w 2 2001:db8::7 443".to_owned(),
        format!("nc -v -z -w 2 {lan_ip} {lan_port}"),
        "nc -v -z -w 2 169.254.169.254 80".to_owned(),
        "nslookup corral-canary.invalid 198.51.100.7".to_owned(),
    ];
    want.sort();
    assert_eq!(log, want);
    for c in &report.event.checks {
        if c.kind.as_str() != "metadata-blocked" {
            assert!(c.control.as_ref().unwrap().reached, "{c:#?}");
        }
    }

    // The filter lets the canary through: the hand-out hook refuses it.
    std::fs::write(fake.state().join("guest.reach"), "198.51.100.7 443\n").unwrap();
    let info = sandbox.info().await.unwrap();
    let refused = verifier
        .before_handout(sandbox.as_ref(), &info)
        .await
        .unwrap_err();
    assert_eq!(refused.check, "canary");
    assert!(
        refused.reason.contains("canary destination blocked"),
        "{refused}"
    );
    let events = store.events(&EventQuery::default()).unwrap();
    let last_run = events
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::Verification(v) => Some(v),
            _ => None,
        })
        .unwrap();
    assert_eq!(last_run.outcome, EventOutcome::Failed);
    assert!(events.iter().any(|e| e.alert), "{events:#?}");
    // Not an opted-in kind: nothing demoted.
    assert!(
        store
            .gate(&cfg.host.verification)
            .unwrap()
            .demotions()
            .is_empty()
    );

    // The internet profile's canary must connect and its UDP must arrive.
    let net = vm(&provider, &cfg, "mp-net", "internet").await;
    let report = verifier.verify(net.as_ref()).await.unwrap();
    assert!(report.passed, "{:#?}", report.event);
    let kinds: Vec<&str> = report
        .event
        .checks
        .iter()
        .map(|c| c.kind.as_str())
        .collect();
    assert!(kinds.contains(&"allowed-connects") && kinds.contains(&"allowed-udp"));
    std::fs::remove_file(fake.state().join("guest.reach")).unwrap();
    let report = verifier.verify(net.as_ref()).await.unwrap();
    assert!(
        !report.passed,
        "a guest that reaches nothing fails the must-connect checks"
    );
}

#[test]
fn tart_dead_filter_fails_closed_and_the_demotion_survives_corrald_restarts() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // Built outside the runtime: the listeners' setup blocks.
    let host = host_side();
    runtime().block_on(
        tart_dead_filter_fails_closed_and_the_demotion_survives_corrald_restarts_in(&host),
    );
}

async fn tart_dead_filter_fails_closed_and_the_demotion_survives_corrald_restarts_in(
    host: &HostSide,
) {
    let fake = FakeTool::tart();
    install_guest_tools(&fake);
    let state = tempfile::tempdir().unwrap();
    let cfg = config(&[SandboxKind::Tart]);
    let mut tc = TartConfig::new(fake.staging(), cfg.profiles.clone());
    tc.timeouts.boot = Duration::from_secs(10);
    tc.timeouts.poll = Duration::from_millis(50);
    let runner = corral_provider_tart::ProcessRunner::with_search_path(fake.search_path());
    let provider: Arc<dyn SandboxProvider> =
        Arc::new(TartProvider::new(tc, Arc::new(runner), HostOs::Macos).unwrap());
    let settings = settings(cfg.clone(), state.path());
    let store = Arc::new(Store::open(state.path()).unwrap());
    let verifier = Verifier::new(
        Arc::clone(&settings),
        Arc::clone(&store),
        Arc::new(WallClock),
    )
    .with_host_namespace(host.ns.try_clone().unwrap());
    let backend =
        Arc::new(Backend::with_provider(HostOs::Macos, &cfg.host, Arc::clone(&provider)).unwrap());
    assert!(backend.selection().verification_required);
    let service = SandboxService::new(Arc::clone(&settings), backend);

    let sandbox = vm(provider.as_ref(), &cfg, "tart-iso", "isolated").await;
    let report = verifier.verify(sandbox.as_ref()).await.unwrap();
    assert!(report.passed, "{:#?}", report.event);
    assert!(report.verified, "an opted-in kind earns the gate's proof");
    assert_eq!(report.event.filter_health, Some(FilterHealth::Alive));

    // Softnet dies: the watchdog notices at once, the run fails closed on
    // the filter's health, tart is demoted and the VM stopped.
    let softnet = fake.read_pid("softnet.pid").unwrap();
    let _ = std::process::Command::new("/bin/kill")
        .args(["-KILL", &softnet.to_string()])
        .status();
    let t = Instant::now();
    while sandbox
        .filter_health()
        .await
        .unwrap()
        .is_some_and(|h| h.is_alive())
    {
        assert!(t.elapsed() < Duration::from_secs(30), "softnet never died");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let watchdog = Watchdog::new(verifier.clone(), service, Duration::from_secs(3600));
    let watched = watchdog.pass().await;
    assert_eq!(watched.len(), 1, "{watched:#?}");
    assert!(
        watched[0].why.contains("filter is dead"),
        "{}",
        watched[0].why
    );
    let run = watched[0].report.as_ref().unwrap();
    assert!(!run.passed);
    assert!(
        run.event.message.contains("filter health is dead"),
        "{}",
        run.event.message
    );
    assert_eq!(run.action.as_deref(), Some("stopped"));
    // A forced stop kills the VM's `tart run` (the fake's list would still
    // say running: only the real tart notices its VM died).
    let run_pid = fake.read_pid("run.pid").unwrap();
    let t = Instant::now();
    while Path::new(&format!("/proc/{run_pid}/cmdline")).exists()
        && std::fs::read_to_string(format!("/proc/{run_pid}/stat"))
            .is_ok_and(|st| !st.contains(") Z "))
    {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "tart run {run_pid} still alive"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let now = corral_sandbox_core::verify::Clock::now(&WallClock);
    let gate = store.gate(&cfg.host.verification).unwrap();
    assert!(matches!(
        gate.status(SandboxKind::Tart, now),
        KindStatus::Demoted { .. }
    ));

    // On disk: corrald reads the same store, before and after a restart.
    let file = state.path().join("corral.toml");
    std::fs::write(&file, cfg.to_toml_string()).unwrap();
    for _ in 0..2 {
        let srv = Server::start_exact(&[
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--config".into(),
            file.display().to_string(),
            "--state-dir".into(),
            state.path().display().to_string(),
        ]);
        let (s, v) = srv.get("/v1/verification");
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["opted_in"], serde_json::json!(["tart"]));
        assert_eq!(v["kinds"][0]["kind"], "tart", "{v:#}");
        assert_eq!(v["kinds"][0]["status"], "demoted", "{v:#}");
        assert!(
            v["kinds"][0]["demotion_reason"]
                .as_str()
                .unwrap()
                .contains("filter health is dead"),
            "{v:#}"
        );
    }
}

#[test]
fn tart_unknown_filter_health_fails_closed() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // Built outside the runtime: the listeners' setup blocks.
    let host = host_side();
    runtime().block_on(tart_unknown_filter_health_fails_closed_in(&host));
}

async fn tart_unknown_filter_health_fails_closed_in(host: &HostSide) {
    let fake = FakeTool::tart();
    install_guest_tools(&fake);
    let state = tempfile::tempdir().unwrap();
    let cfg = config(&[SandboxKind::Tart]);
    let mut tc = TartConfig::new(fake.staging(), cfg.profiles.clone());
    tc.timeouts.boot = Duration::from_secs(10);
    tc.timeouts.poll = Duration::from_millis(50);
    let runner = corral_provider_tart::ProcessRunner::with_search_path(fake.search_path());
    let provider = TartProvider::new(tc, Arc::new(runner), HostOs::Macos).unwrap();
    let store = Arc::new(Store::open(state.path()).unwrap());
    let verifier = Verifier::new(
        settings(cfg.clone(), state.path()),
        Arc::clone(&store),
        Arc::new(WallClock),
    )
    .with_host_namespace(host.ns.try_clone().unwrap());
    let sandbox = vm(&provider, &cfg, "tart-unk", "isolated").await;
    // corral cannot read the process table: the filter's health is unknown.
    fake.install("ps", "#!/bin/sh\necho 'ps: not permitted' >&2\nexit 1\n");
    let report = verifier.verify(sandbox.as_ref()).await.unwrap();
    assert!(!report.passed);
    assert!(matches!(
        report.event.filter_health,
        Some(FilterHealth::Unknown { .. })
    ));
    assert!(
        report.event.message.contains("filter health is unknown"),
        "{}",
        report.event.message
    );
    assert!(matches!(
        store.gate(&cfg.host.verification).unwrap().status(
            SandboxKind::Tart,
            corral_sandbox_core::verify::Clock::now(&WallClock)
        ),
        KindStatus::Demoted { .. }
    ));
    let _ = sandbox.stop(Default::default()).await;
}
