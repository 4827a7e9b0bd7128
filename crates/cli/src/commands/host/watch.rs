//! `corral host watch`: the kernel watch, the gateway supervisor, the
//! Incus start watcher and the reaper of lifetimes in the foreground (what corrald runs in the
//! background), logging each detection and reaction, until SIGINT or
//! SIGTERM.

use std::sync::Arc;

use corral_sandbox_core::SandboxKind;
use corral_service::watch::{Affected, Check, NoSandboxes, Outcome, ServiceSandboxes, Watcher};
use corral_service::{Backend, SandboxService, Settings, Store, Verifier, WallClock};

use super::context;
use crate::args::HostArgs;
use crate::error::{CliError, CmdResult, Outcome as Exit};
use crate::output::{Output, Style};

/// Watch until a signal.
pub fn run(args: &HostArgs, out: Output) -> CmdResult {
    let loaded = context::load_config(&args.source)?;
    let service = context::service(
        "watch",
        &loaded,
        args.netns.as_deref(),
        args.state_dir.as_deref(),
    )?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| {
            CliError::failure(anyhow::Error::new(e).context("cannot start the async runtime"))
        })?;
    let settings = Settings::new(
        loaded.clone(),
        args.netns.clone(),
        args.state_dir.as_deref(),
    );
    // Gateways restarted when they die, for as long as the watch runs.
    let gateways = match Store::open(&settings.state_dir).map(Arc::new) {
        Ok(store) => {
            let _in_runtime = runtime.enter();
            match corral_service::supervise::GatewaySupervisor::new(
                &settings.state_dir,
                args.netns.as_deref(),
                store,
            ) {
                Ok(s) => Some(s.spawn()),
                Err(e) => {
                    tracing::warn!(error = %e, "gateway supervisor: not running");
                    None
                }
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "no store: gateways are not supervised");
            None
        }
    };
    let local = local(&loaded, settings, args);
    // Starts behind corral's back (an admin's `incus start`) put through
    // the gate and the canary, as corrald does.
    let mut starts = match &local {
        Some(l) => match runtime.block_on(l.service.backend().incus_providers()) {
            Ok(Some(providers)) => {
                let _in_runtime = runtime.enter();
                Some(
                    corral_service::supervise::IncusStartWatcher::new(
                        Arc::new(l.service.clone()),
                        Arc::clone(&l.store),
                        providers,
                    )
                    .spawn(),
                )
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(error = %e, "start watcher: not running");
                None
            }
        },
        None => None,
    };
    // Lifetimes (`corral new --ttl`, `--idle-stop`) enforced, as corrald
    // does.
    let reaper = local.as_ref().map(|l| {
        runtime.spawn(
            corral_service::lifetimes::reaper::Reaper::new(l.verifier.clone(), l.service.clone())
                .run(),
        )
    });
    let sandboxes: Arc<dyn Affected> = match local {
        Some(l) => Arc::new(ServiceSandboxes::with_canary(
            l.service,
            l.verifier,
            runtime.handle().clone(),
        )),
        None => Arc::new(NoSandboxes),
    };
    let watcher = Watcher::new(service, sandboxes).map_err(CliError::failure)?;
    let stop = watcher.stop_handle();
    runtime.spawn(async move {
        wait_for_signal().await;
        stop.stop();
    });
    if let Some(s) = starts.as_mut() {
        runtime.block_on(s.subscribed());
        out.info("judging Incus starts corral did not make (gate, topology, canary)");
    }
    out.info(&format!(
        "watching {} (stop with Ctrl-C)",
        args.netns.as_deref().unwrap_or("this host")
    ));
    let watched = watcher.run(|c| report(&out, c));
    if let Some(g) = gateways {
        runtime.block_on(g.stop());
    }
    if let Some(s) = starts {
        runtime.block_on(s.stop());
    }
    if let Some(r) = reaper {
        r.abort();
    }
    watched.map_err(CliError::failure)?;
    Ok(Exit::Ok)
}

/// The local backend's sandboxes: what a cut stops, a heal re-verifies
/// and the start watcher judges.
struct Local {
    service: SandboxService,
    verifier: Verifier,
    store: Arc<Store>,
}

/// The local backend with the canary as its hooks; `None` (said in the
/// log) when there is no backend or no store: then a cut sets ports down
/// and stops nothing.
fn local(
    loaded: &corral_service::LoadedConfig,
    settings: Settings,
    args: &HostArgs,
) -> Option<Local> {
    let backend = match Backend::select(
        std::env::consts::OS,
        SandboxKind::Incus,
        &loaded.config.host,
        args.incus_socket.clone(),
    ) {
        Ok(b) => b.with_profiles(&loaded.config.profiles),
        Err(e) => {
            tracing::warn!(error = %e, "no sandbox backend: a cut sets ports down and stops nothing");
            return None;
        }
    };
    let store = match Store::open(&settings.state_dir) {
        Ok(s) => Arc::new(s),
        Err(e) => {
            tracing::warn!(error = %e, "no store: a cut sets ports down and stops nothing");
            return None;
        }
    };
    let settings = Arc::new(settings);
    let backend = Arc::new(backend.with_user_projects(Arc::clone(&store) as _));
    let verifier = Verifier::new(
        Arc::clone(&settings),
        Arc::clone(&store),
        Arc::new(WallClock),
    )
    .with_backend(Arc::clone(&backend));
    let service = SandboxService::new(settings, backend).with_hooks(Arc::new(verifier.clone()));
    Some(Local {
        service,
        verifier,
        store,
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(mut term), Ok(mut int)) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
        }
        _ => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// One line per read-back that found something (and the first one).
fn report(out: &Output, c: &Check) {
    let why = &c.trigger;
    match &c.outcome {
        Outcome::Clean { ignored } => {
            tracing::debug!(trigger = %why, events = c.events, ignored, "read back: clean");
            if matches!(why, corral_service::watch::Trigger::Start) {
                out.info(&format!(
                    "{} the host enforces what was applied",
                    out.paint(Style::Good, "ok")
                ));
            }
        }
        Outcome::NothingApplied => {
            tracing::info!(trigger = %why, "nothing applied yet; nothing to hold");
        }
        Outcome::Healed {
            profiles,
            drift,
            ms,
        } => {
            tracing::warn!(trigger = %why, profiles = profiles.join(","), ms, "drift healed");
            out.data(&format!(
                "{} ({why}): {} — re-applied in {ms} ms; profiles {}",
                out.paint(Style::Bad, "drift healed"),
                drift.join("; "),
                profiles.join(", ")
            ));
        }
        Outcome::Cut {
            profiles,
            drift,
            heal_error,
            ports,
            stopped,
            ms,
        } => {
            tracing::error!(trigger = %why, profiles = profiles.join(","), ms, "drift: cut");
            out.data(&format!(
                "{} ({why}): {}{} — {} port(s) down in {ms} ms; profiles {}",
                out.paint(Style::Bad, "drift CUT"),
                drift.join("; "),
                heal_error
                    .as_ref()
                    .map(|e| format!(" (heal failed: {e})"))
                    .unwrap_or_default(),
                ports.iter().filter(|p| p.error.is_none()).count(),
                profiles.join(", ")
            ));
            for p in ports.iter().filter(|p| p.error.is_some()) {
                out.data(&format!(
                    "  port {} on {}: NOT down: {}",
                    p.port,
                    p.bridge,
                    p.error.as_deref().unwrap_or_default()
                ));
            }
            for s in stopped {
                out.data(&format!(
                    "  sandbox {}: {}",
                    s.sandbox,
                    s.error
                        .as_ref()
                        .map_or("stopped".to_owned(), |e| format!("not stopped: {e}"))
                ));
            }
        }
        Outcome::StillCut { profiles } => {
            tracing::warn!(trigger = %why, profiles = profiles.join(","), "still cut");
        }
        Outcome::Failed(e) => {
            tracing::error!(trigger = %why, "read-back failed: {e}");
            out.data(&format!(
                "{} read-back failed: {e}",
                out.paint(Style::Bad, "error")
            ));
        }
    }
}
