//! `corral cluster status`: the Incus cluster's members as corral trusts
//! them (the report corrald's `GET /v1/cluster` gives).

use corral_service::reports::{ClusterReport, cluster_report};

use crate::args::{ClusterCommand, ClusterStatusArgs};
use crate::commands::sandbox::{fail, service};
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, Style, Table, print_json};

/// Run a `cluster` subcommand.
pub fn run(cmd: ClusterCommand, out: Output) -> CmdResult {
    match cmd {
        ClusterCommand::Status(args) => status(&args, out),
    }
}

fn status(args: &ClusterStatusArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let report = rt.block_on(cluster_report(&svc)).map_err(fail)?;
    if args.json {
        print_json(&report)?;
        return Ok(Outcome::Ok);
    }
    print(&report, out);
    Ok(Outcome::Ok)
}

fn print(report: &ClusterReport, out: Output) {
    if !report.clustered {
        out.info("this Incus server is not part of a cluster: placement is Incus's own");
        return;
    }
    match &report.controller {
        Some(c) if c.current => out.info(&format!(
            "standings written {} s ago (attestation interval {} s)",
            c.age_secs, c.interval_secs
        )),
        Some(c) => out.info(&out.paint(
            Style::Bad,
            &format!(
                "standings written {} s ago (interval {} s): the controller is not running; start `corrald --cluster FILE`",
                c.age_secs, c.interval_secs
            ),
        )),
        None => out.info(&out.paint(
            Style::Bad,
            "no cluster controller has written standings: no profiled placement; start `corrald --cluster FILE`",
        )),
    }
    let mut t = Table::new([
        "member",
        "incus",
        "standing",
        "attested",
        "since",
        "sandboxes",
        "why not",
    ]);
    for m in &report.members {
        let standing = if m.placeable {
            out.paint(Style::Good, &m.standing)
        } else {
            out.paint(Style::Bad, &m.standing)
        };
        t.row([
            m.member.clone(),
            m.incus_status.to_lowercase(),
            standing,
            m.attestation_age_secs
                .map_or_else(|| "never".to_owned(), |s| format!("{s} s ago")),
            m.since
                .map_or_else(|| "-".to_owned(), crate::commands::verification::utc),
            format!("{} ({} running)", m.sandboxes, m.running),
            m.refused.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    out.table(&t, true);
}
