//! `corral host apply` and `corral host refresh`: change the live state,
//! then record what was applied so `status`, `verify` and `refresh` can
//! recompute the same plan.

use corral_egress::host::{ApplyReport, HostError, StateStore};
use corral_egress::link::BridgeOutcome;
use corral_egress::plan::HostPlan;
use corral_gateway::GatewayReport;
use corral_state_files::StateLock;
use serde::Serialize;

use super::context::{self, Planned};
use super::render::{count, drift_table};
use crate::args::HostArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, Table, print_json};

/// `corral host apply --json` (schema in docs/json-schema.md).
#[derive(Debug, Serialize)]
struct ApplyJson<'a> {
    schema: &'static str,
    source: &'a str,
    netns: Option<&'a str>,
    state_file: String,
    gateways: &'a [GatewayReport],
    #[serde(flatten)]
    report: &'a ApplyReport,
}

/// `corral host refresh --json` (schema in docs/json-schema.md).
#[derive(Debug, Serialize)]
struct RefreshJson<'a> {
    schema: &'static str,
    netns: Option<&'a str>,
    state_file: String,
    sets: Vec<String>,
    added: usize,
    removed: usize,
    changed: bool,
}

/// An apply or refresh failed; drift after the change gets its own table.
fn host_failure(out: &Output, what: &str, e: HostError) -> CliError {
    if let HostError::NotEnforced(drift) = &e {
        out.table(&drift_table(out, drift), true);
    }
    CliError::failure(anyhow::Error::new(e).context(what.to_owned()))
}

/// The state directory's host lock: an apply and a (timed) refresh never
/// interleave; the second waits for the first.
pub(super) fn host_lock(store: &StateStore) -> Result<StateLock, CliError> {
    store
        .lock()
        .map_err(|e| CliError::failure(anyhow::Error::new(e).context("cannot take the host lock")))
}

/// Apply the configured profiles.
pub fn run(args: &HostArgs, out: Output) -> CmdResult {
    let (config, origin) = context::load_config(&args.source)?;
    let planned: Planned = context::plan_config(config, origin)?;
    let target = context::target("apply", args.netns.as_deref())?;
    let store = context::state_store(
        args.state_dir.as_ref(),
        &planned.config,
        args.netns.as_deref(),
    );
    let _lock = host_lock(&store)?;
    let progress = out.progress(&format!("applying to {}", target.describe()));
    let result = target.host.apply(&planned.plan);
    drop(progress);
    let report =
        result.map_err(|e| host_failure(&out, &format!("applying to {}", target.describe()), e))?;
    store.save(&planned.inputs()).map_err(|e| {
        CliError::failure(anyhow::Error::new(e).context(
            "the ruleset is applied, but recording it failed; status, verify and refresh will not know it",
        ))
    })?;
    // After the apply: dnsmasq binds the gateway addresses and fills the
    // DNS sets the apply just created.
    let gateways = corral_gateway::start_for_host(
        &target.host,
        store.dir(),
        &planned.config.profiles,
        &planned.config.host,
    )
    .map_err(|e| {
            CliError::failure(anyhow::Error::new(e).context(
                "the ruleset is applied (sandboxes can reach only what it allows), but the gateway DHCP/DNS services did not start",
            ))
        })?;
    if args.json {
        print_json(&ApplyJson {
            schema: "corral.host-apply.v1",
            source: &planned.origin,
            netns: target.netns.as_deref(),
            state_file: store.path().display().to_string(),
            gateways: &gateways,
            report: &report,
        })?;
        return Ok(Outcome::Ok);
    }
    out.info(&format!(
        "{} {} from {} in {} ms: {}, {}, {}; read back: matches the plan",
        out.paint(Style::Good, "applied"),
        target.describe(),
        planned.origin,
        report.ms,
        count(report.bridges.len(), "bridge", "bridges"),
        count(report.rules, "rule", "rules"),
        count(report.set_elements, "set element", "set elements"),
    ));
    let mut table = Table::new(["bridge", "profile", "bridge was"]);
    for b in &report.bridges {
        table.row([
            b.name.clone(),
            b.profile.clone(),
            match b.outcome {
                BridgeOutcome::Created => "created (corral's, stamped)",
                BridgeOutcome::Managed => "already corral's",
                BridgeOutcome::Adopted => "adopted (never deleted by teardown)",
            }
            .to_owned(),
        ]);
    }
    out.table(&table, false);
    let mut table = Table::new(["bridge", "gateway (dnsmasq)"]);
    for g in &gateways {
        table.row([g.bridge.clone(), format!("running (pid {})", g.pid)]);
    }
    out.table(&table, false);
    Ok(Outcome::Ok)
}

/// Re-resolve host names and update set elements in place.
pub fn refresh(args: &HostArgs, out: Output) -> CmdResult {
    let (config, origin) = context::load_config(&args.source)?;
    let target = context::target("refresh", args.netns.as_deref())?;
    let store = context::state_store(args.state_dir.as_ref(), &config, args.netns.as_deref());
    // Held from reading the applied plan to recording the new one, so an
    // apply in between is never undone by this refresh's stale plan.
    let _lock = host_lock(&store)?;
    let stored = store
        .load_plan()
        .map_err(|e| CliError::failure(anyhow::Error::new(e)))?;
    let Some((applied_config, old)): Option<(_, HostPlan)> = stored else {
        return Err(CliError::failure(anyhow::anyhow!(
            "nothing has been applied to {} yet (no {}); run `corral host apply` first",
            target.describe(),
            store.path().display()
        )));
    };
    // An explicit file replaces the applied configuration; otherwise the
    // applied one is re-resolved as it stands.
    let (config, origin) = if context::explicit(&args.source) {
        (config, origin)
    } else {
        (applied_config, "what was applied".to_owned())
    };
    let new = context::plan_config(config, origin)?;
    let report = target
        .host
        .refresh(&old, &new.plan)
        .map_err(|e| host_failure(&out, &format!("refreshing {}", target.describe()), e))?;
    store.save(&new.inputs()).map_err(|e| {
        CliError::failure(
            anyhow::Error::new(e).context("the sets are refreshed, but recording it failed"),
        )
    })?;
    if args.json {
        print_json(&RefreshJson {
            schema: "corral.host-refresh.v1",
            netns: target.netns.as_deref(),
            state_file: store.path().display().to_string(),
            changed: report.batch.is_some(),
            sets: report.sets,
            added: report.added,
            removed: report.removed,
        })?;
        return Ok(Outcome::Ok);
    }
    if report.batch.is_none() {
        out.info(&format!(
            "{}: every allowlisted name resolves as before",
            target.describe()
        ));
    } else {
        out.info(&format!(
            "{} {}: {} added, {} removed in {} ({})",
            out.paint(Style::Good, "refreshed"),
            target.describe(),
            count(report.added, "range", "ranges"),
            report.removed,
            count(report.sets.len(), "set", "sets"),
            report.sets.join(", ")
        ));
    }
    Ok(Outcome::Ok)
}
