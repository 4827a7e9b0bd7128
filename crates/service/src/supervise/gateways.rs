//! The gateway supervisor: one task per recorded gateway, asleep on a
//! pidfd of its dnsmasq (readable the moment the daemon exits, whoever
//! killed it), then:
//!
//! 1. under the host lock (apply and teardown stop and start gateways
//!    holding it, so what is seen here is their result, never their
//!    middle), the pid file is read again: a gateway corral stopped (its
//!    pid file removed) or replaced (a new pid) is not restarted;
//! 2. a `gateway_died` alert is recorded;
//! 3. after a backoff it is started again through the same start path
//!    apply uses, from the configuration and reservations apply recorded
//!    (`Gateway::restart_recorded`), never rendered anew; a failed start
//!    is retried with the delay doubling up to the cap, for as long as it
//!    takes;
//! 4. `gateway_restarted` is recorded with the attempts and the time down.
//!
//! A gateway that dies again within [`Backoff::stable`] of its restart
//! starts its next restart one step further along the backoff, so a daemon
//! that crashes on start does not spin; each death is an alert of its own.
//! While a gateway is down its profile's start gate refuses (the gate
//! checks that the gateway runs and its resolver answers).
//!
//! New gateways (an apply added a profile) are picked up by a rescan every
//! [`GatewaySupervisor::with_rescan`] interval or at once on
//! [`SupervisorHandle::rescan`].

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_egress::host::StateStore;
use corral_egress::netns::Netns;
use corral_gateway::{ExitWatch, Gateway, GatewayStatus};
use corral_sandbox_core::BridgeName;
use corral_sandbox_core::verify::Clock;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use super::SuperviseError;
use super::resolvers::Resolvers;
use crate::hooks::Event;
use crate::store::Store;
use crate::target::Target;

/// How restarts are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The delay before the first restart attempt.
    pub first: Duration,
    /// The longest delay between attempts.
    pub cap: Duration,
    /// A restarted gateway that runs at least this long resets the
    /// backoff; one that dies sooner continues it.
    pub stable: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            first: Duration::from_millis(50),
            cap: Duration::from_secs(5),
            stable: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The delay after `failures` failed or short-lived starts in a row.
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 1u32.checked_shl(failures.min(20)).unwrap_or(u32::MAX);
        self.first.saturating_mul(factor).min(self.cap)
    }
}

/// What the supervisor needs, shared by its tasks.
#[derive(Debug)]
struct Context {
    state_dir: PathBuf,
    netns: Netns,
    store: Arc<Store>,
    clock: Arc<dyn Clock + Send + Sync>,
    backoff: Backoff,
}

/// Watches and restarts every gateway recorded under one state directory.
#[derive(Debug)]
pub struct GatewaySupervisor {
    ctx: Arc<Context>,
    rescan: Duration,
}

/// A running supervisor.
#[derive(Debug)]
pub struct SupervisorHandle {
    stop: watch::Sender<bool>,
    rescan: Arc<Notify>,
    task: JoinHandle<()>,
}

impl SupervisorHandle {
    /// Look for new gateways now (call after an apply).
    pub fn rescan(&self) {
        self.rescan.notify_one();
    }

    /// Stop supervising and wait for every task to end. Gateways keep
    /// running.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

impl GatewaySupervisor {
    /// Supervise the gateways under `state_dir`, which run in the network
    /// namespace `netns` names (`None`: this process's), recording events
    /// in `store`.
    pub fn new(
        state_dir: &Path,
        netns: Option<&str>,
        store: Arc<Store>,
    ) -> Result<Self, SuperviseError> {
        let target = Target::open(netns)?;
        let netns = target.host.netns().try_clone().map_err(|e| {
            SuperviseError::Target(crate::target::TargetError::NoSuchNetns {
                name: netns.unwrap_or("/proc/self/ns/net").to_owned(),
                source: e,
            })
        })?;
        Ok(Self {
            ctx: Arc::new(Context {
                state_dir: state_dir.to_owned(),
                netns,
                store,
                clock: Arc::new(crate::WallClock),
                backoff: Backoff::default(),
            }),
            rescan: Duration::from_secs(2),
        })
    }

    /// Space restarts by `backoff` instead of the default.
    pub fn with_backoff(mut self, backoff: Backoff) -> Self {
        if let Some(ctx) = Arc::get_mut(&mut self.ctx) {
            ctx.backoff = backoff;
        }
        self
    }

    /// Look for new gateways this often (default 2 s). Deaths are seen at
    /// once regardless; this only bounds how late a gateway an apply added
    /// is first watched.
    pub fn with_rescan(mut self, every: Duration) -> Self {
        self.rescan = every;
        self
    }

    /// Run on the current tokio runtime until the handle is stopped.
    pub fn spawn(self) -> SupervisorHandle {
        let (stop, stopped) = watch::channel(false);
        let rescan = Arc::new(Notify::new());
        let task = tokio::spawn(self.run(stopped, Arc::clone(&rescan)));
        SupervisorHandle { stop, rescan, task }
    }

    /// Run in place until `until` resolves.
    pub async fn run_until(self, until: impl Future<Output = ()>) {
        let (stop, stopped) = watch::channel(false);
        let run = self.run(stopped, Arc::new(Notify::new()));
        tokio::pin!(run);
        tokio::select! {
            () = &mut run => return,
            () = until => {}
        }
        let _ = stop.send(true);
        run.await;
    }

    async fn run(self, mut stopped: watch::Receiver<bool>, rescan: Arc<Notify>) {
        let mut watched: HashMap<BridgeName, JoinHandle<()>> = HashMap::new();
        let mut resolvers = Some(Resolvers::default());
        loop {
            watched.retain(|_, task| !task.is_finished());
            if let Some(mut r) = resolvers.take() {
                let ctx = Arc::clone(&self.ctx);
                resolvers = tokio::task::spawn_blocking(move || {
                    r.sync(&ctx.state_dir, &ctx.netns);
                    r
                })
                .await
                .ok();
            }
            let dir = self.ctx.state_dir.clone();
            let listed = tokio::task::spawn_blocking(move || corral_gateway::status_recorded(&dir))
                .await
                .unwrap_or_default();
            for gw in listed {
                let Ok(bridge) = BridgeName::new(gw.bridge) else {
                    continue;
                };
                // A gateway corral stopped is not ours to start; one that
                // runs, or whose pid file names a dead daemon, is.
                if matches!(gw.status, GatewayStatus::Stopped | GatewayStatus::Hosted)
                    || watched.contains_key(&bridge)
                {
                    continue;
                }
                let task = tokio::spawn(supervise_one(
                    Arc::clone(&self.ctx),
                    bridge.clone(),
                    stopped.clone(),
                ));
                watched.insert(bridge, task);
            }
            tokio::select! {
                _ = stopped.changed() => break,
                () = rescan.notified() => {}
                () = tokio::time::sleep(self.rescan) => {}
            }
        }
        for (_, task) in watched {
            let _ = task.await;
        }
        // Stopped with the supervisor: their sandboxes' lookups go
        // unanswered until it runs again (closed, never open).
        if let Some(r) = resolvers {
            let _ = tokio::task::spawn_blocking(move || drop(r)).await;
        }
    }
}

/// What the pid file says after an exit, read under the host lock.
enum Found {
    /// Corral stopped it (apply narrowed it, teardown): leave it.
    Stopped,
    /// Another daemon of ours runs (an apply replaced it).
    Running,
    /// Dead, and corral did not stop it.
    Dead,
}

/// The result of one restart attempt.
enum Restart {
    /// It runs with this pid (ours, or one an apply started meanwhile).
    Up(u32),
    /// Corral stopped it meanwhile.
    Stopped,
}

async fn supervise_one(ctx: Arc<Context>, bridge: BridgeName, mut stopped: watch::Receiver<bool>) {
    let gateway = Gateway::new(&ctx.state_dir, &bridge);
    let mut failures: u32 = 0;
    let mut restarted_at: Option<Instant> = None;
    loop {
        let gw = gateway.clone();
        let watch = match tokio::task::spawn_blocking(move || gw.watch()).await {
            Ok(w) => w,
            Err(_) => return,
        };
        let (pid, reason) = match watch {
            Ok(w) => {
                let pid = w.pid();
                match wait_exit(w, &mut stopped).await {
                    Some(()) => (pid, format!("dnsmasq (pid {pid}) exited")),
                    None => return,
                }
            }
            // Stopped by corral, or handed to corral's own gateway (which
            // the resolver sync hosts): not a dnsmasq to restart.
            Err(GatewayStatus::Stopped | GatewayStatus::Hosted) => return,
            Err(GatewayStatus::Running { .. }) => continue,
            Err(GatewayStatus::Stale { pid, reason }) => (pid, reason),
        };
        let seen = Instant::now();
        match blocking(&ctx, &bridge, found_after_exit).await {
            Some(Found::Dead) => {}
            Some(Found::Running) => continue,
            Some(Found::Stopped) | None => return,
        }
        if restarted_at.is_some_and(|t| t.elapsed() < ctx.backoff.stable) {
            failures = failures.saturating_add(1);
        } else {
            failures = 0;
        }
        let profile = profile_of(&ctx.state_dir, &bridge).await;
        tracing::warn!(bridge = %bridge, pid, %reason, "gateway died");
        record(
            &ctx,
            &Event::GatewayDied {
                bridge: bridge.to_string(),
                profile: profile.clone(),
                pid,
                reason,
            },
        );
        let mut attempts: u32 = 0;
        loop {
            tokio::select! {
                _ = stopped.changed() => return,
                () = tokio::time::sleep(ctx.backoff.delay(failures)) => {}
            }
            attempts = attempts.saturating_add(1);
            match blocking(&ctx, &bridge, restart).await {
                Some(Ok(Restart::Up(pid))) => {
                    let down_ms = u64::try_from(seen.elapsed().as_millis()).unwrap_or(u64::MAX);
                    tracing::info!(bridge = %bridge, pid, attempts, down_ms, "gateway restarted");
                    record(
                        &ctx,
                        &Event::GatewayRestarted {
                            bridge: bridge.to_string(),
                            profile: profile.clone(),
                            pid,
                            attempts,
                            down_ms,
                        },
                    );
                    restarted_at = Some(Instant::now());
                    break;
                }
                Some(Ok(Restart::Stopped)) | None => return,
                Some(Err(e)) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(bridge = %bridge, attempts, error = %e, "gateway restart failed; retrying");
                }
            }
        }
    }
}

/// Waits for the watched daemon to exit (`Some`) or the supervisor to stop
/// (`None`).
async fn wait_exit(watch: ExitWatch, stopped: &mut watch::Receiver<bool>) -> Option<()> {
    let pid = watch.pid();
    tokio::select! {
        r = watch.exited() => {
            if let Err(error) = r {
                // Only a kernel without pidfd polling gets here; the exit is
                // then judged by the pid file under the lock, as any other.
                tracing::warn!(pid, %error, "cannot wait on the gateway's pidfd");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Some(())
        }
        _ = stopped.changed() => None,
    }
}

/// Runs `f` on a blocking thread with the gateway; `None` when it panicked.
async fn blocking<T: Send + 'static>(
    ctx: &Arc<Context>,
    bridge: &BridgeName,
    f: fn(&Context, &Gateway) -> T,
) -> Option<T> {
    let ctx = Arc::clone(ctx);
    let gateway = Gateway::new(&ctx.state_dir, bridge);
    tokio::task::spawn_blocking(move || f(&ctx, &gateway))
        .await
        .ok()
}

fn found_after_exit(ctx: &Context, gateway: &Gateway) -> Found {
    let _lock = StateStore::new(&ctx.state_dir).lock();
    match gateway.status() {
        GatewayStatus::Stopped | GatewayStatus::Hosted => Found::Stopped,
        GatewayStatus::Running { .. } => Found::Running,
        GatewayStatus::Stale { .. } => Found::Dead,
    }
}

fn restart(ctx: &Context, gateway: &Gateway) -> Result<Restart, corral_gateway::GatewayError> {
    // Held across the start, as apply holds it: an apply waits for this
    // restart and then replaces it if its configuration changed.
    let _lock = StateStore::new(&ctx.state_dir).lock();
    match gateway.status() {
        GatewayStatus::Stopped | GatewayStatus::Hosted => Ok(Restart::Stopped),
        GatewayStatus::Running { pid } => Ok(Restart::Up(pid)),
        GatewayStatus::Stale { .. } => gateway.restart_recorded(&ctx.netns).map(Restart::Up),
    }
}

/// The profile the applied record gives `bridge`, for the events.
async fn profile_of(state_dir: &Path, bridge: &BridgeName) -> Option<String> {
    let store = StateStore::new(state_dir);
    let bridge = bridge.clone();
    tokio::task::spawn_blocking(move || {
        let planned = crate::host::applied(&store).ok().flatten()?;
        planned
            .plan
            .bridges
            .iter()
            .find(|b| b.name == bridge)
            .map(|b| b.profile.to_string())
    })
    .await
    .ok()
    .flatten()
}

fn record(ctx: &Context, event: &Event) {
    if let Err(e) = ctx.store.record(event, ctx.clock.now()) {
        tracing::error!(event = event.type_name(), error = %e, "cannot record a gateway event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_to_its_cap() {
        let b = Backoff::default();
        assert_eq!(b.delay(0), Duration::from_millis(50));
        assert_eq!(b.delay(1), Duration::from_millis(100));
        assert_eq!(b.delay(3), Duration::from_millis(400));
        assert_eq!(b.delay(7), Duration::from_secs(5));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(5));
    }
}
