//! The gateway supervisor against real dnsmasq: corral's built-in
//! profiles applied (rules, bridges, gateways) inside an anonymous network
//! namespace, the allowlist profile's gateway killed with SIGKILL.
//!
//! - Control: with no supervisor the gateway stays dead, its resolver does
//!   not answer and the profile's start gate refuses, naming the gateway.
//! - A supervisor started then finds it dead and restarts it from the
//!   recorded configuration: the resolver answers again, the gate passes,
//!   `gateway_died` (an alert) and `gateway_restarted` are on record.
//! - Killed again while supervised: the death is seen through the pidfd
//!   and the gateway answers again, a new daemon.
//! - A gateway corral stops itself (its pid file removed) is left stopped.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_egress::netns::Netns;
use corral_gateway::{Gateway, GatewayStatus};
use corral_sandbox_core::{Config, ProfileName};
use corral_service::config::{LoadedConfig, Origin};
use corral_service::gate::{self, GateError, Missing};
use corral_service::hooks::Event;
use corral_service::host::{HostService, plan_config};
use corral_service::store::{EventQuery, Store};
use corral_service::supervise::GatewaySupervisor;
use corral_service::target::Target;

const PROFILE: &str = "allowlist";

struct Lab {
    ns: Netns,
    path: String,
    state: tempfile::TempDir,
}

impl Lab {
    fn new() -> Self {
        let ns = Netns::new().unwrap();
        let path = format!("/proc/{}/fd/{}", std::process::id(), ns.fd().as_raw_fd());
        let lab = Self {
            ns,
            path,
            state: tempfile::tempdir().unwrap(),
        };
        let planned = plan_config(LoadedConfig {
            config: Config::builtin_default(),
            origin: Origin::Builtin,
        })
        .unwrap();
        lab.service().apply(&planned).unwrap();
        lab
    }

    fn service(&self) -> HostService {
        HostService::new(
            Target::open(Some(&self.path)).unwrap(),
            self.state.path().to_owned(),
        )
    }

    fn gateway(&self) -> Gateway {
        let config = Config::builtin_default();
        let bridge = &config.profiles.get(PROFILE).unwrap().bridge;
        Gateway::new(self.state.path(), bridge)
    }

    fn pid(&self) -> Option<u32> {
        match self.gateway().status() {
            GatewayStatus::Running { pid } => Some(pid),
            _ => None,
        }
    }

    /// Whether the profile's resolver answers on its gateway address.
    fn answers(&self) -> bool {
        let config = Config::builtin_default();
        let gw = config.profiles.get(PROFILE).unwrap().gateway_v4();
        let to = SocketAddr::new(IpAddr::V4(gw), 53);
        // A dotless name: the gateway answers it itself, nothing is forwarded.
        self.ns
            .run(|| {
                corral_gateway::probe::query(
                    to,
                    "corral-gate-check",
                    corral_gateway::wire::TYPE_A,
                    Duration::from_millis(500),
                )
            })
            .unwrap()
            .is_ok()
    }

    fn gate(&self) -> Result<gate::GatePass, Box<GateError>> {
        gate::check(
            &Config::builtin_default(),
            &ProfileName::new(PROFILE).unwrap(),
            Some(&self.path),
            self.state.path(),
        )
        .map_err(Box::new)
    }

    fn store(&self) -> Arc<Store> {
        Arc::new(Store::open(self.state.path()).unwrap())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Ok(t) = Target::open(Some(&self.path)) {
            let _ = HostService::new(t, self.state.path().to_owned()).teardown();
        }
    }
}

fn kill9(pid: u32) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// Polls `done` until it holds; a correctness wait with a generous bound,
/// not a timing assertion.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn gateway_events(store: &Store) -> Vec<(bool, Event)> {
    store
        .events(&EventQuery::default())
        .unwrap()
        .into_iter()
        .filter(|e| e.event.type_name().starts_with("gateway_"))
        .map(|e| (e.alert, e.event))
        .collect()
}

#[test]
fn a_killed_gateway_is_restarted_and_the_gate_refuses_while_it_is_down() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("dnsmasq", "dnsmasq-base")
    {
        return;
    }
    let lab = Lab::new();
    let store = lab.store();
    let first = lab.pid().expect("the apply started the gateway");
    assert!(lab.answers(), "control: the resolver answers after apply");
    lab.gate()
        .expect("control: the gate passes while the gateway runs");

    // Control: no supervisor. The gateway stays dead and the gate refuses.
    kill9(first);
    wait_until("the killed daemon is gone", || lab.pid().is_none());
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        lab.pid().is_none(),
        "nobody restarts it without the supervisor"
    );
    assert!(!lab.answers(), "the resolver of a dead gateway answers");
    match lab.gate().map_err(|e| *e) {
        Err(GateError::Refused(r)) => {
            assert!(
                r.missing
                    .iter()
                    .any(|m| matches!(m, Missing::Gateway { .. })),
                "{r}"
            );
            assert!(r.to_string().contains("gateway (dnsmasq) of bridge"), "{r}");
        }
        other => panic!("the gate must refuse while the gateway is down: {other:?}"),
    }
    assert!(gateway_events(&store).is_empty());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt.block_on(async {
        GatewaySupervisor::new(lab.state.path(), Some(&lab.path), Arc::clone(&store))
            .unwrap()
            .spawn()
    });

    // The supervisor finds it dead and restarts it.
    wait_until("the supervisor restarts the dead gateway", || lab.answers());
    let second = lab.pid().unwrap();
    assert_ne!(second, first);
    lab.gate()
        .expect("the gate passes once the gateway runs again");
    wait_until("both events are recorded", || {
        gateway_events(&store).len() == 2
    });
    let events = gateway_events(&store);
    match &events[..] {
        [
            (true, Event::GatewayDied { profile, pid, .. }),
            (
                false,
                Event::GatewayRestarted {
                    pid: restarted,
                    attempts,
                    ..
                },
            ),
        ] => {
            assert_eq!(profile.as_deref(), Some(PROFILE));
            assert_eq!(*pid, first);
            assert_eq!(*restarted, second);
            assert_eq!(*attempts, 1);
        }
        other => panic!("{other:?}"),
    }

    // Supervised: the next kill is seen through the pidfd.
    let killed = Instant::now();
    kill9(second);
    wait_until("the supervised gateway answers again", || {
        lab.pid().is_some_and(|p| p != second) && lab.answers()
    });
    eprintln!("kill -9 to answering again: {:?}", killed.elapsed());
    wait_until("the second death and restart are recorded", || {
        gateway_events(&store).len() == 4
    });
    let events = gateway_events(&store);
    assert!(matches!(&events[2], (true, Event::GatewayDied { pid, .. }) if *pid == second));
    assert!(matches!(
        &events[3],
        (false, Event::GatewayRestarted { .. })
    ));
    // Mirrored to the audit trail.
    let (trail, _) = store
        .audit()
        .read(&corral_service::audit::AuditFilter::default())
        .unwrap();
    assert_eq!(
        trail
            .iter()
            .filter(|l| format!("{:?}", l.entry).contains("GatewayDied"))
            .count(),
        2
    );

    // A gateway corral stops is not the supervisor's to restart. Corral
    // stops gateways only under the host lock (apply, teardown), as here.
    {
        let _lock = lab.service().store().lock().unwrap();
        lab.gateway().stop().unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(lab.gateway().status(), GatewayStatus::Stopped);
    assert_eq!(gateway_events(&store).len(), 4);

    rt.block_on(handle.stop());
}
