//! `corral info NAME`: one sandbox (ownership checked).

use corral_service::shapes::SandboxDetail;

use super::context::{fail, service};
use super::render;
use crate::args::InfoArgs;
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, print_json};

/// Show.
pub fn run(args: &InfoArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let info = rt.block_on(svc.info(&args.name)).map_err(fail)?;
    let snapshots = rt.block_on(svc.snapshots(&args.name)).map_err(fail)?;
    if args.json {
        print_json(&SandboxDetail::new(info, snapshots))?;
        return Ok(Outcome::Ok);
    }
    let mut rows = vec![
        ("name", info.name.to_string()),
        ("state", render::state(&out, info.state)),
        ("kind", info.kind.to_string()),
        (
            "profile",
            info.profile
                .as_ref()
                .map_or_else(|| "(no network)".to_owned(), ToString::to_string),
        ),
        (
            "addresses",
            info.addresses
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" "),
        ),
        (
            "port",
            info.nic
                .as_ref()
                .map_or_else(|| "-".to_owned(), |n| format!("{} (MAC {})", n.port, n.mac)),
        ),
        ("image", info.image.clone().unwrap_or_default()),
        ("created", info.created.clone().unwrap_or_default()),
        (
            "snapshots",
            if snapshots.is_empty() {
                "-".to_owned()
            } else {
                snapshots
                    .iter()
                    .map(|s| s.name.clone())
                    .collect::<Vec<_>>()
                    .join(" ")
            },
        ),
    ];
    if let Some(member) = &info.location {
        // Only on a cluster: a single host's output stays as it was.
        rows.insert(3, ("member", member.clone()));
    }
    for (k, v) in rows {
        out.data(&format!("{k:<10} {v}"));
    }
    Ok(Outcome::Ok)
}
