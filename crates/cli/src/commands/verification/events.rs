//! `corral events`: the event log, oldest first.

use corral_sandbox_core::verify::EventOutcome;
use corral_service::hooks::Event;
use corral_service::store::EventQuery;

use super::utc;
use crate::args::EventsArgs;
use crate::commands::sandbox::store;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, Table, print_json};

/// One line about an event.
pub(crate) fn summary(e: &Event) -> String {
    match e {
        Event::Created {
            kind,
            profile,
            template,
            from,
            ..
        } => format!(
            "{} on {}{}{}",
            kind.map_or_else(|| "sandbox".to_owned(), |k| k.to_string()),
            profile.as_deref().unwrap_or("no network"),
            template
                .as_deref()
                .map_or_else(String::new, |t| format!(", template {t}")),
            from.as_deref()
                .map_or_else(String::new, |f| format!(", copied from {f}")),
        ),
        Event::Snapshotted { snapshot, .. } => format!("snapshot {snapshot}"),
        Event::Restored { snapshot, .. } => format!("restored to snapshot {snapshot}"),
        Event::Renamed { from, .. } => format!("renamed from {from}"),
        Event::Exported { file, bytes, .. } => format!("exported to {file} ({bytes} bytes)"),
        Event::FilePushed { path, bytes, .. } => format!("{path} pushed in ({bytes} bytes)"),
        Event::FilePulled { path, bytes, .. } => format!("{path} pulled out ({bytes} bytes)"),
        Event::Shell { .. } => "interactive shell opened".to_owned(),
        Event::Hatch { args, moved, .. } => format!(
            "incus {}{}",
            args.join(" "),
            if moved.is_empty() {
                String::new()
            } else {
                format!(" (--i-know: {})", moved.join(", "))
            }
        ),
        Event::Started { .. } => "handed out".to_owned(),
        Event::Starting { .. } => "start requested by corral".to_owned(),
        Event::Refused { reason, .. } | Event::Alert { reason, .. } => reason.clone(),
        Event::Stopped { .. } | Event::Deleted { .. } => String::new(),
        Event::Expired { ttl_secs, .. } => {
            format!(
                "time to live ({}) ran out: deleted",
                corral_service::lifetimes::show_secs(*ttl_secs)
            )
        }
        Event::IdleStopped {
            idle_stop_secs,
            idle_secs,
            ..
        } => format!(
            "idle {} (limit {}): stopped",
            corral_service::lifetimes::show_secs(*idle_secs),
            corral_service::lifetimes::show_secs(*idle_stop_secs)
        ),
        Event::MemberDrained { member, reason } => {
            format!("cluster member {member} drained: {reason}")
        }
        Event::MemberRestored { member } => format!("cluster member {member} back in rotation"),
        Event::GatewayDied { bridge, reason, .. } => {
            format!("gateway of bridge {bridge} died: {reason}")
        }
        Event::GatewayRestarted {
            bridge,
            pid,
            attempts,
            down_ms,
            ..
        } => format!(
            "gateway of bridge {bridge} restarted (pid {pid}, {attempts} attempt(s), down {down_ms} ms)"
        ),
        Event::UnmanagedStart { reason, .. } => reason.clone(),
        Event::HostDrift {
            profiles,
            drift,
            reaction,
            ms,
        } => format!(
            "host drift on {} ({}): {reaction} in {ms} ms",
            profiles.join(", "),
            drift.join("; ")
        ),
        Event::Verification(v) => {
            let total: u64 = v.checks.iter().map(|c| c.elapsed_ms).max().unwrap_or(0);
            let outcome = match v.outcome {
                EventOutcome::Passed => "passed",
                EventOutcome::Failed => "FAILED",
                EventOutcome::Refused => "refused",
            };
            format!(
                "{outcome}: {} checks, slowest {} ms — {}",
                v.checks.len(),
                total,
                v.message
            )
        }
    }
}

/// List.
pub fn run(args: &EventsArgs, out: Output) -> CmdResult {
    if args.limit == Some(0) {
        return Err(CliError::usage(anyhow::anyhow!(
            "--limit 0: give at least 1"
        )));
    }
    let (_, db) = store(&args.ctx)?;
    let events = db
        .events(&EventQuery {
            sandbox: args.sandbox.clone(),
            after: args.after,
            limit: args.limit,
        })
        .map_err(|e| CliError::failure(anyhow::Error::new(e)))?;
    if args.json {
        print_json(&corral_service::shapes::EventList::new(events))?;
        return Ok(Outcome::Ok);
    }
    let mut t = Table::new(["id", "time (UTC)", "sandbox", "event", "what"]);
    for e in &events {
        let kind = if e.alert {
            out.paint(Style::Bad, e.event.type_name())
        } else {
            e.event.type_name().to_owned()
        };
        t.row([
            e.id.to_string(),
            utc(e.recorded),
            e.event.sandbox().unwrap_or("-").to_owned(),
            kind,
            summary(&e.event),
        ]);
    }
    out.table(&t, true);
    if events.is_empty() {
        out.info(&format!("no events in {}", db.path().display()));
    }
    Ok(Outcome::Ok)
}
