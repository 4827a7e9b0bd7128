//! `corral ls`: every sandbox corral owns (instances without corral's
//! stamp are never listed).

use corral_service::shapes::SandboxList;

use super::context::{fail, service};
use super::render;
use crate::args::ListArgs;
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, print_json};

/// List.
pub fn run(args: &ListArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let list = SandboxList::new(rt.block_on(svc.list()).map_err(fail)?);
    // The lifetimes live in the store corrald enforces them from; a store
    // that cannot be read leaves the column out, not the list.
    let lifetimes: Result<Vec<_>, String> = match super::context::store(&args.ctx) {
        Ok((_, s)) => s.lifetimes().map_err(|e| e.to_string()),
        Err(e) => Err(e.render()),
    };
    let list = match lifetimes {
        Ok(l) => list.with_lifetimes(&l),
        Err(e) => {
            tracing::warn!(error = %e, "lifetimes not shown");
            list
        }
    };
    let infos = &list.sandboxes;
    if args.json {
        print_json(&list)?;
    } else if infos.is_empty() {
        out.info("no sandboxes; `corral new NAME` makes one");
    } else {
        out.table(&render::table_with(&out, infos, &list.lifetimes), true);
    }
    Ok(Outcome::Ok)
}
