//! The kernel watch: corral's enforcement held between applies, not only
//! checked at them (docs/security.md#watched).
//!
//! One loop waits on two kernel notification sockets in the target
//! namespace — nftables changes to corral's tables
//! ([`NftWatch`](corral_egress::nft::NftWatch)) and link, address and
//! static-neighbour changes of corral's bridges and ports
//! ([`BridgeWatch`](corral_egress::link::BridgeWatch)) — and on a slow
//! safety interval. A burst of events is coalesced (`settle`), then the
//! loop takes the state directory's host lock, so an apply, refresh or
//! teardown in progress (which holds it for its whole run) finishes first
//! and is never taken for tampering, and reads the host back against what
//! was last applied. Drift a re-apply puts right gets the configured
//! reaction ([`WatchReaction`]):
//!
//! - `heal`: the recorded plan applied again as apply does (one nftables
//!   transaction, learned elements kept, bridges, ports, read-back), a
//!   second read-back, then the affected sandboxes re-verified
//!   ([`Affected::reverify`]); if the heal fails or the host still
//!   differs, cut;
//! - `cut`: every port of the affected profiles' bridges set down at once
//!   (a port that is down forwards nothing, whatever the rules), then the
//!   profiles' running sandboxes stopped ([`Affected::stop`]), each with an
//!   alert.
//!
//! Each detection is a `host_drift` alert in the event log and audit trail;
//! each sandbox cut off an `alert` of its own.

mod react;
mod sandboxes;
mod scope;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corral_egress::host::{HostDrift, StateError};
use corral_egress::link::{BridgeEvent, BridgeWatch};
use corral_egress::nft::{NftEvent, NftObject, NftWatch};
use corral_sandbox_core::verify::Clock as _;
use corral_sandbox_core::{WatchConfig, WatchReaction};

pub use react::CutPort;
pub use sandboxes::{Affected, NoSandboxes, Reverify, ServiceSandboxes, Stopped};
pub use scope::{affected, reacts_to};

use crate::hooks::Event;
use crate::host::{HostService, PlanningError, applied};
use crate::store::Store;

/// Read-backs tried again when one fails part-way (see `check`).
const READ_BACK_TRIES: u32 = 3;
/// The pause before trying a failed read-back again.
const READ_BACK_PAUSE: Duration = Duration::from_millis(20);

/// How often the listening threads look at the stop flag.
const POLL: Duration = Duration::from_millis(200);
/// A burst is cut short after this long, so a storm of events cannot hold
/// the read-back off.
const MAX_SETTLE: Duration = Duration::from_millis(250);
/// Drift lines kept in an event.
const DRIFT_LINES: usize = 8;

/// The watch could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// A notification socket could not be opened in the target namespace.
    #[error(
        "cannot subscribe to the kernel's {what} notifications in the target namespace; corral needs root (CAP_NET_ADMIN)"
    )]
    Subscribe {
        /// `nftables` or `link`.
        what: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The namespace could not be duplicated for the listening threads.
    #[error("cannot hand the target namespace to the watch's threads")]
    Namespace(#[source] std::io::Error),
    /// The store could not be opened.
    #[error("opening the event store")]
    Store(#[source] crate::store::StoreError),
}

/// Why a read-back ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// The loop's first read-back.
    Start,
    /// The kernel reported a change (the first of the burst).
    Kernel(String),
    /// The safety interval passed without any event.
    Interval,
}

impl std::fmt::Display for Trigger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Trigger::Start => f.write_str("start"),
            Trigger::Kernel(e) => write!(f, "kernel: {e}"),
            Trigger::Interval => f.write_str("interval"),
        }
    }
}

/// What one read-back found and what was done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing applied here yet: nothing to hold.
    NothingApplied,
    /// The host matches what was applied.
    Clean {
        /// Drift not reacted to (the host's own networks, stray-source
        /// counters): `corral host verify` shows it.
        ignored: usize,
    },
    /// Drift, healed: the host matches the plan again.
    Healed {
        /// The profiles in scope.
        profiles: Vec<String>,
        /// The drift found.
        drift: Vec<String>,
        /// From the read-back that found it to the clean read-back, ms.
        ms: u64,
    },
    /// Drift, cut: the profiles' ports are down and their sandboxes
    /// stopped (or not: see `stopped`).
    Cut {
        /// The profiles in scope.
        profiles: Vec<String>,
        /// The drift found.
        drift: Vec<String>,
        /// Why the heal did not do (`None` when `cut` is the reaction).
        heal_error: Option<String>,
        /// Each port set down.
        ports: Vec<CutPort>,
        /// Each sandbox stopped.
        stopped: Vec<Stopped>,
        /// From the read-back that found it to the ports down, ms.
        ms: u64,
    },
    /// The same drift as the last cut: the ports are set down again, no
    /// new alert (an operator's `corral host apply` ends it).
    StillCut {
        /// The profiles in scope.
        profiles: Vec<String>,
    },
    /// The read-back itself failed (retried at the next event or
    /// interval).
    Failed(String),
}

/// One read-back of the loop: when, why, what.
#[derive(Debug, Clone)]
pub struct Check {
    /// Why it ran.
    pub trigger: Trigger,
    /// Kernel events coalesced into it.
    pub events: usize,
    /// What it found and did.
    pub outcome: Outcome,
}

/// Stops a running [`Watcher::run`] from another thread.
#[derive(Debug, Clone)]
pub struct StopHandle {
    flag: Arc<AtomicBool>,
    kick: Sender<Kick>,
}

impl StopHandle {
    /// Ask the loop to stop; it returns within a fraction of a second.
    pub fn stop(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let _ = self.kick.send(Kick::Stop);
    }
}

enum Kick {
    Nft(NftEvent),
    Bridge(BridgeEvent),
    Failed(&'static str, std::io::Error),
    Stop,
}

/// What the listening threads must know of the plan in force: the bridges
/// to watch and the learned sets to ignore. Bumped after every read-back.
#[derive(Debug, Default)]
struct Scope {
    generation: u64,
    bridges: Vec<String>,
    learned: HashSet<String>,
}

/// The kernel watch of one target and state directory.
#[derive(Debug)]
pub struct Watcher {
    host: HostService,
    store: Store,
    sandboxes: Arc<dyn Affected>,
    config: Option<WatchConfig>,
    /// The drift of the last cut, while it lasts.
    cut: Mutex<Option<Vec<String>>>,
    flag: Arc<AtomicBool>,
    tx: Sender<Kick>,
    rx: Receiver<Kick>,
}

impl Watcher {
    /// Watches `host`'s target against what was applied in its state
    /// directory, recording in that directory's store.
    pub fn new(host: HostService, sandboxes: Arc<dyn Affected>) -> Result<Self, WatchError> {
        let store = Store::open(host.state_dir()).map_err(WatchError::Store)?;
        let (tx, rx) = mpsc::channel();
        Ok(Self {
            host,
            store,
            sandboxes,
            config: None,
            cut: Mutex::new(None),
            flag: Arc::new(AtomicBool::new(false)),
            tx,
            rx,
        })
    }

    /// Use `config` instead of the `[host.watch]` of what was applied
    /// (front-ends' overrides, tests).
    pub fn with_config(mut self, config: WatchConfig) -> Self {
        self.config = Some(config);
        self
    }

    /// A handle that stops [`Watcher::run`].
    pub fn stop_handle(&self) -> StopHandle {
        StopHandle {
            flag: self.flag.clone(),
            kick: self.tx.clone(),
        }
    }

    /// Runs until stopped, handing every read-back to `report` (a clean
    /// one included). Fails only when the kernel cannot be listened to.
    pub fn run(&self, mut report: impl FnMut(&Check)) -> Result<(), WatchError> {
        let ns = self.host.target().host.netns();
        let scope = Arc::new(Mutex::new(Scope::default()));
        // Both sockets are open before the first read-back, so nothing
        // between that read-back and the listening goes unheard.
        let nft = NftWatch::open(ns).map_err(|source| WatchError::Subscribe {
            what: "nftables",
            source,
        })?;
        let bridges = BridgeWatch::open(ns, &[]).map_err(|source| WatchError::Subscribe {
            what: "link",
            source,
        })?;
        let threads = [
            self.spawn_nft(nft, scope.clone()),
            self.spawn_bridges(bridges, scope.clone()),
        ];
        let mut trigger = Trigger::Start;
        let mut events = 0;
        loop {
            let outcome = self.check(&scope);
            report(&Check {
                trigger: trigger.clone(),
                events,
                outcome,
            });
            let interval = self.interval();
            let first = match self.rx.recv_timeout(interval) {
                Ok(k) => k,
                Err(RecvTimeoutError::Timeout) => {
                    trigger = Trigger::Interval;
                    events = 0;
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            match self.burst(first) {
                Some((t, n)) => {
                    trigger = t;
                    events = n;
                }
                None => break,
            }
        }
        self.flag.store(true, Ordering::SeqCst);
        for t in threads {
            let _ = t.join();
        }
        Ok(())
    }

    /// Takes the rest of a burst: events until `settle` passes quietly (at
    /// most [`MAX_SETTLE`]); `None` when told to stop.
    fn burst(&self, first: Kick) -> Option<(Trigger, usize)> {
        let trigger = match first {
            Kick::Stop => return None,
            k => Trigger::Kernel(describe(&k)),
        };
        let settle = self.settle();
        let end = Instant::now() + MAX_SETTLE;
        let mut n = 1;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match self.rx.recv_timeout(settle.min(left)) {
                Ok(Kick::Stop) => return None,
                Ok(_) => n += 1,
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
        Some((trigger, n))
    }

    fn settle(&self) -> Duration {
        self.config.unwrap_or_default().settle
    }

    fn interval(&self) -> Duration {
        self.config.unwrap_or_default().interval
    }

    fn spawn_nft(&self, mut watch: NftWatch, scope: Arc<Mutex<Scope>>) -> JoinHandle<()> {
        let (flag, tx) = (self.flag.clone(), self.tx.clone());
        std::thread::spawn(move || {
            let mut seen = u64::MAX;
            while !flag.load(Ordering::SeqCst) {
                if let Ok(s) = scope.lock()
                    && s.generation != seen
                {
                    watch.ignore_elements_of(s.learned.iter().cloned());
                    seen = s.generation;
                }
                match watch.next(POLL) {
                    Ok(Some(e)) => {
                        let _ = tx.send(Kick::Nft(e));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        let _ = tx.send(Kick::Failed("nftables", e));
                        std::thread::sleep(POLL);
                    }
                }
            }
        })
    }

    fn spawn_bridges(&self, mut watch: BridgeWatch, scope: Arc<Mutex<Scope>>) -> JoinHandle<()> {
        let (flag, tx) = (self.flag.clone(), self.tx.clone());
        std::thread::spawn(move || {
            let mut seen = u64::MAX;
            while !flag.load(Ordering::SeqCst) {
                let bridges = match scope.lock() {
                    Ok(s) if s.generation != seen => {
                        seen = s.generation;
                        Some(s.bridges.clone())
                    }
                    _ => None,
                };
                if let Some(b) = bridges
                    && let Err(e) = watch.watch(&b)
                {
                    let _ = tx.send(Kick::Failed("link", e));
                }
                match watch.next(POLL) {
                    Ok(Some(e)) => {
                        let _ = tx.send(Kick::Bridge(e));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        let _ = tx.send(Kick::Failed("link", e));
                        std::thread::sleep(POLL);
                    }
                }
            }
        })
    }

    /// One read-back under the host lock, and the reaction to what it
    /// finds.
    fn check(&self, scope: &Mutex<Scope>) -> Outcome {
        let store = self.host.store();
        let _lock = match store.lock() {
            Ok(l) => l,
            Err(e) => return Outcome::Failed(format!("cannot take the host lock: {e}")),
        };
        let planned = match applied(&store) {
            Ok(Some(p)) => p,
            Ok(None) => return Outcome::NothingApplied,
            Err(e) => return Outcome::Failed(read_error(&e)),
        };
        if let Ok(mut s) = scope.lock() {
            s.generation += 1;
            s.bridges = planned
                .plan
                .bridges
                .iter()
                .map(|b| b.name.to_string())
                .collect();
            s.learned = planned.plan.dns_feeds.keys().cloned().collect();
        }
        let started = Instant::now();
        // A dump that races the change being read (a table deleted while
        // its sets are listed) fails with ENOENT: read again, a few times,
        // before calling the read-back failed.
        let mut tries = 0;
        let all = loop {
            match self.host.verify(&planned) {
                Ok(d) => break d,
                Err(_) if tries < READ_BACK_TRIES => {
                    tries += 1;
                    std::thread::sleep(READ_BACK_PAUSE);
                }
                Err(e) => {
                    return Outcome::Failed(format!(
                        "reading the host back failed: {}",
                        crate::error::chain(&e)
                    ));
                }
            }
        };
        let acted: Vec<&HostDrift> = all.iter().filter(|d| reacts_to(d)).collect();
        if acted.is_empty() {
            if let Ok(mut c) = self.cut.lock() {
                *c = None;
            }
            return Outcome::Clean { ignored: all.len() };
        }
        let profiles = affected(&planned.plan, &acted);
        let drift: Vec<String> = acted
            .iter()
            .take(DRIFT_LINES)
            .map(ToString::to_string)
            .collect();
        let reaction = self
            .config
            .map_or(planned.config.host.watch.reaction, |c| c.reaction);
        let target = &self.host.target().host;
        if self.cut.lock().is_ok_and(|c| c.as_ref() == Some(&drift)) {
            // Ports a provider set up again go down again.
            react::cut(target, &planned.plan, &profiles);
            return Outcome::StillCut { profiles };
        }
        let heal_error = match reaction {
            WatchReaction::Heal => match react::heal(target, &planned.plan) {
                Ok(()) => {
                    let ms = react::ms_since(started);
                    self.record(&Event::HostDrift {
                        profiles: profiles.clone(),
                        drift: drift.clone(),
                        reaction: "healed".to_owned(),
                        ms,
                    });
                    self.sandboxes.reverify(&profiles);
                    return Outcome::Healed {
                        profiles,
                        drift,
                        ms,
                    };
                }
                Err(e) => Some(e),
            },
            WatchReaction::Cut => None,
        };
        let ports = react::cut(target, &planned.plan, &profiles);
        let ms = react::ms_since(started);
        if let Ok(mut c) = self.cut.lock() {
            *c = Some(drift.clone());
        }
        self.record(&Event::HostDrift {
            profiles: profiles.clone(),
            drift: drift.clone(),
            reaction: match &heal_error {
                Some(e) => format!("heal failed ({e}), cut"),
                None => "cut".to_owned(),
            },
            ms,
        });
        let stopped = self.sandboxes.stop(&profiles);
        for s in &stopped {
            let reason = match &s.error {
                None => format!(
                    "corral's enforcement of profile {} drifted ({}); corral cut its port and stopped it",
                    s.profile,
                    drift.first().cloned().unwrap_or_default()
                ),
                Some(e) => format!(
                    "corral's enforcement of profile {} drifted; its port is cut, but it was not stopped: {e}",
                    s.profile
                ),
            };
            self.record(&Event::Alert {
                name: s.sandbox.clone(),
                reason,
            });
        }
        Outcome::Cut {
            profiles,
            drift,
            heal_error,
            ports,
            stopped,
            ms,
        }
    }

    fn record(&self, event: &Event) {
        let now = crate::clock::WallClock.now();
        if let Err(e) = self.store.record(event, now) {
            tracing::error!(error = %e, "kernel watch: cannot record {}", event.type_name());
        }
    }
}

fn read_error(e: &PlanningError) -> String {
    match e {
        PlanningError::State(StateError::Corrupt { .. }) => {
            format!("the record of what was applied is unreadable: {e}")
        }
        e => format!("reading what was applied: {}", crate::error::chain(e)),
    }
}

fn describe(k: &Kick) -> String {
    match k {
        Kick::Nft(NftEvent::Changed(c)) => format!(
            "{} {}{} in table {} corral",
            if c.deleted { "deleted" } else { "changed" },
            match c.object {
                NftObject::Table => "table",
                NftObject::Chain => "chain",
                NftObject::Rule => "rule",
                NftObject::Set => "set",
                NftObject::Elements => "elements",
            },
            c.set
                .as_ref()
                .map(|s| format!(" of set {s}"))
                .unwrap_or_default(),
            c.family
        ),
        Kick::Nft(NftEvent::Lost) => "nftables events lost".to_owned(),
        Kick::Bridge(BridgeEvent::Link { name }) => format!("link {name}"),
        Kick::Bridge(BridgeEvent::Address { bridge }) => format!("address on {bridge}"),
        Kick::Bridge(BridgeEvent::Neighbour { bridge }) => format!("static neighbour on {bridge}"),
        Kick::Bridge(BridgeEvent::Lost) => "link events lost".to_owned(),
        Kick::Failed(what, e) => format!("{what} notifications failed: {e}"),
        Kick::Stop => "stop".to_owned(),
    }
}
