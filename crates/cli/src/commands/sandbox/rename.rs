//! `corral rename OLD NEW`: a stopped sandbox gets a new name; corral's
//! record of it (owner, verdicts) follows.

use corral_sandbox_core::sandbox::SandboxInfo;
use serde::Serialize;

use super::context::{fail, service};
use crate::args::RenameArgs;
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

/// `corral rename --json`.
#[derive(Debug, Serialize)]
struct RenameJson<'a> {
    schema: &'static str,
    from: &'a str,
    #[serde(flatten)]
    info: &'a SandboxInfo,
}

/// Rename.
pub fn run(args: &RenameArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let info = rt
        .block_on(svc.rename(&args.old, &args.new))
        .map_err(fail)?;
    if args.json {
        print_json(&RenameJson {
            schema: "corral.sandbox-rename.v1",
            from: &args.old,
            info: &info,
        })?;
    } else {
        out.data(&format!(
            "{} {} to {}",
            out.paint(Style::Good, "renamed"),
            args.old,
            info.name
        ));
    }
    Ok(Outcome::Ok)
}
