//! corrald's watchdog: every running profiled sandbox its store knows
//! (created or verified through it) is verified again every
//! `reverify_interval`, whatever its last verdict, independently of exec;
//! at once when its provider reports a filter that is not alive; and at
//! once when another component asks for a scope (all sandboxes, one
//! profile's, one sandbox) through a [`WatchdogHandle`] — the kernel
//! watcher does after a change corral did not make. A failed run stops the
//! sandbox (fail closed, retried with backoff) and records what happened (a
//! `verification` event with the checks, a `stopped` event only when it
//! stopped, and an `alert` saying "stopped" or "not stopped: why").
//!
//! A sandbox with no passing verdict that runs may be one whose start is
//! being handed out right now (its own canary decides it, and a second one
//! beside it could stop it half-made), or one started behind corral's back
//! or not stopped after a failure: it is verified once it has run without a
//! passing verdict for the hand-out grace. One corral could not stop is
//! verified (and stopped) again on the next pass, without waiting.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use corral_sandbox_core::sandbox::SandboxState;
use corral_sandbox_core::verify::Timestamp;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use super::{Report, Verifier};
use crate::SandboxService;
use crate::store::Verdict;

/// Shortest time between two passes.
const MIN_TICK: Duration = Duration::from_millis(250);
/// Longest time between two passes (a dead filter is noticed this fast).
const MAX_TICK: Duration = Duration::from_secs(30);
/// How long a running sandbox may go without a passing verdict before the
/// watchdog verifies it: longer than a hand-out (the default 60 s wait for
/// readiness, then the canary).
pub const HANDOUT_GRACE: Duration = Duration::from_secs(120);

/// Which sandboxes a nudge asks to re-verify.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "scope", content = "name", rename_all = "snake_case")]
pub enum Scope {
    /// Every running profiled sandbox.
    All,
    /// The running sandboxes of one profile.
    Profile(String),
    /// One sandbox.
    Sandbox(String),
}

impl Scope {
    /// True when the sandbox `name` on `profile` is in this scope.
    pub fn covers(&self, name: &str, profile: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Profile(p) => p == profile,
            Scope::Sandbox(s) => s == name,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scope::All => f.write_str("every sandbox"),
            Scope::Profile(p) => write!(f, "the sandboxes of profile `{p}`"),
            Scope::Sandbox(s) => write!(f, "sandbox `{s}`"),
        }
    }
}

/// One request to re-verify a scope now.
#[derive(Debug)]
struct Nudge {
    scope: Scope,
    reply: Option<oneshot::Sender<Vec<Watched>>>,
}

/// The watchdog's loop has ended (or never ran): nothing was re-verified.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the watchdog is not running (corrald is shutting down, or its watchdog was never started); nothing was re-verified — run `corral verify NAME`"
)]
pub struct WatchdogGone;

/// A cloneable way for another component (the kernel watcher) to ask the
/// watchdog for an immediate re-verification. Nudges that arrive while a
/// pass runs are served together by the next pass, at once.
#[derive(Debug, Clone)]
pub struct WatchdogHandle {
    tx: mpsc::UnboundedSender<Nudge>,
}

impl WatchdogHandle {
    /// Ask for `scope` to be re-verified now, without waiting for it.
    pub fn nudge(&self, scope: Scope) -> Result<(), WatchdogGone> {
        self.tx
            .send(Nudge { scope, reply: None })
            .map_err(|_| WatchdogGone)
    }

    /// Ask for `scope` to be re-verified now and wait for the pass that
    /// served it: what it did to each sandbox in the scope (empty when
    /// none of them was running, profiled and known to this store).
    pub async fn reverify(&self, scope: Scope) -> Result<Vec<Watched>, WatchdogGone> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Nudge {
                scope,
                reply: Some(reply),
            })
            .map_err(|_| WatchdogGone)?;
        answer.await.map_err(|_| WatchdogGone)
    }
}

/// What one pass did to one sandbox.
#[derive(Debug, Clone, Serialize)]
pub struct Watched {
    /// The sandbox.
    pub sandbox: String,
    /// Its profile.
    pub profile: String,
    /// Why it was verified now.
    pub why: String,
    /// The run, when it could happen.
    pub report: Option<Report>,
    /// Why it could not, when it could not (the sandbox was stopped, or
    /// the alert says why not).
    pub error: Option<String>,
}

/// What the watchdog remembers between passes.
#[derive(Debug, Default)]
struct Memory {
    /// Running sandboxes without a passing verdict: the verdict's time
    /// they were first seen with, and when.
    unjudged: BTreeMap<String, (Option<Timestamp>, Timestamp)>,
    /// Sandboxes corral could not stop on the last pass.
    unstopped: BTreeSet<String>,
}

/// Re-verification of running profiled sandboxes.
#[derive(Debug, Clone)]
pub struct Watchdog {
    verifier: Verifier,
    service: SandboxService,
    interval: Duration,
    grace: Duration,
    tx: mpsc::UnboundedSender<Nudge>,
    // Taken by the one loop that serves nudges; dropped with it, so a
    // handle then says the watchdog is gone.
    rx: Arc<Mutex<Option<mpsc::UnboundedReceiver<Nudge>>>>,
    memory: Arc<Mutex<Memory>>,
}

impl Watchdog {
    /// Verify `service`'s sandboxes through `verifier` every `interval`.
    pub fn new(verifier: Verifier, service: SandboxService, interval: Duration) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Self {
            verifier,
            service,
            interval,
            grace: HANDOUT_GRACE,
            tx,
            rx: Arc::new(Mutex::new(Some(rx))),
            memory: Arc::default(),
        }
    }

    /// Another hand-out grace than [`HANDOUT_GRACE`] (tests and drills,
    /// where nothing else hands sandboxes out).
    pub fn with_handout_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// A handle for nudges, served by [`Watchdog::run`].
    pub fn handle(&self) -> WatchdogHandle {
        WatchdogHandle {
            tx: self.tx.clone(),
        }
    }

    /// Time between passes: a quarter of the interval, within bounds.
    pub fn tick(&self) -> Duration {
        (self.interval / 4).clamp(MIN_TICK, MAX_TICK)
    }

    fn due(&self, last: Option<Timestamp>, now: Timestamp) -> Option<String> {
        match last {
            None => Some("never verified".to_owned()),
            Some(t) if now.since(t) >= self.interval => Some(format!(
                "last verified {} s ago (interval {} s)",
                now.since(t).as_secs(),
                self.interval.as_secs()
            )),
            Some(_) => None,
        }
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Why a running sandbox without a passing verdict is verified now:
    /// once it has been seen so for the hand-out grace.
    fn unjudged_due(
        &self,
        name: &str,
        verdict: Option<Verdict>,
        last: Option<Timestamp>,
        now: Timestamp,
    ) -> Option<String> {
        let mut memory = self.memory();
        let seen = memory
            .unjudged
            .entry(name.to_owned())
            .and_modify(|(at, since)| {
                if *at != last {
                    (*at, *since) = (last, now);
                }
            })
            .or_insert((last, now))
            .1;
        let running = now.since(seen);
        (running >= self.grace).then(|| {
            format!(
                "running with {} for {} s (hand-out grace {} s)",
                verdict.map_or("no verdict".to_owned(), |v| format!(
                    "a {} verdict",
                    v.as_str()
                )),
                running.as_secs(),
                self.grace.as_secs()
            )
        })
    }

    /// One pass over every running profiled sandbox this store knows
    /// (created or verified through it), whatever its last verdict:
    /// sandboxes of another corral with another state directory on the
    /// same backend are not this one's to stop.
    pub async fn pass(&self) -> Vec<Watched> {
        self.pass_with(&[]).await
    }

    /// A pass that also verifies, at once, every sandbox in `nudged` whose
    /// last verdict passed.
    async fn pass_with(&self, nudged: &[Scope]) -> Vec<Watched> {
        let list = match self.service.list().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "watchdog: cannot list sandboxes");
                return Vec::new();
            }
        };
        let known: BTreeMap<String, crate::store::SandboxRecord> =
            match self.verifier.store().sandboxes() {
                Ok(records) => records.into_iter().map(|r| (r.name.clone(), r)).collect(),
                Err(e) => {
                    tracing::error!(error = %e, "watchdog: cannot read the store");
                    return Vec::new();
                }
            };
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for info in list {
            let Some(profile) = info.profile.as_ref().map(ToString::to_string) else {
                continue;
            };
            let name = info.name.to_string();
            let Some(record) = known.get(&name) else {
                continue;
            };
            if info.state != SandboxState::Running {
                continue;
            }
            seen.insert(name.clone());
            let Ok(sandbox) = self.service.open(&name).await else {
                continue;
            };
            let now = self.verifier.clock().now();
            let why = if self.memory().unstopped.contains(&name) {
                Some("corral could not stop it on the last pass".to_owned())
            } else if record.verdict == Some(Verdict::Passed) {
                let health = sandbox.filter_health().await;
                match &health {
                    Ok(Some(h)) if !h.is_alive() => Some(format!("its filter is {h}")),
                    Err(e) => Some(format!("its filter health is unknown ({e})")),
                    _ => nudged
                        .iter()
                        .find(|s| s.covers(&name, &profile))
                        .map(|s| format!("asked to re-verify {s}"))
                        .or_else(|| self.due(record.last_verified, now)),
                }
            } else {
                self.unjudged_due(&name, record.verdict, record.last_verified, now)
            };
            let Some(why) = why else { continue };
            tracing::info!(sandbox = %name, "watchdog: verifying ({why})");
            let watched = self.verify(sandbox.as_ref(), name, profile, why).await;
            out.push(watched);
        }
        let mut memory = self.memory();
        memory.unjudged.retain(|n, _| seen.contains(n));
        memory.unstopped.retain(|n| seen.contains(n));
        out.retain(|w| w.report.is_some() || w.error.is_some());
        out
    }

    /// Verify one sandbox; a failure, or a run that could not happen,
    /// stops it (retried) and says whether it stopped.
    async fn verify(
        &self,
        sandbox: &dyn corral_sandbox_core::sandbox::Sandbox,
        name: String,
        profile: String,
        why: String,
    ) -> Watched {
        let (report, error, stopped) = match self.verifier.verify(sandbox).await {
            Ok(mut report) => {
                let stopped = if report.passed {
                    None
                } else {
                    let outcome = self.verifier.stop_failed(sandbox, &report).await;
                    report.action = Some(outcome.action());
                    Some(outcome.stopped())
                };
                (Some(report), None, stopped)
            }
            // It stopped meanwhile: nothing to verify, nothing to report.
            Err(super::VerifyError::NotRunning { .. }) => (None, None, None),
            Err(e) => {
                // Could not verify: fail closed all the same.
                let error = crate::error::chain(&e);
                let outcome = self.verifier.stop_retrying(sandbox, &name).await;
                self.verifier.record_now(&crate::hooks::Event::Alert {
                    name: name.clone(),
                    reason: format!(
                        "re-verification could not run ({error}); {}",
                        outcome.done()
                    ),
                });
                let error = format!("{error}; {}", outcome.action());
                (None, Some(error), Some(outcome.stopped()))
            }
        };
        let mut memory = self.memory();
        match stopped {
            Some(false) => memory.unstopped.insert(name.clone()),
            _ => memory.unstopped.remove(&name),
        };
        Watched {
            sandbox: name,
            profile,
            why,
            report,
            error,
        }
    }

    /// Passes every tick, and at once for each batch of nudges, until the
    /// task is dropped.
    pub async fn run(self) {
        let taken = self
            .rx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        let Some(mut rx) = taken else {
            tracing::error!("watchdog: another loop serves the nudges; this one only ticks");
            loop {
                tokio::time::sleep(self.tick()).await;
                self.pass().await;
            }
        };
        let tick = self.tick();
        loop {
            let mut nudges = Vec::new();
            tokio::select! {
                () = tokio::time::sleep(tick) => {}
                Some(nudge) = rx.recv() => nudges.push(nudge),
            }
            while let Ok(nudge) = rx.try_recv() {
                nudges.push(nudge);
            }
            let scopes: Vec<Scope> = nudges.iter().map(|n| n.scope.clone()).collect();
            if !scopes.is_empty() {
                tracing::info!(?scopes, "watchdog: asked to re-verify");
            }
            let watched = self.pass_with(&scopes).await;
            for nudge in nudges {
                if let Some(reply) = nudge.reply {
                    let mine = watched
                        .iter()
                        .filter(|w| nudge.scope.covers(&w.sandbox, &w.profile))
                        .cloned()
                        .collect();
                    let _ = reply.send(mine);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watchdog(interval: Duration) -> Watchdog {
        let settings = std::sync::Arc::new(crate::Settings {
            config: corral_sandbox_core::Config::builtin_default(),
            origin: crate::Origin::Builtin,
            netns: None,
            state_dir: "/nonexistent".into(),
        });
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(crate::Store::open(dir.path()).unwrap());
        let backend = std::sync::Arc::new(
            crate::Backend::select(
                "linux",
                corral_sandbox_core::SandboxKind::Incus,
                &settings.config.host,
                "/nonexistent.sock".into(),
            )
            .unwrap(),
        );
        let verifier = Verifier::new(
            std::sync::Arc::clone(&settings),
            store,
            std::sync::Arc::new(crate::WallClock),
        );
        let service = SandboxService::new(settings, backend)
            .without_canary("the watchdog runs its own verifier");
        Watchdog::new(verifier, service, interval)
    }

    #[test]
    fn due_after_the_interval_or_never_verified() {
        let w = watchdog(Duration::from_secs(60));
        assert_eq!(w.tick(), Duration::from_secs(15));
        let now = Timestamp(100_000);
        assert!(w.due(None, now).is_some());
        assert!(w.due(Some(Timestamp(50_000)), now).is_none());
        assert!(w.due(Some(Timestamp(40_000)), now).is_some());
    }

    #[test]
    fn an_unjudged_sandbox_is_due_after_the_grace_a_new_verdict_restarts_it() {
        let w = watchdog(Duration::from_secs(300)).with_handout_grace(Duration::from_secs(120));
        let failed = Some(Verdict::Failed);
        let at = Some(Timestamp(1_000));
        assert!(w.unjudged_due("a", failed, at, Timestamp(10_000)).is_none());
        assert!(
            w.unjudged_due("a", failed, at, Timestamp(129_999))
                .is_none()
        );
        let why = w.unjudged_due("a", failed, at, Timestamp(130_000)).unwrap();
        assert!(why.contains("a failed verdict for 120 s"), "{why}");
        // A fresh verdict (another run) starts the grace again.
        let later = Some(Timestamp(131_000));
        assert!(
            w.unjudged_due("a", failed, later, Timestamp(131_000))
                .is_none()
        );
        let why = w.unjudged_due("b", None, None, Timestamp(0));
        assert!(why.is_none());
        let w0 = watchdog(Duration::from_secs(300)).with_handout_grace(Duration::ZERO);
        let why = w0.unjudged_due("b", None, None, Timestamp(0)).unwrap();
        assert!(why.contains("no verdict"), "{why}");
    }

    #[test]
    fn scopes_cover_what_they_name() {
        assert!(Scope::All.covers("a", "p"));
        assert!(Scope::Profile("p".into()).covers("a", "p"));
        assert!(!Scope::Profile("q".into()).covers("a", "p"));
        assert!(Scope::Sandbox("a".into()).covers("a", "p"));
        assert!(!Scope::Sandbox("b".into()).covers("a", "p"));
    }

    #[tokio::test]
    async fn a_handle_says_when_no_loop_serves_it() {
        let w = watchdog(Duration::from_secs(300));
        let handle = w.handle();
        assert!(handle.nudge(Scope::All).is_ok());
        // The loop's end drops the receiver with it.
        let task = tokio::spawn(w.run());
        task.abort();
        let _ = task.await;
        assert!(handle.nudge(Scope::All).is_err());
        assert!(handle.reverify(Scope::All).await.is_err());
    }
}
