//! `corral rm NAME…`: delete sandboxes. Destructive, so it asks on a
//! terminal; without a terminal it needs `--force` (else exit 2, nothing
//! deleted).

use super::confirm::destructive;
use super::context::service;
use super::many;
use crate::args::RmArgs;
use crate::error::{CmdResult, Outcome};
use crate::output::Output;

/// Delete.
pub fn run(args: &RmArgs, out: Output) -> CmdResult {
    let names = args.names.join(", ");
    let question = format!(
        "delete {names} and {} snapshots? This cannot be undone.",
        if args.names.len() == 1 {
            "its"
        } else {
            "their"
        }
    );
    if !destructive(args.force, &format!("delete {names}"), &question)? {
        out.info("nothing deleted");
        return Ok(Outcome::Failed);
    }
    let (svc, rt) = service(&args.ctx)?;
    many::each(
        &out,
        &rt,
        "rm",
        "deleted",
        &many::Asked::named(&args.names),
        args.json,
        |name| {
            let svc = svc.clone();
            async move { svc.delete(&name).await.map(|()| None) }
        },
    )
}
