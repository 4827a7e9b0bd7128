//! `corral host teardown`: remove corral's tables and the bridges corral
//! created; never an adopted bridge or another tool's table.

use corral_egress::host::TeardownReport;
use corral_sandbox_core::config::Config;
use corral_service::{LoadedConfig, Origin};
use serde::Serialize;

use super::context;
use crate::args::{ConfigSource, TeardownArgs};
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

/// `corral host teardown --json` (schema in docs/json-schema.md).
#[derive(Debug, Serialize)]
struct TeardownJson<'a> {
    schema: &'static str,
    netns: Option<&'a str>,
    state_file: String,
    #[serde(flatten)]
    report: &'a TeardownReport,
}

/// Tear down and report every failure.
pub fn run(args: &TeardownArgs, out: Output) -> CmdResult {
    // Only the state directory is needed from the configuration; a broken
    // config file must not stand in the way of removing corral.
    let loaded = match context::load_config(&ConfigSource {
        config: None,
        networks_conf: None,
    }) {
        Ok(loaded) => loaded,
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
        args.netns.as_deref(),
        args.state_dir.as_deref(),
    )?;
    let target = service.target();
    let report = service.teardown().map_err(|e| {
        CliError::failure(
            anyhow::Error::new(e).context(format!("tearing down {}", target.describe())),
        )
    })?;
    if args.json {
        print_json(&TeardownJson {
            schema: "corral.host-teardown.v1",
            netns: target.netns.as_deref(),
            state_file: service.store().path().display().to_string(),
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
