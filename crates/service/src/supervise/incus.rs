//! Starts behind corral's back: Incus's lifecycle stream of each watched
//! project, and for every `instance-started` / `instance-restarted` of a
//! profiled corral sandbox that corral did not start itself, the checks
//! corral's own start runs — the topology its stamp promises, the start
//! gate (member in rotation, the profile's enforcement, the port binding
//! its NIC carries), then, once it is ready, the canary. When one fails it
//! is stopped (force) and an `unmanaged_start` alert says why; when all
//! pass it keeps running and a non-alert `unmanaged_start` records that it
//! was admitted.
//!
//! Corral's own starts are told apart through the store: corral records
//! `starting` just before it asks the backend to start a sandbox (and
//! `created` for one the backend starts as it makes it). A start with one
//! of those, recorded within [`IncusStartWatcher::with_own_window`], not
//! followed by a `stopped` or `refused`, and not already matched to an
//! earlier start, is corral's; each such record vouches for one start
//! only. A start with none is judged after a short
//! settle (a create's `created` is recorded just after the backend
//! returns).

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use corral_provider_incus::IncusProvider;
use corral_provider_incus::events::InstanceStarted;
use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::{ProviderError, SandboxProvider, StopOptions};
use corral_sandbox_core::verify::{Clock, Timestamp};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::hooks::Event;
use crate::sandboxes::SandboxService;
use crate::store::{EventQuery, Store};

/// How long after corral's `starting` record a start is still corral's.
const OWN_WINDOW: Duration = Duration::from_secs(30);
/// How long a start with no record of corral's waits for one (a create's).
const SETTLE: Duration = Duration::from_secs(2);
/// How long a sandbox started behind corral's back gets to be ready
/// (a lease and exec) before its canary; not ready in time is a failure.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Stop attempts for a refused sandbox before reporting it not stopped.
const STOP_ATTEMPTS: u32 = 3;

/// Watches Incus for starts corral did not make.
#[derive(Debug)]
pub struct IncusStartWatcher {
    ctx: Arc<Context>,
    providers: Vec<IncusProvider>,
}

#[derive(Debug)]
struct Context {
    service: Arc<SandboxService>,
    store: Arc<Store>,
    clock: Arc<dyn Clock + Send + Sync>,
    own_window: Duration,
    ready_timeout: Duration,
    /// Ids of corral's start records already matched to a start.
    matched: Mutex<HashSet<i64>>,
    /// Sandboxes being judged now (a restart's second event is not judged
    /// twice).
    judging: Mutex<HashSet<String>>,
}

/// A running watcher.
#[derive(Debug)]
pub struct StartWatchHandle {
    stop: watch::Sender<bool>,
    subscribed: watch::Receiver<usize>,
    wanted: usize,
    task: JoinHandle<()>,
}

impl StartWatchHandle {
    /// Waits until every watched project's stream is open (starts before
    /// that are not seen).
    pub async fn subscribed(&mut self) {
        let wanted = self.wanted;
        let _ = self.subscribed.wait_for(|n| *n >= wanted).await;
    }

    /// Stop watching and wait for the watcher (and any judgement under
    /// way) to end.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = self.task.await;
    }
}

impl IncusStartWatcher {
    /// Watch the projects of `providers` (corral's own and each granted
    /// user's: `Backend::incus_providers`), judging starts through `service` (whose hooks run the
    /// canary) and recording in `store`.
    pub fn new(
        service: Arc<SandboxService>,
        store: Arc<Store>,
        providers: Vec<IncusProvider>,
    ) -> Self {
        Self {
            ctx: Arc::new(Context {
                service,
                store,
                clock: Arc::new(crate::WallClock),
                own_window: OWN_WINDOW,
                ready_timeout: READY_TIMEOUT,
                matched: Mutex::new(HashSet::new()),
                judging: Mutex::new(HashSet::new()),
            }),
            providers,
        }
    }

    /// How long after corral's `starting` record a start counts as
    /// corral's (default 30 s).
    pub fn with_own_window(mut self, window: Duration) -> Self {
        if let Some(ctx) = Arc::get_mut(&mut self.ctx) {
            ctx.own_window = window;
        }
        self
    }

    /// How long a sandbox started behind corral's back gets to be ready
    /// before its canary (default 60 s).
    pub fn with_ready_timeout(mut self, timeout: Duration) -> Self {
        if let Some(ctx) = Arc::get_mut(&mut self.ctx) {
            ctx.ready_timeout = timeout;
        }
        self
    }

    /// Run on the current tokio runtime until the handle is stopped.
    pub fn spawn(self) -> StartWatchHandle {
        let (stop, stopped) = watch::channel(false);
        let (count, subscribed) = watch::channel(0usize);
        let wanted = self.providers.len();
        let task = tokio::spawn(self.run(stopped, count));
        StartWatchHandle {
            stop,
            subscribed,
            wanted,
            task,
        }
    }

    /// Run in place until `until` resolves.
    pub async fn run_until(self, until: impl Future<Output = ()>) {
        let (stop, stopped) = watch::channel(false);
        let (count, _) = watch::channel(0usize);
        let run = self.run(stopped, count);
        tokio::pin!(run);
        tokio::select! {
            () = &mut run => return,
            () = until => {}
        }
        let _ = stop.send(true);
        run.await;
    }

    async fn run(self, stopped: watch::Receiver<bool>, count: watch::Sender<usize>) {
        let count = Arc::new(count);
        let tasks: Vec<JoinHandle<()>> = self
            .providers
            .into_iter()
            .map(|p| {
                tokio::spawn(watch_project(
                    Arc::clone(&self.ctx),
                    p,
                    stopped.clone(),
                    Arc::clone(&count),
                ))
            })
            .collect();
        for t in tasks {
            let _ = t.await;
        }
    }
}

async fn watch_project(
    ctx: Arc<Context>,
    provider: IncusProvider,
    mut stopped: watch::Receiver<bool>,
    count: Arc<watch::Sender<usize>>,
) {
    let mut judgements: Vec<JoinHandle<()>> = Vec::new();
    let mut retry = Duration::from_millis(100);
    let mut counted = false;
    'outer: loop {
        let mut stream = match provider.lifecycle_events().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(project = %provider.config().project, error = %e, "cannot open Incus's lifecycle events; retrying");
                tokio::select! {
                    _ = stopped.changed() => break,
                    () = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(Duration::from_secs(10));
                continue;
            }
        };
        retry = Duration::from_millis(100);
        if !counted {
            counted = true;
            count.send_modify(|n| *n += 1);
        }
        loop {
            let start = tokio::select! {
                _ = stopped.changed() => break 'outer,
                s = stream.next_start() => s,
            };
            let Some(start) = start else {
                tracing::warn!(project = %provider.config().project, "Incus closed the lifecycle stream; reopening");
                continue 'outer;
            };
            judgements.retain(|j| !j.is_finished());
            judgements.push(tokio::spawn(judge(
                Arc::clone(&ctx),
                provider.clone(),
                start,
            )));
        }
    }
    for j in judgements {
        let _ = j.await;
    }
}

async fn judge(ctx: Arc<Context>, provider: IncusProvider, start: InstanceStarted) {
    {
        let mut judging = ctx.judging.lock().unwrap_or_else(PoisonError::into_inner);
        if !judging.insert(start.name.clone()) {
            return;
        }
    }
    judge_once(&ctx, &provider, &start).await;
    ctx.judging
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&start.name);
}

async fn judge_once(ctx: &Context, provider: &IncusProvider, start: &InstanceStarted) {
    let Ok(name) = start.name.parse::<SandboxName>() else {
        return;
    };
    let seen = ctx.clock.now();
    if own_start(ctx, &start.name, seen) {
        return;
    }
    tokio::time::sleep(SETTLE).await;
    if own_start(ctx, &start.name, seen) {
        return;
    }
    let sandbox = match provider.open(&name).await {
        Ok(s) => s,
        // Not corral's (no stamp, another owner) or gone already.
        Err(ProviderError::NotOwned { .. } | ProviderError::NotFound { .. }) => return,
        Err(e) => {
            tracing::warn!(sandbox = %name, error = %e, "cannot inspect a sandbox started outside corral");
            return;
        }
    };
    let info = match sandbox.info().await {
        Ok(info) => info,
        Err(e) => {
            tracing::warn!(sandbox = %name, error = %e, "cannot read a sandbox started outside corral");
            return;
        }
    };
    // Incus streams the whole cluster's starts; one on another member is
    // judged by that member's corral, on the kernel that holds its rules.
    match ctx.service.located_elsewhere(&info).await {
        Ok(None) => {}
        Ok(Some(placed)) => {
            tracing::debug!(sandbox = %name, member = %placed.member, "a start on another cluster member: its corral judges it");
            return;
        }
        Err(e) => {
            tracing::warn!(sandbox = %name, error = %e, "cannot tell which cluster member a sandbox started outside corral is on");
            return;
        }
    }
    let profile = info.profile;
    // A sandbox with no profile has no network of corral's to hold.
    let Some(profile) = profile else { return };
    let verb = if start.restarted {
        "restarted"
    } else {
        "started"
    };
    let what = format!(
        "{verb} outside corral (Incus, {}), profile `{profile}`",
        start.timestamp
    );
    let verdict = match provider.check_topology_of(name.as_str()).await {
        Err(e) => Err(format!("topology check: {e}")),
        Ok(()) => ctx
            .service
            .admit_started(sandbox.as_ref(), ctx.ready_timeout)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
    };
    let event = match verdict {
        Ok(()) => Event::UnmanagedStart {
            name: name.to_string(),
            admitted: true,
            reason: format!("{what}: start gate, topology and canary passed; left running"),
        },
        Err(why) => {
            let stopped = stop(sandbox.as_ref()).await;
            if stopped.is_ok() {
                record(
                    ctx,
                    &Event::Stopped {
                        name: name.to_string(),
                    },
                );
            }
            Event::UnmanagedStart {
                name: name.to_string(),
                admitted: false,
                reason: match stopped {
                    Ok(()) => format!("{what}: refused ({why}); stopped"),
                    Err(e) => format!("{what}: refused ({why}); NOT stopped: {e}"),
                },
            }
        }
    };
    tracing::warn!(sandbox = %name, event = ?event, "start outside corral judged");
    record(ctx, &event);
}

/// Whether corral recorded its own start of `name` shortly before `seen`
/// (and that record has not vouched for another start yet).
fn own_start(ctx: &Context, name: &str, seen: Timestamp) -> bool {
    let events = match ctx.store.events(&EventQuery {
        sandbox: Some(name.to_owned()),
        after: None,
        limit: Some(20),
    }) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(sandbox = name, error = %e, "cannot read the event log; judging the start");
            return false;
        }
    };
    let window = u64::try_from(ctx.own_window.as_millis()).unwrap_or(u64::MAX);
    let since = Timestamp(seen.millis().saturating_sub(window));
    let mut matched = ctx.matched.lock().unwrap_or_else(PoisonError::into_inner);
    // Newest first: a stop recorded after corral's start record means that
    // start is over, and this one is someone else's.
    for e in events.iter().rev() {
        match e.event {
            Event::Stopped { .. } | Event::Refused { .. } => return false,
            Event::Starting { .. } | Event::Created { .. }
                if e.recorded >= since && !matched.contains(&e.id) =>
            {
                matched.insert(e.id);
                return true;
            }
            _ => {}
        }
    }
    false
}

async fn stop(sandbox: &dyn corral_sandbox_core::sandbox::Sandbox) -> Result<(), ProviderError> {
    let mut last = None;
    for attempt in 0..STOP_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        match sandbox
            .stop(StopOptions {
                force: true,
                timeout: None,
            })
            .await
        {
            Ok(()) => return Ok(()),
            // Stopped meanwhile (by someone else): it no longer runs.
            Err(ProviderError::InvalidState { .. }) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| ProviderError::NotFound {
        what: "sandbox",
        name: sandbox.name().to_string(),
    }))
}

fn record(ctx: &Context, event: &Event) {
    if let Err(e) = ctx.store.record(event, ctx.clock.now()) {
        tracing::error!(event = event.type_name(), error = %e, "cannot record an event");
    }
}
