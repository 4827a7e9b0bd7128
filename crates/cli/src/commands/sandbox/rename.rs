//! `corral rename OLD NEW`: a stopped sandbox gets a new name; corral's
//! record of it (owner, verdicts) follows.

use corral_service::shapes::SandboxRename;

use super::context::{fail, service};
use crate::args::RenameArgs;
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

/// Rename.
pub fn run(args: &RenameArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let info = rt
        .block_on(svc.rename(&args.old, &args.new))
        .map_err(fail)?;
    if args.json {
        print_json(&SandboxRename::new(&args.old, info))?;
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
