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
use corral_sandbox_core::sandbox::{
    InstanceType, ProbeSite, Sandbox, SandboxProvider, SandboxState,
};
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

    // The internet profile's canary must connect and its UDP must arrive,
    // and (it has IPv6) the IPv6 canary must connect too.
    std::fs::write(
        fake.state().join("guest.reach"),
        "198.51.100.7 443\n2001:db8::7 443\n",
    )
    .unwrap();
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
    assert!(kinds.contains(&"ipv6-allowed"), "{kinds:?}");
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
    let service = SandboxService::new(Arc::clone(&settings), backend)
        .without_canary("the test runs its verifier itself");

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

/// The fake `multipass` behind a wrapper whose `stop` fails while
/// `state/stop.fail` holds a count above zero (one less after each
/// failure), and logs every stop to `state/stop.log`: a VM that will not
/// stop, which no real backend here can be made to be on demand.
const STOP_FAILS: &str = r#"#!/bin/sh
d='@STATE@'
if [ "$1" = stop ]; then
  echo "stop $*" >> "$d/stop.log"
  n=$(cat "$d/stop.fail" 2>/dev/null || echo 0)
  if [ "$n" -gt 0 ]; then
    echo $((n - 1)) > "$d/stop.fail"
    echo "stop failed: the instance is wedged (injected)" >&2
    exit 2
  fi
fi
exec '@BIN@/multipass-real' "$@"
"#;

/// A multipass provider on `fake`, the watchdog's service on it, and a
/// verifier whose host side is `host`'s namespace.
fn multipass_watchdog_parts(
    fake: &FakeTool,
    cfg: &Config,
    state: &Path,
    host: &HostSide,
) -> (
    Arc<dyn SandboxProvider>,
    Arc<Store>,
    Verifier,
    SandboxService,
) {
    let mut mp = MultipassConfig::new(fake.staging(), cfg.profiles.clone());
    mp.timeouts.command = Duration::from_secs(20);
    let runner = corral_provider_multipass::ProcessRunner::with_search_path(fake.search_path());
    let provider: Arc<dyn SandboxProvider> = Arc::new(
        MultipassProvider::with_runner(mp, Arc::new(runner), SandboxKind::Multipass).unwrap(),
    );
    let settings = settings(cfg.clone(), state);
    let store = Arc::new(Store::open(state).unwrap());
    let verifier = Verifier::new(
        Arc::clone(&settings),
        Arc::clone(&store),
        Arc::new(WallClock),
    )
    .with_host_namespace(host.ns.try_clone().unwrap());
    let backend =
        Arc::new(Backend::with_provider(HostOs::Linux, &cfg.host, Arc::clone(&provider)).unwrap());
    let service =
        SandboxService::new(settings, backend).without_canary("the test runs its verifier itself");
    (provider, store, verifier, service)
}

/// The VM's state as the provider reads it from the fake.
async fn vm_state(sandbox: &dyn Sandbox) -> SandboxState {
    sandbox.info().await.unwrap().state
}

fn alerts(store: &Store, sandbox: &str) -> Vec<String> {
    store
        .events(&EventQuery {
            sandbox: Some(sandbox.to_owned()),
            ..EventQuery::default()
        })
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::Alert { reason, .. } => Some(reason),
            _ => None,
        })
        .collect()
}

fn stopped_events(store: &Store, sandbox: &str) -> usize {
    store
        .events(&EventQuery {
            sandbox: Some(sandbox.to_owned()),
            ..EventQuery::default()
        })
        .unwrap()
        .iter()
        .filter(|e| matches!(e.event, Event::Stopped { .. }))
        .count()
}

/// The watchdog re-verifies a running sandbox whatever its last verdict,
/// and tells the truth about its stop. A fake provider is used because the
/// failures are injected: a canary the guest reaches (the fake guest
/// tools) and a stop that fails (the wrapper above).
#[test]
fn the_watchdog_reverifies_a_failed_verdict_and_says_not_stopped_when_the_stop_fails() {
    if !corral_test_support::gate::netns() {
        return;
    }
    // Built outside the runtime: the listeners' setup blocks.
    let host = host_side();
    runtime().block_on(the_watchdog_reverifies_a_failed_verdict_in(&host));
}

async fn the_watchdog_reverifies_a_failed_verdict_in(host: &HostSide) {
    let fake = FakeTool::multipass();
    install_guest_tools(&fake);
    fake.install_copy("multipass-real", &fake.bin().join("multipass"));
    fake.install("multipass", STOP_FAILS);
    let state = tempfile::tempdir().unwrap();
    let cfg = config(&[]);
    let (provider, store, verifier, service) =
        multipass_watchdog_parts(&fake, &cfg, state.path(), host);
    let name = "mp-wd";
    let sandbox = vm(provider.as_ref(), &cfg, name, "isolated").await;
    let report = verifier.verify(sandbox.as_ref()).await.unwrap();
    assert!(report.passed, "{:#?}", report.event);

    let watchdog = Watchdog::new(verifier.clone(), service.clone(), Duration::from_secs(3600))
        .with_handout_grace(Duration::ZERO);
    // Control: a passing verdict inside the interval is left alone.
    assert!(watchdog.pass().await.is_empty());

    // The guest reaches the canary: a run fails, the verdict is `failed`,
    // and (no stop asked for here) the VM runs on.
    let reach = fake.state().join("guest.reach");
    std::fs::write(&reach, "198.51.100.7 443\n").unwrap();
    assert!(!verifier.verify(sandbox.as_ref()).await.unwrap().passed);
    assert_eq!(
        store.sandbox(name).unwrap().unwrap().verdict,
        Some(corral_service::store::Verdict::Failed)
    );
    assert_eq!(vm_state(sandbox.as_ref()).await, SandboxState::Running);

    // Control: with the default hand-out grace the same pass waits (the
    // sandbox could be mid-hand-out).
    let patient = Watchdog::new(verifier.clone(), service.clone(), Duration::from_secs(3600));
    assert!(patient.pass().await.is_empty());

    // Every stop fails: the pass re-verifies it (a failed verdict), the
    // run fails, each of the attempts is made, and the alert and action
    // say "not stopped", with no `stopped` event.
    let _ = std::fs::remove_file(fake.state().join("stop.log"));
    std::fs::write(fake.state().join("stop.fail"), "99").unwrap();
    let watched = watchdog.pass().await;
    assert_eq!(watched.len(), 1, "{watched:#?}");
    assert!(
        watched[0].why.contains("a failed verdict"),
        "{}",
        watched[0].why
    );
    let run = watched[0].report.as_ref().unwrap();
    assert!(!run.passed);
    let action = run.action.as_deref().unwrap();
    assert!(
        action.starts_with("not stopped: ") && action.contains("wedged (injected)"),
        "{action}"
    );
    let stops = std::fs::read_to_string(fake.state().join("stop.log")).unwrap();
    assert_eq!(stops.lines().count(), 4, "{stops}");
    assert!(stops.lines().all(|l| l.contains("--force")), "{stops}");
    assert_eq!(vm_state(sandbox.as_ref()).await, SandboxState::Running);
    let said = alerts(&store, name);
    let last = said.last().unwrap();
    assert!(
        last.contains("not stopped: ") && !last.contains("corral stopped it"),
        "{said:#?}"
    );
    assert_eq!(stopped_events(&store, name), 0);

    // The next pass tries again at once; the stop fails once, then works:
    // "stopped on attempt 2", a `stopped` event, the VM stopped.
    std::fs::write(fake.state().join("stop.fail"), "1").unwrap();
    let watched = watchdog.pass().await;
    assert_eq!(watched.len(), 1, "{watched:#?}");
    assert!(
        watched[0].why.contains("could not stop it"),
        "{}",
        watched[0].why
    );
    let action = watched[0].report.as_ref().unwrap().action.clone();
    assert_eq!(action.as_deref(), Some("stopped on attempt 2 of 4"));
    assert_eq!(vm_state(sandbox.as_ref()).await, SandboxState::Stopped);
    assert_eq!(stopped_events(&store, name), 1);
    let said = alerts(&store, name);
    assert!(
        said.last()
            .unwrap()
            .contains("corral stopped it on attempt 2"),
        "{said:#?}"
    );

    // Started again behind the gate's back with the filter mended: its
    // verdict is still `failed`, and the watchdog verifies it all the same
    // (passing now, so it runs on).
    std::fs::remove_file(&reach).unwrap();
    sandbox.start().await.unwrap();
    let watched = watchdog.pass().await;
    assert_eq!(watched.len(), 1, "{watched:#?}");
    assert!(watched[0].report.as_ref().unwrap().passed);
    assert_eq!(
        store.sandbox(name).unwrap().unwrap().verdict,
        Some(corral_service::store::Verdict::Passed)
    );
    assert_eq!(vm_state(sandbox.as_ref()).await, SandboxState::Running);
    let _ = sandbox.stop(Default::default()).await;
}

/// A nudge for a profile re-verifies its sandboxes at once, through the
/// running loop, with an interval (an hour, so a 30 s tick) that would not
/// have. Fake provider: the canary's answers come from the fake guest
/// tools.
#[test]
fn a_nudge_for_a_profile_reverifies_its_sandboxes_at_once() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let host = host_side();
    runtime().block_on(a_nudge_for_a_profile_in(&host));
}

async fn a_nudge_for_a_profile_in(host: &HostSide) {
    use corral_service::verify::watchdog::Scope;

    let fake = FakeTool::multipass();
    install_guest_tools(&fake);
    let state = tempfile::tempdir().unwrap();
    let cfg = config(&[]);
    let (provider, store, verifier, service) =
        multipass_watchdog_parts(&fake, &cfg, state.path(), host);
    let name = "mp-nudge";
    let sandbox = vm(provider.as_ref(), &cfg, name, "isolated").await;
    assert!(verifier.verify(sandbox.as_ref()).await.unwrap().passed);
    let runs = || {
        store
            .events(&EventQuery {
                sandbox: Some(name.to_owned()),
                ..EventQuery::default()
            })
            .unwrap()
            .iter()
            .filter(|e| matches!(e.event, Event::Verification(_)))
            .count()
    };
    assert_eq!(runs(), 1);

    let watchdog = Watchdog::new(verifier.clone(), service, Duration::from_secs(3600));
    assert_eq!(watchdog.tick(), Duration::from_secs(30));
    let handle = watchdog.handle();
    let task = tokio::spawn(watchdog.run());
    // Well inside the tick: what is served, a nudge served.
    let soon = Duration::from_secs(15);

    // Controls: another profile, another sandbox: served, nothing verified.
    for scope in [
        Scope::Profile("internet".into()),
        Scope::Sandbox("mp-other".into()),
    ] {
        let watched = tokio::time::timeout(soon, handle.reverify(scope.clone()))
            .await
            .unwrap()
            .unwrap();
        assert!(watched.is_empty(), "{scope:?}: {watched:#?}");
    }
    assert_eq!(runs(), 1);

    // Its profile: verified at once, and the answer says why.
    let t = std::time::Instant::now();
    let watched = tokio::time::timeout(soon, handle.reverify(Scope::Profile("isolated".into())))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(watched.len(), 1, "{watched:#?}");
    assert_eq!(watched[0].sandbox, name);
    assert!(
        watched[0].why.contains("profile `isolated`"),
        "{}",
        watched[0].why
    );
    assert!(watched[0].report.as_ref().unwrap().passed);
    assert_eq!(runs(), 2);
    eprintln!("nudge served in {} ms", t.elapsed().as_millis());

    // A fire-and-forget nudge for the sandbox: a run appears, well inside
    // the tick.
    handle.nudge(Scope::Sandbox(name.into())).unwrap();
    let t = std::time::Instant::now();
    while runs() < 3 {
        assert!(t.elapsed() < soon, "the nudge was not served");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The loop gone, a handle says so.
    task.abort();
    let _ = task.await;
    assert!(handle.nudge(Scope::All).is_err());
    let _ = sandbox.stop(Default::default()).await;
}
