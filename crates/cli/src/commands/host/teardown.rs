//! `corral host teardown`: remove corral's tables and the bridges corral
//! created; never an adopted bridge or another tool's table. Refused while
//! a sandbox is attached to one of corral's bridges (it would lose its
//! network, or keep it without rules), unless `--force`.

use corral_egress::host::TeardownReport;
use corral_sandbox_core::config::Config;
use corral_service::{LoadedConfig, Origin};
use serde::Serialize;

use corral_service::host::wiring::Attached;

use super::context;
use crate::args::TeardownArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

/// `corral host teardown --json` (schema in docs/json-schema.md).
#[derive(Debug, Serialize)]
struct TeardownJson<'a> {
    schema: &'static str,
    netns: Option<&'a str>,
    state_file: String,
    /// Sandboxes still attached when `--force` went ahead.
    forced_past: &'a [Attached],
    #[serde(flatten)]
    report: &'a TeardownReport,
}

/// Tear down and report every failure.
pub fn run(args: &TeardownArgs, out: Output) -> CmdResult {
    let host = &args.host;
    let named = host.source.config.is_some() || host.source.networks_conf.is_some();
    // The state directory and the bridges are what is needed from the
    // configuration; a broken default config file must not stand in the
    // way of removing corral (one named on the command line must load).
    let loaded = match context::load_config(&host.source) {
        Ok(loaded) => loaded,
        Err(e) if named => return Err(e),
        Err(e) => {
            tracing::warn!("{}; using the default state directory", e.error);
            LoadedConfig {
                config: Config::builtin_default(),
                origin: Origin::Builtin,
            }
        }
    };
    let service = context::service(
        "teardown",
        &loaded,
        host.netns.as_deref(),
        host.state_dir.as_deref(),
    )?;
    let target = service.target();
    let live: Vec<Attached> = match context::wiring(
        &loaded,
        host.netns.as_deref(),
        &host.incus_socket,
    ) {
        Ok(Ok(wiring)) => wiring.live().cloned().collect(),
        Ok(Err(_not_looked)) => Vec::new(),
        Err(e) if args.force => {
            tracing::warn!("cannot tell which sandboxes are attached ({e:#}); --force");
            Vec::new()
        }
        Err(e) => {
            return Err(CliError::failure(e.context(
                    "cannot tell which sandboxes are attached to corral's bridges; nothing was torn down (--force tears down anyway)",
                )));
        }
    };
    if !live.is_empty() && !args.force {
        return Err(CliError::failure(anyhow::anyhow!(
            "{} sandbox(es) attached to corral's bridges would lose their network and its rules; nothing was torn down. Stop or remove them (or pass --force):\n  {}",
            live.len(),
            live.iter()
                .map(|a| format!("{} on {}", a.name, a.bridge))
                .collect::<Vec<_>>()
                .join("\n  ")
        )));
    }
    for a in &live {
        tracing::warn!(
            "--force: `{}` is attached to {} and loses its network",
            a.name,
            a.bridge
        );
    }
    let report = service.teardown().map_err(|e| {
        CliError::failure(
            anyhow::Error::new(e).context(format!("tearing down {}", target.describe())),
        )
    })?;
    if host.json {
        print_json(&TeardownJson {
            schema: "corral.host-teardown.v1",
            netns: target.netns.as_deref(),
            state_file: service.store().path().display().to_string(),
            forced_past: &live,
            report: &report,
        })?;
    } else if report.is_clean() {
        out.info(&format!(
            "{} {}: corral's tables deleted; bridges deleted: {}",
            out.paint(Style::Good, "torn down"),
            target.describe(),
            if report.bridges_deleted.is_empty() {
                "none".to_owned()
            } else {
                report.bridges_deleted.join(", ")
            }
        ));
        for g in &report.gateways_stopped {
            out.info(&format!(
                "stopped a gateway no state directory recorded: {g}"
            ));
        }
    }
    if report.is_clean() {
        Ok(Outcome::Ok)
    } else {
        Err(CliError::failure(anyhow::anyhow!(
            "teardown of {} finished with {} error(s):\n  {}",
            target.describe(),
            report.errors.len(),
            report.errors.join("\n  ")
        )))
    }
}
