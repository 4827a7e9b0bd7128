//! The port sweeper against the real kernel: corral's profiles applied
//! (rules, bridges, gateways) inside an anonymous network namespace, then
//! NICs plugged into a profile bridge behind corral's back. A port nobody
//! bound must end up isolated and quarantined without any corral command;
//! an address whose port name a leftover link holds is not handed out.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use corral_egress::host::HostDrift;
use corral_egress::link::Links;
use corral_egress::netns::Netns;
use corral_sandbox_core::Config;
use corral_service::config::{LoadedConfig, Origin};
use corral_service::host::{HostService, applied, plan_config};
use corral_service::ports::{self, PortSweeper};
use corral_service::target::Target;

/// Tears the namespace's gateways down even when the test panics (the
/// namespace itself goes with its fd).
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

    /// Port drift about `port` in what was applied.
    fn drift_of(&self, port: &str) -> Vec<HostDrift> {
        let service = self.service();
        let planned = applied(&service.store()).unwrap().unwrap();
        service
            .verify(&planned)
            .unwrap()
            .into_iter()
            .filter(|d| matches!(d, HostDrift::Port { port: p, .. } if p == port))
            .collect()
    }

    /// A veth whose one end joins `bridge`, not isolated: what a provider
    /// (or anyone with CAP_NET_ADMIN) does behind corral's back.
    fn plug(&self, port: &str, peer: &str, bridge: &str) {
        let (port, peer, bridge) = (port.to_owned(), peer.to_owned(), bridge.to_owned());
        self.ns
            .run_async(|| async move {
                let links = Links::connect()?;
                links.create_veth(&port, &peer, None).await?;
                links.attach_port(&port, &bridge, false).await?;
                links.set_up(&port).await
            })
            .unwrap()
            .unwrap();
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Ok(t) = Target::open(Some(&self.path)) {
            let _ = HostService::new(t, self.state.path().to_owned()).teardown();
        }
    }
}

#[test]
fn a_nic_plugged_in_behind_corrals_back_is_quarantined_by_the_sweeper() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new();
    let planned = plan_config(LoadedConfig {
        config: Config::builtin_default(),
        origin: Origin::Builtin,
    })
    .unwrap();
    let bridge = planned
        .config
        .profiles
        .get("internet")
        .unwrap()
        .bridge
        .to_string();
    lab.service().apply(&planned).unwrap();

    // Control: without a sweep, a port plugged in after the apply is
    // neither isolated nor quarantined (verify says so).
    lab.plug("rogue0", "rogue0p", &bridge);
    let before = lab.drift_of("rogue0");
    assert!(
        before
            .iter()
            .any(|d| d.to_string().contains("neither bound nor quarantined")),
        "control: {before:?}"
    );
    assert!(
        before
            .iter()
            .any(|d| d.to_string().contains("not isolated")),
        "control: {before:?}"
    );

    // The sweeper's first sweep takes care of it…
    let sweeper = PortSweeper::spawn(Some(lab.path.clone()), lab.state.path().to_owned()).unwrap();
    wait_until("the first sweep quarantines rogue0", || {
        lab.drift_of("rogue0").is_empty()
    });
    let after_first = sweeper.sweeps();

    // …and a link event, not a command, takes care of the next one.
    lab.plug("rogue1", "rogue1p", &bridge);
    wait_until("the sweeper quarantines rogue1", || {
        lab.drift_of("rogue1").is_empty()
    });
    assert!(sweeper.sweeps() > after_first, "no sweep after the event");
    drop(sweeper);
}

/// Polls `done` until it holds; a correctness wait with a generous bound,
/// not a timing assertion.
fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A link left with a port's name (Incus keeps a container's host-side
/// veth when the container dies under it) would make the next create on
/// that address fail in the backend ("File exists"): the address is
/// skipped, and the link, not corral's, is left alone.
#[test]
fn an_address_whose_port_name_a_stale_link_holds_is_skipped() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new();
    let planned = plan_config(LoadedConfig {
        config: Config::builtin_default(),
        origin: Origin::Builtin,
    })
    .unwrap();
    lab.service().apply(&planned).unwrap();
    let profile = corral_sandbox_core::ProfileName::new("internet").unwrap();
    let bind = || ports::bind_new(Some(&lab.path), lab.state.path(), &profile, &[]).unwrap();
    let unbind = |b: &corral_egress::plan::PortBinding| {
        ports::unbind(Some(&lab.path), lab.state.path(), &b.nic()).unwrap();
    };

    // Control: a freed address is handed out again.
    let (first, claim) = bind();
    drop(claim);
    unbind(&first);
    let (again, claim) = bind();
    drop(claim);
    assert_eq!(
        again.port, first.port,
        "control: the same address comes back"
    );
    unbind(&again);

    // A veth of that name, both ends here (never moved into a guest).
    let (name, peer) = (first.port.to_string(), "stale0p".to_owned());
    let made = name.clone();
    lab.ns
        .run_async(|| async move { Links::connect()?.create_veth(&made, &peer, None).await })
        .unwrap()
        .unwrap();
    let (next, claim) = bind();
    drop(claim);
    assert_ne!(next.port, first.port, "the stale link's address is skipped");
    let exists = lab
        .ns
        .run_async(|| async move { Links::connect()?.get(&name).await })
        .unwrap()
        .unwrap();
    assert!(exists.is_some(), "the link is not corral's to delete");
    unbind(&next);
}
