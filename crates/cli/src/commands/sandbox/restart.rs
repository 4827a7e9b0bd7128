//! `corral restart NAME…|--all`: the start gate is checked before the stop,
//! so a refused restart leaves the sandbox as it was.

use std::time::Duration;

use corral_sandbox_core::sandbox::StopOptions;

use super::context::service;
use super::many;
use crate::args::StopArgs;
use crate::error::CmdResult;
use crate::output::Output;

/// Restart.
pub fn run(args: &StopArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.power.ctx)?;
    let names = many::names(&svc, &rt, &args.power, |s| s.can_stop())?;
    let options = StopOptions {
        force: args.force,
        timeout: None,
    };
    let ready = Duration::from_secs(args.power.timeout);
    many::each(
        &out,
        &rt,
        "restart",
        "restarted",
        &names,
        args.power.json,
        |name| {
            let svc = svc.clone();
            async move {
                svc.restart(&name, options, ready)
                    .await
                    .map(|h| Some(h.info.state))
            }
        },
    )
}
