//! `corral host verify`: every difference between the plan and the live
//! state; exit 1 when there is any.

use super::context;
use super::render::{count, drift_table};
use crate::args::HostArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, print_json};
use corral_service::reports::VerifyReport;

/// Compare and report.
pub fn run(args: &HostArgs, out: Output) -> CmdResult {
    let loaded = context::load_config(&args.source)?;
    let service = context::service(
        "verify",
        &loaded,
        args.netns.as_deref(),
        args.state_dir.as_deref(),
    )?;
    let target = service.target();
    let planned = context::plan_to_check(loaded, &args.source, &service)?;
    let drift = service.verify(&planned).map_err(|e| {
        CliError::failure(anyhow::Error::new(e).context(format!("verifying {}", target.describe())))
    })?;
    let outcome = if drift.is_empty() {
        Outcome::Ok
    } else {
        Outcome::Failed
    };
    if args.json {
        print_json(&VerifyReport::new(&planned, target.netns.clone(), &drift))?;
        return Ok(outcome);
    }
    if drift.is_empty() {
        out.info(&format!(
            "{} {} enforces exactly the plan from {}",
            out.paint(Style::Good, "ok"),
            target.describe(),
            planned.origin
        ));
    } else {
        out.table(&drift_table(&out, &drift), true);
        out.data(&format!(
            "{} {}: {} from the plan from {}; `corral host apply` restores it",
            out.paint(Style::Bad, "drift"),
            target.describe(),
            count(drift.len(), "difference", "differences"),
            planned.origin
        ));
    }
    Ok(outcome)
}
