//! Per-sandbox verification that runs: the canary inside every profiled
//! sandbox before it is handed out ([`Verifier`] is the service's
//! `before_handout` hook), on demand (`corral verify`, `POST
//! /v1/sandboxes/{name}/verify`) and from corrald's [`watchdog`]; the gate's
//! judgement committed to the [`crate::store`] before anyone acts on it.
//!
//! One run: the sandbox's profile and kind → where to probe from (a local
//! container's network namespace, or the guest through exec) → the host's
//! side (a listener on the uplink address and one on the gateway address,
//! the upstream resolver, a running sibling) → the plan → every check and
//! control at once ([`run`]) → the gate's judgement, in one store
//! transaction (a failure of an opted-in kind demotes it) → a
//! `verification` event with per-check results and timings, the sandbox's
//! verdict, and on failure an `alert` event.

mod guest;
mod host_side;
pub mod placement;
mod probe;
pub mod run;
mod sibling;
pub mod stop;
pub mod watchdog;

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use corral_egress::netns::Netns;
use corral_sandbox_core::sandbox::{ProbeSite, ProviderError, Sandbox, SandboxInfo, SandboxState};
use corral_sandbox_core::verify::{
    Clock, EventOutcome, FilterHealth, PlanError, Requirement, Vantage, VerificationEvent, plan,
};
use corral_sandbox_core::{Profile, SandboxKind, SandboxName};
use serde::Serialize;

pub use host_side::HostSide;
pub use probe::Seen;

use crate::error::ServiceError;
use crate::hooks::{Event, HookError, Hooks};
use crate::provider::Backend;
use crate::settings::Settings;
use crate::store::{RecordChange, SandboxRecord, Store, StoreError, Verdict};
use crate::target::{Target, TargetError};

/// Running sandboxes asked for an address when looking for a sibling.
const MAX_SIBLINGS_ASKED: usize = 3;

/// The check name a refused sandbox's [`HookError`] carries.
pub const CHECK: &str = "canary";

/// What one verification found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The sandbox.
    pub sandbox: String,
    /// Its backend.
    pub kind: SandboxKind,
    /// Its profile.
    pub profile: String,
    /// Where the probes ran.
    pub site: ProbeSite,
    /// True when every check passed.
    pub passed: bool,
    /// True when the gate issued its per-sandbox proof (opted-in kinds).
    pub verified: bool,
    /// Wall time of the whole run, in milliseconds.
    pub ms: u64,
    /// The gate's event: per-check results, controls and timings.
    pub event: VerificationEvent,
    /// What corral did after a failure (`stopped`), if anything.
    pub action: Option<String>,
}

/// A verification could not be run (which fails closed: a sandbox that
/// cannot be verified is not handed out).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    /// The sandbox has no profile, so there is nothing to verify.
    #[error("sandbox `{0}` has no network profile; only profiled sandboxes are verified")]
    NoProfile(String),
    /// The sandbox's profile is not in the configuration.
    #[error(
        "sandbox `{sandbox}` is on profile `{profile}`, which the configuration does not define; verify with the configuration it was created under"
    )]
    UnknownProfile {
        /// The sandbox.
        sandbox: String,
        /// Its stamped profile.
        profile: String,
    },
    /// The sandbox is not running.
    #[error("sandbox `{name}` is {state}; start it first (`corral start {name}`)")]
    NotRunning {
        /// The sandbox.
        name: String,
        /// Its state.
        state: SandboxState,
    },
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The canary plan cannot be built for this profile.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The store failed; the judgement was not committed, so nothing is handed out.
    #[error("the verification store")]
    Store(#[from] StoreError),
    /// The host's namespace could not be opened.
    #[error("cannot open the host side of the canary")]
    Target(#[from] TargetError),
    /// The sandbox's network namespace could not be entered.
    #[error(
        "cannot enter the sandbox's network namespace {path}: setns(2) into a network namespace needs CAP_SYS_ADMIN and a seccomp policy that allows it (systemd: RestrictNamespaces=net)"
    )]
    Enter {
        /// `/proc/PID/ns/net`.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The canary, the gate and the store, as a lifecycle hook.
#[derive(Debug, Clone)]
pub struct Verifier {
    settings: Arc<Settings>,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    host_ns: Option<Arc<Netns>>,
    backend: Option<Arc<Backend>>,
}

impl Verifier {
    /// A verifier under `settings`, recording into `store`, reading `clock`.
    pub fn new(settings: Arc<Settings>, store: Arc<Store>, clock: Arc<dyn Clock>) -> Self {
        Self {
            settings,
            store,
            clock,
            host_ns: None,
            backend: None,
        }
    }

    /// Look up sibling sandboxes on `backend` (for the sibling check).
    pub fn with_backend(mut self, backend: Arc<Backend>) -> Self {
        self.backend = Some(backend);
        self
    }

    /// Run the host's side (listeners, controls) in `ns` instead of the
    /// settings' target namespace (a test's or drill's own namespace).
    pub fn with_host_namespace(mut self, ns: Netns) -> Self {
        self.host_ns = Some(Arc::new(ns));
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    fn host_side(&self) -> Result<HostSide, VerifyError> {
        let ns = match &self.host_ns {
            Some(ns) => ns.try_clone().map_err(|source| {
                VerifyError::Target(TargetError::NoSuchNetns {
                    name: "the verifier's host namespace".to_owned(),
                    source,
                })
            })?,
            None => match self.settings.netns.as_deref() {
                Some(name) => Netns::open(name).map_err(|source| {
                    VerifyError::Target(TargetError::NoSuchNetns {
                        name: name.to_owned(),
                        source,
                    })
                })?,
                None => Target::open(None)?
                    .host
                    .netns()
                    .try_clone()
                    .map_err(|source| {
                        VerifyError::Target(TargetError::NoSuchNetns {
                            name: "this host".to_owned(),
                            source,
                        })
                    })?,
            },
        };
        Ok(HostSide::new(ns))
    }

    fn profile(&self, info: &SandboxInfo) -> Result<&Profile, VerifyError> {
        let Some(name) = &info.profile else {
            return Err(VerifyError::NoProfile(info.name.to_string()));
        };
        self.settings
            .config
            .profiles
            .get(name.as_str())
            .ok_or_else(|| VerifyError::UnknownProfile {
                sandbox: info.name.to_string(),
                profile: name.to_string(),
            })
    }

    /// Another running sandbox on `profile`'s subnet, other than `me`, in
    /// any project corral manages: a granted user's sandboxes sit on the
    /// same bridges as corral's own. The list is read without addresses
    /// (a full list reads every running sandbox's state, which grows with
    /// the siblings the canary needs only one of); candidates the list
    /// gave no address are asked, at most a few.
    async fn sibling(&self, me: &SandboxName, profile: &Profile) -> Option<IpAddr> {
        let providers = self.backend.as_ref()?.providers().await.ok()?;
        let on_subnet = |addresses: &[IpAddr]| {
            addresses
                .iter()
                .copied()
                .find(|a| matches!(a, IpAddr::V4(v4) if profile.subnet_v4.contains(v4)))
        };
        let mut asked = 0;
        for provider in &providers {
            let Ok(list) = provider.list_without_addresses().await else {
                continue;
            };
            let candidates = list
                .iter()
                .filter(|s| &s.name != me && s.state == SandboxState::Running)
                .filter(|s| s.profile.as_ref() == Some(&profile.name));
            for c in candidates {
                if let Some(found) = on_subnet(&c.addresses) {
                    return Some(found);
                }
                if asked == MAX_SIBLINGS_ASKED {
                    return None;
                }
                asked += 1;
                let Ok(sandbox) = provider.open(&c.name).await else {
                    continue;
                };
                let Ok(info) = sandbox.info().await else {
                    continue;
                };
                if let Some(found) = on_subnet(&info.addresses) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// Run the canary in `sandbox` and commit the gate's judgement; records
    /// the events and the verdict. A failed run is a [`Report`] with
    /// `passed: false`; an error means the run could not happen.
    pub async fn verify(&self, sandbox: &dyn Sandbox) -> Result<Report, VerifyError> {
        let started = Instant::now();
        let info = sandbox.info().await?;
        if info.state != SandboxState::Running {
            return Err(VerifyError::NotRunning {
                name: info.name.to_string(),
                state: info.state,
            });
        }
        let profile = self.profile(&info)?.clone();
        let kind = sandbox.kind();
        let cfg = &self.settings.config.host.verification;
        let requirement = if cfg.kinds.contains(&kind) {
            Requirement::Strict
        } else {
            Requirement::Configured
        };
        let site = sandbox.probe_site().await?;
        let health: Option<FilterHealth> = match sandbox.filter_health().await {
            Ok(h) => h,
            Err(e) => Some(FilterHealth::Unknown {
                reason: e.to_string(),
            }),
        };
        let host = self.host_side()?;
        // First, so the sandbox forms its IPv6 address while the rest of
        // the run is set up (`ipv6-allowed` waits for it).
        if let Some(nic) = &info.nic
            && let Err(e) = host.advertise(&profile, nic)
        {
            tracing::warn!(
                sandbox = %info.name,
                port = %nic.port,
                "could not send the gateway's router advertisement to the sandbox's port \
                 (its IPv6 address comes from its own solicitation instead): {e}"
            );
        }
        let uplink = host.uplink_address(cfg.canary).ok();
        let (lan_listener, host_lan_failed) = match uplink.map(|ip| (ip, host.listen(ip))) {
            Some((_, Ok(l))) => (Some(l), None),
            Some((ip, Err(e))) => (
                None,
                Some(format!("cannot listen on the uplink address {ip}: {e}")),
            ),
            None => (None, None),
        };
        let gw = IpAddr::V4(profile.gateway_v4());
        let (gateway_listener, gateway_port_failed) = match host.listen(gw) {
            Ok(l) => (Some(l), None),
            // Not this host's address (a VM's network elsewhere): nothing to check here.
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => (None, None),
            Err(e) => (
                None,
                Some(format!("cannot listen on the gateway address {gw}: {e}")),
            ),
        };
        let upstream: Option<SocketAddr> = corral_gateway::upstreams_or_host(
            &self.settings.config.host.dns_upstreams,
            std::path::Path::new(corral_gateway::RESOLV_CONF),
        )
        .into_iter()
        .next();
        let sibling = match site {
            ProbeSite::HostNamespace { .. } => self.sibling(&info.name, &profile).await,
            ProbeSite::Guest => None,
        };
        // corral's own targets stand in for an unset canary; a run whose
        // settings name both never touches them. They exist only on this
        // host: a sandbox whose network is elsewhere (its gateway address
        // is not this host's) would fail to reach them for want of a route
        // while the control here passed, so it does not use them.
        let network_here = gateway_listener.is_some() || gateway_port_failed.is_some();
        let (own_listeners, own_targets, own_targets_failed) =
            if network_here && (cfg.canary.is_none() || cfg.canary_v6.is_none()) {
                match host_side::own_targets(&self.settings.state_dir) {
                    Ok((l, t)) => (Some(l), Some(t), None),
                    Err(why) => (None, None, Some(why)),
                }
            } else {
                (None, None, None)
            };
        let vantage = Vantage {
            host_lan: lan_listener.as_ref().map(|(_, a)| *a),
            gateway_port: gateway_listener.as_ref().map(|(_, a)| *a),
            sibling,
            upstream,
            host_lan_failed,
            gateway_port_failed,
            own_targets,
            own_targets_failed,
        };
        let canary = plan(&profile, cfg, &vantage, requirement)?;
        let side = match site {
            ProbeSite::HostNamespace { pid } => self.namespace_side(pid, &info, &profile)?,
            ProbeSite::Guest => run::SandboxSide::Guest(sandbox),
        };
        let results = run::run(&canary, side, &host).await;
        drop(lan_listener);
        drop(gateway_listener);
        drop(own_listeners);
        let now = self.clock.now();
        let store = Arc::clone(&self.store);
        let cfg = cfg.clone();
        let name = info.name.clone();
        let judged = tokio::task::spawn_blocking(move || {
            store.update_gate(&cfg, |gate| {
                gate.judge(&name, kind, &canary, &results, health.as_ref(), now)
            })
        })
        .await
        .map_err(|e| {
            VerifyError::Store(StoreError::Corrupt {
                path: self.store.path().to_owned(),
                what: "judgement",
                detail: format!("the store worker failed: {e}"),
            })
        })??;
        let passed = judged.event.outcome == EventOutcome::Passed;
        let report = Report {
            sandbox: info.name.to_string(),
            kind,
            profile: profile.name.to_string(),
            site,
            passed,
            verified: judged.verified.is_some(),
            ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            event: judged.event,
            action: None,
        };
        self.store.set_verdict(
            info.name.as_str(),
            kind,
            Some(profile.name.as_str()),
            now,
            Verdict::from(report.event.outcome),
        )?;
        self.record_now(&Event::Verification(Box::new(report.event.clone())));
        if !passed {
            tracing::error!(
                sandbox = %report.sandbox,
                kind = %kind,
                profile = %report.profile,
                "verification failed: {}",
                report.event.message
            );
        }
        Ok(report)
    }

    /// The sandbox's own network namespace, entered through its init,
    /// after checking the namespace holds the sandbox's leased address (so
    /// a recycled pid never points the probes at another namespace).
    fn namespace_side(
        &self,
        pid: u32,
        info: &SandboxInfo,
        profile: &Profile,
    ) -> Result<run::SandboxSide<'static>, VerifyError> {
        let path = format!("/proc/{pid}/ns/net");
        let ns = Netns::open(&path).map_err(|source| {
            VerifyError::Target(TargetError::NoSuchNetns {
                name: path.clone(),
                source,
            })
        })?;
        let own = info
            .addresses
            .iter()
            .copied()
            .find(|a| matches!(a, IpAddr::V4(v4) if profile.subnet_v4.contains(v4)));
        let bound_here =
            match own.map(|ip| ns.run(|| UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok())) {
                Some(Ok(bound)) => bound,
                None => false,
                // Not the sandbox's fault: corrald cannot enter namespaces.
                Some(Err(source)) => return Err(VerifyError::Enter { path, source }),
            };
        if !bound_here {
            return Err(VerifyError::Provider(ProviderError::InvalidState {
                name: info.name.to_string(),
                state: info.state,
                operation: corral_sandbox_core::sandbox::Operation::Exec,
                hint: format!(
                    "the network namespace of pid {pid} does not hold the sandbox's address on {} ({}); it may have restarted — verify again",
                    profile.subnet_v4,
                    own.map_or_else(|| "none reported".to_owned(), |a| a.to_string())
                ),
            }));
        }
        Ok(run::SandboxSide::Namespace {
            ns,
            resolver: corral_gateway::serves_dns(profile)
                .then(|| run::gateway_resolver(IpAddr::V4(profile.gateway_v4()))),
        })
    }

    /// Record `event` at the clock's now; a store failure is logged, never
    /// fails the operation it describes.
    pub fn record_now(&self, event: &Event) {
        if event.is_alert() {
            tracing::error!(
                sandbox = event.sandbox().unwrap_or_default(),
                "{}",
                serde_json::to_string(event).unwrap_or_default()
            );
        }
        let now = self.clock.now();
        // A create's or delete's event and its sandbox record: one
        // transaction.
        let made = match event {
            Event::Created {
                name,
                kind: Some(kind),
                profile,
                owner,
                template,
                ..
            } => Some(SandboxRecord {
                name: name.clone(),
                kind: *kind,
                profile: profile.clone(),
                created: now,
                last_verified: None,
                verdict: None,
                owner: *owner,
                template: template.clone(),
            }),
            _ => None,
        };
        let change = match (event, &made) {
            (_, Some(rec)) => Some(RecordChange::Add(rec)),
            (Event::Deleted { name }, _) => Some(RecordChange::Remove(name)),
            _ => None,
        };
        if let Err(e) = self.store.record_with(event, now, change) {
            tracing::error!(error = %e, "cannot record an event");
        }
        let bookkeeping = match event {
            Event::Renamed { name, from } => self.store.rename_sandbox(from, name),
            Event::Stopped { name } => self.store.clear_verdict(name),
            _ => Ok(()),
        };
        if let Err(e) = bookkeeping {
            tracing::error!(error = %e, "cannot update the sandbox record");
        }
    }

    /// Verify the running sandbox `name` of `service`'s backend; on a
    /// failure, stop it (fail closed) and say so in the report's `action`.
    pub async fn verify_named(
        &self,
        service: &crate::SandboxService,
        name: &str,
    ) -> Result<Report, ServiceError> {
        let sandbox = service.open(name).await?;
        let mut report = self.verify(sandbox.as_ref()).await.map_err(verify_error)?;
        if !report.passed {
            report.action = Some(self.stop_failed(sandbox.as_ref(), &report).await.action());
        }
        Ok(report)
    }
}

/// A verification that could not run, as a service error.
pub fn verify_error(e: VerifyError) -> ServiceError {
    match e {
        VerifyError::Provider(p) => ServiceError::Provider(p),
        other => ServiceError::Verify(Box::new(other)),
    }
}

#[async_trait]
impl Hooks for Verifier {
    async fn before_handout(
        &self,
        sandbox: &dyn Sandbox,
        info: &SandboxInfo,
    ) -> Result<(), HookError> {
        if info.profile.is_none() {
            return Ok(());
        }
        let refuse = |reason: String| HookError {
            check: CHECK.to_owned(),
            sandbox: info.name.to_string(),
            reason,
        };
        match self.verify(sandbox).await {
            Ok(report) if report.passed => Ok(()),
            Ok(report) => {
                self.record_now(&Event::Alert {
                    name: report.sandbox.clone(),
                    reason: format!(
                        "verification failed before hand-out ({}); corral disposes of it",
                        report.event.message
                    ),
                });
                Err(refuse(report.event.message))
            }
            Err(e) => {
                let why = crate::error::chain(&e);
                self.record_now(&Event::Alert {
                    name: info.name.to_string(),
                    reason: format!("verification could not run ({why}); corral disposes of it"),
                });
                Err(refuse(format!("verification could not run: {why}")))
            }
        }
    }

    async fn record(&self, event: &Event) {
        // The commit syncs to disk: off the async threads, so whatever the
        // caller runs beside it (a fresh sandbox's start) goes on meanwhile.
        let (this, event) = (self.clone(), event.clone());
        if let Err(e) = tokio::task::spawn_blocking(move || this.record_now(&event)).await {
            tracing::error!(error = %e, "cannot record an event");
        }
    }
}
