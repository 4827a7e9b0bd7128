//! `corral host plan` (and `host apply --dry-run`): the nftables ruleset
//! corral would install, and how the live state differs from it. Changes
//! nothing.

use super::context;
use super::render::{count, drift_table};
use crate::args::HostArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, print_json};
use corral_service::reports::PlanReport;

/// Print the plan and its diff against the live state.
pub fn run(args: &HostArgs, out: Output) -> CmdResult {
    let loaded = context::load_config(&args.source)?;
    let planned = context::plan_config(loaded.clone())?;
    let service = context::service(
        "plan",
        &loaded,
        args.netns.as_deref(),
        args.state_dir.as_deref(),
    )?;
    let target = service.target();
    // What apply would enforce: with this target's own networks and routers.
    let planned = service
        .complete(&planned)
        .map_err(context::planning_error)?;
    let drift = service.plan_diff(&planned).map_err(|e| {
        CliError::failure(
            anyhow::Error::new(e).context("reading the live state to compare with the plan"),
        )
    })?;
    let plan = &planned.plan;
    if args.json {
        print_json(&PlanReport::new(&planned, target.netns.clone(), &drift))?;
        return Ok(Outcome::Ok);
    }
    out.info(&format!(
        "# plan for {} from {}: {}, {}, {}",
        target.describe(),
        planned.origin,
        count(plan.bridges.len(), "bridge", "bridges"),
        count(plan.rule_count(), "rule", "rules"),
        count(plan.element_count(), "set element", "set elements"),
    ));
    out.data(&plan.render_nft());
    if drift.is_empty() {
        out.info(&format!(
            "# live state: {}",
            out.paint(Style::Good, "matches this plan")
        ));
    } else {
        out.info(&format!(
            "# live state: {} from this plan; `corral host apply` makes it match:",
            count(drift.len(), "difference", "differences")
        ));
        out.table(&drift_table(&out, &drift), false);
    }
    Ok(Outcome::Ok)
}
