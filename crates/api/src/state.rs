//! What every handler shares: the service's settings (configuration,
//! target namespace, state directory — by the same rules as the CLI), the
//! sandbox lifecycle with the per-sandbox canary as its hand-out hook,
//! the durable store (events, the verification gate) that `corral` opens
//! too, and the bounds on work (the operation limiter, per-sandbox locks,
//! exec and body limits).

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use corral_egress::host::StateStore;
use corral_service::Caller;
use corral_service::callers::Owners;
use corral_service::host::{self, Planned};
use corral_service::limits::{NameLocks, OpLimiter, Saturated, Turn};
use corral_service::verify::watchdog::Watchdog;
use corral_service::{
    Backend, HostService, SandboxService, Settings, Store, Target, Verifier, WallClock,
};
use tokio::sync::OwnedMutexGuard;

use crate::error::{ApiError, BoxError};
use crate::metrics::Metrics;

fn limiter(limits: &Limits, running: usize) -> OpLimiter {
    OpLimiter::new(running, limits.queue, limits.queue_wait)
}

/// Saturation is the caller's cue to come back: 429 with `Retry-After`
/// (not a 5xx, so a client that honours it never sees a server error).
fn busy(s: Saturated) -> ApiError {
    let secs = s.retry_after.as_secs().max(1);
    ApiError::new(StatusCode::TOO_MANY_REQUESTS, "busy", s).retry_after(secs)
}

/// The bounds corrald puts on the work callers ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// An exec that names no timeout is killed (its whole process tree)
    /// after this long.
    pub exec_timeout: Duration,
    /// The longest timeout an exec may ask for.
    pub exec_timeout_max: Duration,
    /// Provider operations running at once.
    pub operations: usize,
    /// Requests waiting for a turn beyond those; more are told to retry.
    pub queue: usize,
    /// How long a request waits for a turn.
    pub queue_wait: Duration,
    /// Streamed execs (WebSocket) open at once.
    pub streams: usize,
    /// The largest upload (a backup to import, a file to push), in bytes;
    /// a pushed file is also bounded by the service's own cap.
    pub max_upload: u64,
}

/// Default [`Limits::max_body`]: 1 MiB.
pub const DEFAULT_MAX_BODY: usize = 1 << 20;

/// Default [`Limits::max_upload`]: 16 GiB.
pub const DEFAULT_MAX_UPLOAD: u64 = 16 << 30;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_body: DEFAULT_MAX_BODY,
            exec_timeout: Duration::from_secs(600),
            exec_timeout_max: Duration::from_secs(24 * 3600),
            operations: 8,
            queue: 256,
            queue_wait: Duration::from_secs(60),
            streams: 32,
            max_upload: DEFAULT_MAX_UPLOAD,
        }
    }
}

/// Shared state of the server.
#[derive(Debug, Clone)]
pub struct AppState {
    settings: Arc<Settings>,
    sandboxes: SandboxService,
    verifier: Verifier,
    limits: Limits,
    operations: Arc<OpLimiter>,
    streams: Arc<OpLimiter>,
    names: Arc<NameLocks>,
    metrics: Metrics,
    /// Other members' corrald (`--cluster`): profiled work placed on one
    /// of them is admitted there (`crate::admit`).
    peers: Option<Arc<corral_service::cluster::RemoteAttester>>,
}

impl AppState {
    /// The state of a server with `settings`, driving sandboxes through
    /// `backend`, recording into `store`, under the default [`Limits`].
    pub fn new(settings: Settings, backend: Backend, store: Store) -> Self {
        let settings = Arc::new(settings);
        let store = Arc::new(store);
        // Granted users' projects are listed from the store, so their
        // sandboxes are found wherever a route names one.
        let backend = Arc::new(backend.with_user_projects(Arc::clone(&store) as _));
        let verifier = Verifier::new(Arc::clone(&settings), store, Arc::new(WallClock))
            .with_backend(Arc::clone(&backend));
        let limits = Limits::default();
        let metrics = Metrics::default();
        metrics
            .families()
            .preset_profiles(settings.config.profiles.iter().map(|p| p.name.as_str()));
        Self {
            sandboxes: SandboxService::new(Arc::clone(&settings), backend)
                .with_hooks(Arc::new(verifier.clone())),
            settings,
            verifier,
            operations: Arc::new(limiter(&limits, limits.operations)),
            streams: Arc::new(OpLimiter::new(limits.streams, 0, Duration::ZERO)),
            limits,
            names: Arc::new(NameLocks::default()),
            metrics,
            peers: None,
        }
    }

    /// The same state, asking `peers` (this member's cluster client) to
    /// admit profiled work placed on another member.
    pub fn with_peers(mut self, peers: Arc<corral_service::cluster::RemoteAttester>) -> Self {
        self.peers = Some(peers);
        self
    }

    /// The cluster client, when this corrald runs with `--cluster`.
    pub fn peers(&self) -> Option<&Arc<corral_service::cluster::RemoteAttester>> {
        self.peers.as_ref()
    }

    /// The watchdog that re-verifies this server's sandboxes every
    /// `interval`; its `handle()` (taken before `run()`) is how another
    /// component, the kernel watcher, asks for a re-verification at once.
    pub fn watchdog(&self, interval: std::time::Duration) -> Watchdog {
        self.metrics
            .families()
            .watchdog_interval
            .set(i64::try_from(interval.as_secs()).unwrap_or(i64::MAX));
        Watchdog::new(self.verifier.clone(), self.sandboxes.clone(), interval)
    }

    /// The reaper that deletes this server's sandboxes whose time to live
    /// ran out and stops those idle past their limit.
    pub fn reaper(&self) -> corral_service::lifetimes::reaper::Reaper {
        corral_service::lifetimes::reaper::Reaper::new(
            self.verifier.clone(),
            self.sandboxes.clone(),
        )
    }

    /// The kernel watch of this server's target and state directory on a
    /// thread of its own: it stops sandboxes through this server's
    /// service, and hands the re-verification after a heal to `watchdog`
    /// (one place decides what a failed canary does to a sandbox, and the
    /// watchdog's record of each pass says so). `None`, with the reason
    /// logged, when it cannot run. Stop it with the handle.
    pub fn kernel_watch(
        &self,
        runtime: tokio::runtime::Handle,
        watchdog: corral_service::verify::watchdog::WatchdogHandle,
    ) -> Option<corral_service::watch::StopHandle> {
        use corral_service::verify::watchdog::Scope;
        use corral_service::watch::{Outcome, Reverify, ServiceSandboxes, Watcher};
        let target = match corral_service::Target::open(self.settings.netns.as_deref()) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(error = %format!("{:#}", anyhow::Error::new(e)), "kernel watch: not running");
                return None;
            }
        };
        let host = corral_service::HostService::new(target, self.settings.state_dir.clone());
        let reverify: Reverify = Arc::new(move |profiles: &[String]| {
            for p in profiles {
                if let Err(e) = watchdog.nudge(Scope::Profile(p.clone())) {
                    tracing::error!(profile = %p, error = %e, "kernel watch: healed, not re-verified");
                }
            }
        });
        let sandboxes = ServiceSandboxes::new(self.sandboxes.clone(), runtime, Some(reverify));
        let watcher = match Watcher::new(host, Arc::new(sandboxes)) {
            Ok(w) => w,
            Err(e) => {
                tracing::error!(error = %format!("{:#}", anyhow::Error::new(e)), "kernel watch: not running");
                return None;
            }
        };
        let stop = watcher.stop_handle();
        let spawned = std::thread::Builder::new()
            .name("kernel-watch".to_owned())
            .spawn(move || {
                let run = watcher.run(|c| match &c.outcome {
                    Outcome::Clean { .. } | Outcome::NothingApplied | Outcome::StillCut { .. } => {
                        tracing::debug!(trigger = %c.trigger, "kernel watch: {:?}", c.outcome);
                    }
                    Outcome::Healed { .. } => {
                        tracing::warn!(trigger = %c.trigger, "kernel watch: {:?}", c.outcome);
                    }
                    Outcome::Cut { .. } | Outcome::Failed(_) => {
                        tracing::error!(trigger = %c.trigger, "kernel watch: {:?}", c.outcome);
                    }
                });
                if let Err(e) = run {
                    tracing::error!(error = %format!("{:#}", anyhow::Error::new(e)), "kernel watch: stopped");
                }
            });
        match spawned {
            Ok(_) => {
                tracing::info!("kernel watch: healing or cutting drift as the kernel reports it");
                Some(stop)
            }
            Err(e) => {
                tracing::error!(error = %e, "kernel watch: cannot start its thread");
                None
            }
        }
    }

    /// Where sandbox owners are recorded: the store.
    pub fn owners(&self) -> &dyn Owners {
        self.db()
    }

    /// The same state under `limits`.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.operations = Arc::new(limiter(&limits, limits.operations));
        self.streams = Arc::new(OpLimiter::new(limits.streams, 0, Duration::ZERO));
        self.limits = limits;
        self
    }

    /// The Prometheus families (`GET /metrics`).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A turn for one provider operation (429 `busy` when saturated).
    pub async fn turn(&self) -> Result<Turn, ApiError> {
        self.operations.turn().await.map_err(busy)
    }

    /// A turn for one streamed exec (429 `busy` when as many are open as
    /// the limit allows; they are long, so they do not queue).
    pub async fn stream_turn(&self) -> Result<Turn, ApiError> {
        self.streams.turn().await.map_err(busy)
    }

    /// Wait until no other request works on sandbox `name`.
    pub async fn lock_name(&self, name: &str) -> OwnedMutexGuard<()> {
        self.names.lock(name).await
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The sandbox lifecycle (start gate included).
    pub fn sandboxes(&self) -> &SandboxService {
        &self.sandboxes
    }

    /// The lifecycle a create by `caller` goes through: a user `corral
    /// grant` named creates in their own Incus project; everyone else in
    /// corral's.
    pub fn sandboxes_for(&self, caller: &Caller) -> Result<SandboxService, ApiError> {
        if caller.is_admin() {
            return Ok(self.sandboxes.clone());
        }
        let grant = self.db().grant_of(caller.uid).map_err(ApiError::internal)?;
        Ok(grant
            .filter(|g| g.active())
            .and_then(|g| self.sandboxes.in_project(&g.project))
            .unwrap_or_else(|| self.sandboxes.clone()))
    }

    /// The store, shared (grants are read from it on every request).
    pub fn db_shared(&self) -> Arc<Store> {
        Arc::clone(self.verifier.store())
    }

    /// The sandbox provider.
    pub fn backend(&self) -> &Backend {
        self.sandboxes.backend()
    }

    /// The canary, the gate and the store.
    pub fn verifier(&self) -> &Verifier {
        &self.verifier
    }

    /// The durable store.
    pub fn db(&self) -> &Store {
        self.verifier.store()
    }

    /// The host commands for the target namespace.
    pub fn host(&self) -> Result<HostService, BoxError> {
        let target = Target::open(self.settings.netns.as_deref())?;
        Ok(HostService::new(target, self.settings.state_dir.clone()))
    }

    /// The store of applied inputs.
    pub fn store(&self) -> StateStore {
        StateStore::new(&self.settings.state_dir)
    }

    /// The plan of the configuration, with names resolved now.
    pub fn configured_plan(&self) -> Result<Planned, BoxError> {
        Ok(host::plan_config(self.loaded())?)
    }

    /// The plan to check the live state against: what was applied when a
    /// record exists (names are not re-resolved), else the configuration's.
    pub fn plan_to_check(&self) -> Result<Planned, BoxError> {
        Ok(host::plan_to_check(self.loaded(), false, &self.store())?)
    }

    fn loaded(&self) -> corral_service::LoadedConfig {
        corral_service::LoadedConfig {
            config: self.settings.config.clone(),
            origin: self.settings.origin.clone(),
        }
    }
}
