//! `corral stop NAME…|--all`.

use std::time::Duration;

use corral_sandbox_core::sandbox::StopOptions;

use super::context::service;
use super::many;
use crate::args::StopArgs;
use crate::error::CmdResult;
use crate::output::Output;

/// Stop.
pub fn run(args: &StopArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.power.ctx)?;
    let names = many::names(&svc, &rt, &args.power, |s| s.can_stop())?;
    let options = StopOptions {
        force: args.force,
        timeout: Some(Duration::from_secs(args.power.timeout)),
    };
    many::each(
        &out,
        &rt,
        "stop",
        "stopped",
        &names,
        args.power.json,
        |name| {
            let svc = svc.clone();
            async move { svc.stop(&name, options).await.map(|i| Some(i.state)) }
        },
    )
}
