//! `corral ls`: every sandbox corral owns (instances without corral's
//! stamp are never listed).

use corral_sandbox_core::sandbox::SandboxInfo;
use serde::Serialize;

use super::context::{fail, service};
use super::render;
use crate::args::ListArgs;
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, print_json};

/// `corral ls --json`.
#[derive(Debug, Serialize)]
struct ListJson<'a> {
    schema: &'static str,
    sandboxes: &'a [SandboxInfo],
}

/// List.
pub fn run(args: &ListArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let mut infos = rt.block_on(svc.list()).map_err(fail)?;
    infos.sort_by(|a, b| a.name.cmp(&b.name));
    if args.json {
        print_json(&ListJson {
            schema: "corral.sandbox-list.v1",
            sandboxes: &infos,
        })?;
    } else if infos.is_empty() {
        out.info("no sandboxes; `corral new NAME` makes one");
    } else {
        out.table(&render::table(&out, &infos), true);
    }
    Ok(Outcome::Ok)
}
