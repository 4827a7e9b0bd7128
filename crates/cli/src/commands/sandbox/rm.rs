//! `corral rm NAME…`: delete sandboxes. Destructive, so it asks on a
//! terminal; without a terminal it needs `--force` (else exit 2, nothing
//! deleted).

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use super::context::service;
use super::many;
use crate::args::RmArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::Output;

/// Ask on the terminal; true for `y`/`yes`.
fn confirm(names: &[String]) -> bool {
    let mut err = std::io::stderr().lock();
    let _ = write!(
        err,
        "delete {} and {} snapshots? This cannot be undone. [y/N] ",
        names.join(", "),
        if names.len() == 1 { "its" } else { "their" }
    );
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Delete.
pub fn run(args: &RmArgs, out: Output) -> CmdResult {
    if !args.force {
        if !std::io::stdin().is_terminal() {
            return Err(CliError::usage(anyhow::anyhow!(
                "refusing to delete {} without confirmation: standard input is not a terminal; pass --force to delete without asking",
                args.names.join(", ")
            )));
        }
        if !confirm(&args.names) {
            out.info("nothing deleted");
            return Ok(Outcome::Failed);
        }
    }
    let (svc, rt) = service(&args.ctx)?;
    many::each(&out, &rt, "rm", "deleted", &args.names, args.json, |name| {
        let svc = svc.clone();
        async move { svc.delete(&name).await.map(|()| None) }
    })
}
