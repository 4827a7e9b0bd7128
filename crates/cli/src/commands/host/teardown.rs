//! `corral host teardown`: remove corral's tables and the bridges corral
//! created; never an adopted bridge or another tool's table.

use corral_egress::host::TeardownReport;
use corral_sandbox_core::config::Config;
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
    let config = match context::load_config(&ConfigSource {
        config: None,
        networks_conf: None,
    }) {
        Ok((config, _)) => config,
        Err(e) => {
            tracing::warn!("{}; using the default state directory", e.error);
            Config::builtin_default()
        }
    };
    let target = context::target("teardown", args.netns.as_deref())?;
    let store = context::state_store(args.state_dir.as_ref(), &config, args.netns.as_deref());
    let _lock = super::apply::host_lock(&store)?;
    // Gateways first: dnsmasq holds the bridges' addresses.
    let gateway_errors = corral_gateway::stop_recorded(store.dir());
    let mut report = target.host.teardown().map_err(|e| {
        CliError::failure(
            anyhow::Error::new(e).context(format!("tearing down {}", target.describe())),
        )
    })?;
    report.errors.extend(
        gateway_errors
            .into_iter()
            .map(|e| format!("stop gateway services: {e}")),
    );
    if report.is_clean()
        && let Err(e) = store.clear()
    {
        report.errors.push(e.to_string());
    }
    if args.json {
        print_json(&TeardownJson {
            schema: "corral.host-teardown.v1",
            netns: target.netns.as_deref(),
            state_file: store.path().display().to_string(),
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
