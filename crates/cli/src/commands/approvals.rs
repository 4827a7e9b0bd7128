//! `corral approvals`, `corral approve ID` and `corral deny ID`: the
//! lookups corral's resolver holds for the operator (`approvals = "ask"`),
//! read from and decided in the gateway directories under the state
//! directory (`corral_gateway::approvals`). Root only: the directories are
//! root's, and a decision opens a destination to a sandbox.

use std::time::{SystemTime, UNIX_EPOCH};

use corral_gateway::approvals::{self, ApprovalError, Decision, Request};
use serde::Serialize;

use crate::args::{ApprovalsArgs, DecideArgs};
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, print_json};

fn root_only(verb: &str) -> Result<(), CliError> {
    if corral_service::callers::current_uid() == 0 {
        Ok(())
    } else {
        Err(CliError::failure(anyhow::anyhow!(
            "`corral {verb}` is for admins: the held lookups are root's, and a decision opens a destination to a sandbox; run it as root (`sudo corral {verb} …`)"
        )))
    }
}

#[derive(Serialize)]
struct Listed<'a> {
    schema: &'static str,
    approvals: &'a [Request],
}

#[derive(Serialize)]
struct Decided<'a> {
    schema: &'static str,
    decision: Decision,
    request: &'a Request,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The held lookups, oldest first.
pub fn list(args: &ApprovalsArgs, out: Output) -> CmdResult {
    root_only("approvals")?;
    let (settings, _store) = crate::commands::sandbox::store(&args.ctx)?;
    let pending = approvals::pending(&settings.state_dir);
    if args.json {
        print_json(&Listed {
            schema: "corral.approvals.v1",
            approvals: &pending,
        })?;
        return Ok(Outcome::Ok);
    }
    if pending.is_empty() {
        out.data("no lookup waits for approval");
        return Ok(Outcome::Ok);
    }
    let now = now();
    out.data(&format!(
        "{:<16}  {:<12}  {:<24}  {:>5}  NAME",
        "ID", "PROFILE", "SANDBOX ADDRESS", "LEFT"
    ));
    for r in &pending {
        out.data(&format!(
            "{:<16}  {:<12}  {:<24}  {:>4}s  {}",
            r.id,
            r.profile,
            r.asker,
            r.expires_at.saturating_sub(now),
            r.name
        ));
    }
    out.info("approve with `corral approve ID`, refuse with `corral deny ID`");
    Ok(Outcome::Ok)
}

/// Approve or deny one held lookup.
pub fn decide(args: &DecideArgs, decision: Decision, out: Output) -> CmdResult {
    let verb = match decision {
        Decision::Once => "approve",
        Decision::Deny => "deny",
    };
    root_only(verb)?;
    let (settings, _store) = crate::commands::sandbox::store(&args.ctx)?;
    let request =
        approvals::decide(&settings.state_dir, &args.id, decision).map_err(|e| match e {
            ApprovalError::NotFound { .. } => CliError::usage(e),
            ApprovalError::Write { .. } => CliError::failure(e),
        })?;
    if args.json {
        print_json(&Decided {
            schema: "corral.approval-decision.v1",
            decision,
            request: &request,
        })?;
    } else {
        out.data(&match decision {
            Decision::Once => format!(
                "approved `{}` for {} (profile {}): its held lookup is answered, and its addresses open to that sandbox alone for their TTL",
                request.name, request.asker, request.profile
            ),
            Decision::Deny => format!(
                "denied `{}` for {} (profile {}): its held lookup gets NXDOMAIN saying so",
                request.name, request.asker, request.profile
            ),
        });
    }
    Ok(Outcome::Ok)
}
