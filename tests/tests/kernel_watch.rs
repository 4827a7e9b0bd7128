//! The kernel watch against the real kernel: corral's enforcement applied
//! in an anonymous network namespace (the drill's packet lab: sandboxes on
//! a profile bridge, an "internet" that answers), then changed behind
//! corral's back with `nft` (the tamperer; test-only). Each guarantee is
//! shown with a real probe from the sandbox, and its control shows the
//! change mattered before the watch put it right.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corral_drill::lab::topology::PUBLIC_V4;
use corral_drill::lab::{Observed, Probe};
use corral_egress::host::HostDrift;
use corral_egress::link::Links;
use corral_sandbox_core::{WatchConfig, WatchReaction};
use corral_service::host::applied;
use corral_service::store::EventQuery;
use corral_service::watch::{Check, NoSandboxes, Outcome, StopHandle, Watcher};
use corral_service::{Event, Store};

const PROBE: Duration = Duration::from_millis(1500);

#[path = "common/recorded_lab.rs"]
mod recorded_lab;

use recorded_lab::{ALLOWED, RecordedLab as WatchLab};

impl WatchLab {
    /// The lab with corral's plan applied and recorded as `corral host
    /// apply` records it, reading back clean.
    fn clean() -> Self {
        let me = Self::new("wat", "10.232.9.0/24");
        assert_eq!(me.drift(), Vec::<HostDrift>::new());
        me
    }

    fn drift(&self) -> Vec<HostDrift> {
        let s = self.service();
        s.verify(&applied(&s.store()).unwrap().unwrap()).unwrap()
    }

    fn probe(&self, ip: IpAddr, port: u16) -> Observed {
        let p = Probe::Tcp {
            to: SocketAddr::new(ip, port),
        };
        self.lab.probe(self.lab.sandbox("wat"), &p, PROBE).observed
    }

    fn unlisted(&self) -> Observed {
        self.probe(IpAddr::V4(PUBLIC_V4[0]), 443)
    }

    fn allowed(&self) -> Observed {
        self.probe(ALLOWED.0, ALLOWED.1)
    }

    fn nft(&self, args: &[&str]) -> String {
        let mut cmd = std::process::Command::new("nft");
        cmd.args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let out = self
            .lab
            .topo
            .host
            .spawn(cmd)
            .and_then(|c| c.wait_with_output())
            .unwrap();
        assert!(
            out.status.success(),
            "nft {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The watch on its own thread; every read-back comes out of the
    /// receiver. Returns once the first (start) read-back is done.
    fn watch(&self, config: WatchConfig) -> Running {
        let watcher = Watcher::new(self.service(), Arc::new(NoSandboxes))
            .unwrap()
            .with_config(config);
        let stop = watcher.stop_handle();
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            watcher
                .run(|c| {
                    let _ = tx.send(c.clone());
                })
                .unwrap();
        });
        let mut running = Running {
            stop,
            rx,
            thread: Some(thread),
            start: None,
        };
        running.start = Some(running.next().expect("the start read-back"));
        running
    }

    fn host_drift_events(&self) -> Vec<Event> {
        Store::open(self.state.path())
            .unwrap()
            .events(&EventQuery::default())
            .unwrap()
            .into_iter()
            .map(|e| e.event)
            .filter(|e| matches!(e, Event::HostDrift { .. }))
            .collect()
    }
}

impl Drop for WatchLab {
    fn drop(&mut self) {
        let _ = self.service().teardown();
    }
}

struct Running {
    stop: StopHandle,
    rx: Receiver<Check>,
    thread: Option<JoinHandle<()>>,
    start: Option<Check>,
}

impl Running {
    fn next(&self) -> Option<Check> {
        self.rx.recv_timeout(Duration::from_secs(10)).ok()
    }

    /// Every read-back within `within`.
    fn all(&self, within: Duration) -> Vec<Check> {
        let end = Instant::now() + within;
        let mut out = Vec::new();
        while let Ok(c) = self
            .rx
            .recv_timeout(end.saturating_duration_since(Instant::now()))
        {
            out.push(c);
        }
        out
    }

    /// Read-backs until one that is not clean (or `within` passes).
    fn until_reaction(&self, within: Duration) -> Option<Check> {
        let end = Instant::now() + within;
        while Instant::now() < end {
            match self
                .rx
                .recv_timeout(end.saturating_duration_since(Instant::now()))
            {
                Ok(c) if !matches!(c.outcome, Outcome::Clean { .. }) => return Some(c),
                Ok(_) => {}
                Err(_) => return None,
            }
        }
        None
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn heal() -> WatchConfig {
    WatchConfig::default()
}

#[test]
fn a_deleted_table_is_healed_and_the_blocked_probe_is_blocked_again() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let w = WatchLab::clean();
    assert!(w.unlisted().blocked(), "enforced after apply");
    w.nft(&["delete", "table", "inet", "corral"]);
    // Control: with the table gone and no watch, the probe gets through.
    assert_eq!(w.unlisted(), Observed::Connected, "control");

    // The watch's first read-back finds it and heals.
    let running = w.watch(heal());
    let start = running.start.as_ref().unwrap();
    assert!(
        matches!(&start.outcome, Outcome::Healed { drift, .. } if !drift.is_empty()),
        "{start:?}"
    );
    assert!(w.unlisted().blocked(), "blocked again after the heal");
    assert_eq!(w.drift(), Vec::<HostDrift>::new());

    // Under the running watch: deleted again, healed again, from the
    // kernel's notification (not the 30 s interval).
    let t = Instant::now();
    w.nft(&["delete", "table", "inet", "corral"]);
    let c = running
        .until_reaction(Duration::from_secs(5))
        .expect("a reaction");
    assert!(matches!(c.outcome, Outcome::Healed { .. }), "{c:?}");
    assert!(
        matches!(&c.trigger, corral_service::watch::Trigger::Kernel(_)),
        "{c:?}"
    );
    println!("deleted table → healed in {} ms", t.elapsed().as_millis());
    assert!(w.unlisted().blocked());
    assert_eq!(w.allowed(), Observed::Connected, "the allowlist works");
    let events = w.host_drift_events();
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| matches!(e, Event::HostDrift { reaction, .. } if reaction == "healed"))
    );
}

#[test]
fn a_deleted_rule_and_a_flushed_set_are_healed() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let w = WatchLab::clean();
    let planned = applied(&w.service().store()).unwrap().unwrap();
    let allow = planned
        .plan
        .inet
        .sets
        .iter()
        .find(|s| s.name.starts_with("wat-allow4"))
        .unwrap()
        .name
        .clone();
    assert_eq!(w.allowed(), Observed::Connected);
    // Control: a flushed allow set matters (the allowed host is cut off).
    w.nft(&["flush", "set", "inet", "corral", &allow]);
    assert!(w.allowed().blocked(), "control: the flush mattered");
    let running = w.watch(heal());
    assert!(matches!(
        running.start.as_ref().unwrap().outcome,
        Outcome::Healed { .. }
    ));
    assert_eq!(w.allowed(), Observed::Connected, "the set is back");

    w.nft(&["flush", "set", "inet", "corral", &allow]);
    let c = running
        .until_reaction(Duration::from_secs(5))
        .expect("a reaction");
    assert!(matches!(c.outcome, Outcome::Healed { .. }), "{c:?}");
    assert_eq!(w.allowed(), Observed::Connected);

    // One rule deleted: the first rule of the first non-base chain.
    let listing = w.nft(&["-a", "list", "table", "inet", "corral"]);
    let (chain, handle) = first_rule(&listing);
    w.nft(&[
        "delete", "rule", "inet", "corral", &chain, "handle", &handle,
    ]);
    let c = running
        .until_reaction(Duration::from_secs(5))
        .expect("a reaction");
    assert!(
        matches!(&c.outcome, Outcome::Healed { drift, .. } if drift.iter().any(|d| d.contains(&chain))),
        "{c:?}"
    );
    assert_eq!(w.drift(), Vec::<HostDrift>::new());
    assert!(w.unlisted().blocked());
}

#[test]
fn corrals_own_apply_and_a_learned_element_are_not_tampering() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let w = WatchLab::clean();
    let running = w.watch(heal());
    assert!(matches!(
        running.start.as_ref().unwrap().outcome,
        Outcome::Clean { .. }
    ));
    // corral's own apply: it holds the host lock for its whole run, so the
    // read-back its notifications trigger waits and finds the host clean.
    let planned = applied(&w.service().store()).unwrap().unwrap();
    w.service().apply(&planned).unwrap();
    // What dnsmasq does: add a learned element.
    let learned = planned.plan.dns_feeds.keys().next().unwrap().clone();
    w.nft(&[
        "add",
        "element",
        "inet",
        "corral",
        &learned,
        "{ 198.51.100.20 }",
    ]);
    let checks = running.all(Duration::from_secs(2));
    assert!(
        checks
            .iter()
            .all(|c| matches!(c.outcome, Outcome::Clean { .. })),
        "no reaction to corral's apply or to learning: {checks:?}"
    );
    // The watch did hear the apply (it read back, and found it clean).
    assert!(
        checks
            .iter()
            .any(|c| matches!(c.trigger, corral_service::watch::Trigger::Kernel(_))),
        "{checks:?}"
    );
    assert_eq!(w.host_drift_events(), vec![]);

    // Control: the same watch reacts to a change corral did not make.
    w.nft(&["delete", "table", "inet", "corral"]);
    let c = running
        .until_reaction(Duration::from_secs(5))
        .expect("a reaction");
    assert!(matches!(c.outcome, Outcome::Healed { .. }), "{c:?}");
    assert_eq!(w.host_drift_events().len(), 1);
}

#[test]
fn cut_sets_the_port_down_and_traffic_stops() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let w = WatchLab::clean();
    let running = w.watch(WatchConfig {
        reaction: WatchReaction::Cut,
        ..WatchConfig::default()
    });
    let port = w.lab.sandbox("wat").port.clone();
    assert_eq!(
        w.allowed(),
        Observed::Connected,
        "control: the port forwards"
    );
    assert!(port_up(&w, &port), "control: the port is up");

    w.nft(&["delete", "table", "inet", "corral"]);
    let c = running
        .until_reaction(Duration::from_secs(5))
        .expect("a reaction");
    match &c.outcome {
        Outcome::Cut {
            heal_error, ports, ..
        } => {
            assert_eq!(heal_error, &None);
            assert!(
                ports.iter().any(|p| p.port == port && p.error.is_none()),
                "{ports:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(!port_up(&w, &port), "the port is down");
    // With no table at all, nothing gets through either way.
    assert!(w.unlisted().blocked(), "{:?}", w.unlisted());
    assert!(w.allowed().blocked(), "{:?}", w.allowed());
    let events = w.host_drift_events();
    assert!(
        matches!(events.as_slice(), [Event::HostDrift { reaction, .. }] if reaction == "cut"),
        "{events:?}"
    );
    // The same drift again (the next interval or event): no new alert.
    w.nft(&["add", "table", "inet", "scratch"]);
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(w.host_drift_events().len(), 1);
}

fn port_up(w: &WatchLab, port: &str) -> bool {
    let port = port.to_owned();
    w.lab
        .topo
        .host
        .run_async(|| async move { Links::connect()?.require(&port).await })
        .unwrap()
        .unwrap()
        .up
}

/// The chain and handle of the first rule in an `nft -a list` listing.
fn first_rule(listing: &str) -> (String, String) {
    let mut chain = None;
    for line in listing.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("chain ") {
            chain = rest.split_whitespace().next().map(str::to_owned);
        } else if let (Some(c), Some((_, h))) = (&chain, t.rsplit_once("# handle "))
            && !t.starts_with("type ")
            && !t.starts_with("set ")
        {
            return (c.clone(), h.trim().to_owned());
        }
    }
    panic!("no rule in {listing}");
}
