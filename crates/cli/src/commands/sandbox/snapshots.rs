//! `corral snapshot NAME [LABEL]` and `corral restore NAME SNAP`. A
//! restore discards what changed since the snapshot, so it asks first
//! (`--force` without a terminal); a running sandbox restarts into the
//! snapshot through the start gate and the canary.

use std::time::Duration;

use corral_service::shapes::{SandboxRestore, SandboxSnapshot};

use super::confirm::destructive;
use super::context::{fail, service};
use super::render;
use crate::args::{RestoreArgs, SnapshotArgs};
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

/// Take a snapshot.
pub fn snapshot(args: &SnapshotArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let progress = out.progress(&format!("snapshotting {}", args.name));
    let result = rt.block_on(svc.snapshot(&args.name, args.label.as_deref()));
    drop(progress);
    let snap = result.map_err(fail)?;
    if args.json {
        print_json(&SandboxSnapshot::new(&args.name, snap))?;
    } else {
        out.data(&format!(
            "{} {}/{}{}",
            out.paint(Style::Good, "snapshot"),
            args.name,
            snap.name,
            snap.created
                .as_deref()
                .map_or_else(String::new, |c| format!(" ({c})"))
        ));
    }
    Ok(Outcome::Ok)
}

/// Restore a snapshot.
pub fn restore(args: &RestoreArgs, out: Output) -> CmdResult {
    let what = format!("restore {} to snapshot {}", args.name, args.snapshot);
    let question = format!(
        "{what}? What changed in it since the snapshot is lost; a running sandbox restarts."
    );
    if !destructive(args.force, &what, &question)? {
        out.info("nothing restored");
        return Ok(Outcome::Failed);
    }
    let (svc, rt) = service(&args.ctx)?;
    let progress = out.progress(&format!("restoring {}", args.name));
    let result = rt.block_on(svc.restore(
        &args.name,
        &args.snapshot,
        Duration::from_secs(args.timeout),
    ));
    drop(progress);
    let made = result.map_err(fail)?;
    if args.json {
        print_json(&SandboxRestore::new(&args.snapshot, made))?;
        return Ok(Outcome::Ok);
    }
    out.data(&format!(
        "{} {} to snapshot {}; it is {}",
        out.paint(Style::Good, "restored"),
        args.name,
        args.snapshot,
        render::state(&out, made.info.state)
    ));
    render::handed_out(&out, &made);
    Ok(Outcome::Ok)
}
