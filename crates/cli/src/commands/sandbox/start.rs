//! `corral start NAME…|--all`: each sandbox passes the start gate (its
//! profile's enforcement read back) and the provider's topology check, then
//! starts and is waited for until it is ready.

use std::time::Duration;

use super::context::service;
use super::many;
use crate::args::PowerArgs;
use crate::error::CmdResult;
use crate::output::Output;

/// Start.
pub fn run(args: &PowerArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let names = many::names(&svc, &rt, args, |s| s.can_start())?;
    let timeout = Duration::from_secs(args.timeout);
    many::each(&out, &rt, "start", "started", &names, args.json, |name| {
        let svc = svc.clone();
        async move { svc.start(&name, timeout).await.map(|h| Some(h.info.state)) }
    })
}
