//! `corral host apply` and `corral host refresh`: the service changes the
//! live state and records what was applied; this module renders it.

use corral_egress::host::{ApplyReport, HostError, PortReport};
use corral_egress::link::BridgeOutcome;
use corral_gateway::{Change, GatewayReport};
use corral_service::host::{ApplyError, Planned, RefreshError};
use serde::Serialize;

use super::context;
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
    revoked: &'a corral_egress::host::RevokeReport,
    ports: &'a [PortReport],
}

/// An apply or refresh failed; drift after the change gets its own table.
fn host_failure(out: &Output, e: &HostError) {
    match e {
        HostError::NotEnforced(drift) => out.table(&drift_table(out, drift), true),
        HostError::AfterCommit { cause, .. } => host_failure(out, cause),
        _ => {}
    }
}

/// Apply the configured profiles (`force`: even when that removes a
/// bridge with sandboxes attached, cutting their ports).
pub fn run(args: &HostArgs, force: bool, out: Output) -> CmdResult {
    let loaded = context::load_config(&args.source)?;
    let planned: Planned = context::plan_config(loaded.clone())?;
    let service = context::service(
        "apply",
        &loaded,
        args.netns.as_deref(),
        args.state_dir.as_deref(),
    )?;
    let target = service.target().describe();
    let progress = out.progress(&format!("applying to {target}"));
    let result = service.apply_forcing(&planned, force);
    drop(progress);
    let applied = result.map_err(|e| {
        if let ApplyError::Host { source, .. } = &e {
            host_failure(&out, source);
        }
        CliError::failure(e)
    })?;
    let (report, gateways) = (&applied.report, &applied.gateways);
    if args.json {
        print_json(&ApplyJson {
            schema: "corral.host-apply.v1",
            source: &planned.origin,
            netns: service.target().netns.as_deref(),
            state_file: applied.state_file.display().to_string(),
            gateways,
            report,
        })?;
        return Ok(Outcome::Ok);
    }
    out.info(&format!(
        "{} {} from {} in {} ms: {}, {}, {}; read back: matches the plan",
        out.paint(Style::Good, "applied"),
        target,
        planned.origin,
        report.ms,
        count(report.bridges.len(), "bridge", "bridges"),
        count(report.rules, "rule", "rules"),
        count(report.set_elements, "set element", "set elements"),
    ));
    // A host of many profiles: what changed, and counts for the rest
    // (`--json` stays complete).
    let wide = report.bridges.len() > SUMMARISE_ABOVE;
    if wide {
        let n = |o: BridgeOutcome| report.bridges.iter().filter(|b| b.outcome == o).count();
        let g = |c: Change| gateways.iter().filter(|x| x.change == c).count();
        out.info(&format!(
            "bridges: {} created, {} already corral's, {} adopted; gateways: {} started, {} restarted, {} kept, {} served by corral's gateway",
            n(BridgeOutcome::Created),
            n(BridgeOutcome::Managed),
            n(BridgeOutcome::Adopted),
            g(Change::Started),
            g(Change::Restarted),
            g(Change::Kept),
            g(Change::Hosted)
        ));
    }
    let mut table = Table::new(["bridge", "profile", "bridge was"]);
    for b in report
        .bridges
        .iter()
        .filter(|b| !wide || b.outcome == BridgeOutcome::Created)
    {
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
    if !table.is_empty() {
        out.table(&table, false);
    }
    let mut table = Table::new(["removed bridge", "what became of it", "ports cut"]);
    for b in &report.removed {
        table.row([
            b.name.clone(),
            if b.deleted {
                "deleted, gateway stopped"
            } else {
                "adopted: kept, left corral's group, gateway stopped"
            }
            .to_owned(),
            if b.cut.is_empty() {
                "none".to_owned()
            } else {
                b.cut.join(", ")
            },
        ]);
    }
    if !table.is_empty() {
        out.table(&table, false);
    }
    let mut table = Table::new(["bridge", "gateway (dnsmasq)"]);
    for g in gateways
        .iter()
        .filter(|g| !wide || !matches!(g.change, Change::Kept | Change::Hosted))
    {
        let change = match g.change {
            Change::Started => "started",
            Change::Restarted => "restarted",
            Change::Kept => "kept",
            Change::Hosted => "",
        };
        let state = match g.pid {
            Some(pid) => format!("running (pid {pid}, {change})"),
            None => "none: corral's gateway serves it (corrald or `corral host watch`)".to_owned(),
        };
        table.row([g.bridge.clone(), state]);
    }
    if !table.is_empty() {
        out.table(&table, false);
    }
    Ok(Outcome::Ok)
}

/// Above this many profiles the human output lists only what changed.
const SUMMARISE_ABOVE: usize = 20;

/// Re-resolve host names and update set elements in place.
pub fn refresh(args: &HostArgs, out: Output) -> CmdResult {
    let loaded = context::load_config(&args.source)?;
    let service = context::service(
        "refresh",
        &loaded,
        args.netns.as_deref(),
        args.state_dir.as_deref(),
    )?;
    // An explicit file replaces the applied configuration; otherwise the
    // applied one is re-resolved as it stands.
    let explicit = args.source.to_service().is_explicit().then_some(loaded);
    let (_, refreshed) = service.refresh(explicit).map_err(|e| match e {
        RefreshError::Host { ref source, .. } => {
            host_failure(&out, source);
            CliError::failure(e)
        }
        RefreshError::Planning(p) => context::planning_error(p),
        other => CliError::failure(other),
    })?;
    let report = refreshed.report;
    let ports = refreshed.ports;
    let target = service.target().describe();
    if args.json {
        print_json(&RefreshJson {
            schema: "corral.host-refresh.v1",
            netns: service.target().netns.as_deref(),
            state_file: refreshed.state_file.display().to_string(),
            changed: report.batch.is_some(),
            sets: report.sets,
            added: report.added,
            removed: report.removed,
            revoked: &refreshed.revoked,
            ports: &ports,
        })?;
        return Ok(Outcome::Ok);
    }
    let quarantined = ports.iter().filter(|p| !p.bound).count();
    if quarantined > 0 {
        out.info(&format!(
            "{target}: {} without a binding, quarantined (DHCP requests only)",
            count(quarantined, "port", "ports")
        ));
    }
    if !refreshed.revoked.deleted.is_empty() {
        out.info(&format!(
            "revoked {} tracked flow(s) the refreshed plan no longer allows",
            refreshed.revoked.deleted.len()
        ));
    }
    if report.batch.is_none() {
        out.info(&format!(
            "{target}: every allowlisted name resolves as before"
        ));
    } else {
        out.info(&format!(
            "{} {}: {} added, {} removed in {} ({})",
            out.paint(Style::Good, "refreshed"),
            target,
            count(report.added, "range", "ranges"),
            report.removed,
            count(report.sets.len(), "set", "sets"),
            report.sets.join(", ")
        ));
    }
    Ok(Outcome::Ok)
}
