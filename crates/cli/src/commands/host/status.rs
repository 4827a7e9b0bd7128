//! `corral host status`: bridges, profiles, sets and counters as they are.

use corral_gateway::GatewayStatus;
use corral_service::reports::StatusReport;

use super::context;
use super::render::count;
use crate::args::HostArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, Table, print_json};

fn yes_no(out: &Output, ok: bool, yes: &str, no: &str) -> String {
    if ok {
        out.paint(Style::Good, yes)
    } else {
        out.paint(Style::Bad, no)
    }
}

/// Show the live state next to the plan.
pub fn run(args: &HostArgs, out: Output) -> CmdResult {
    let loaded = context::load_config(&args.source)?;
    let service = context::service(
        "status",
        &loaded,
        args.netns.as_deref(),
        args.state_dir.as_deref(),
    )?;
    let target = service.target();
    let wiring =
        context::wiring(&loaded, args.netns.as_deref(), &args.incus_socket).map_err(|e| {
            CliError::failure(e.context("cannot list the sandboxes on corral's bridges"))
        })?;
    let planned = context::plan_to_check(loaded, &args.source, &service)?;
    let (status, gateways) = service.status(&planned).map_err(|e| {
        CliError::failure(
            anyhow::Error::new(e).context(format!("reading the status of {}", target.describe())),
        )
    })?;
    if args.json {
        print_json(&StatusReport::new(
            &planned,
            target.netns.clone(),
            status,
            gateways,
            wiring,
        ))?;
        return Ok(Outcome::Ok);
    }
    out.info(&format!(
        "{} (plan from {})",
        target.describe(),
        planned.origin
    ));
    let mut profiles = Table::new([
        "profile",
        "bridge",
        "present",
        "up",
        "owner",
        "addresses",
        "accepted",
        "blocked",
        "unlogged",
    ]);
    for b in &status.bridges {
        let counters = status.counters.iter().find(|c| c.profile == b.profile);
        profiles.row([
            b.profile.clone(),
            b.name.clone(),
            yes_no(&out, b.present, "yes", "no"),
            yes_no(&out, b.up, "up", "down"),
            if !b.present {
                "-".to_owned()
            } else if b.managed {
                "corral".to_owned()
            } else {
                "adopted".to_owned()
            },
            if b.addresses.is_empty() {
                "-".to_owned()
            } else {
                b.addresses.join(" ")
            },
            counters.map_or("-".to_owned(), |c| {
                format!("{} pkts / {} B", c.accepted_packets, c.accepted_bytes)
            }),
            counters.map_or("-".to_owned(), |c| {
                format!("{} pkts / {} B", c.blocked_packets, c.blocked_bytes)
            }),
            // Blocked packets the profile's drop-log budget kept out of
            // the log (still blocked).
            counters.map_or("-".to_owned(), |c| format!("{} pkts", c.suppressed_packets)),
        ]);
    }
    out.table(&profiles, true);
    if !status.sets.is_empty() {
        out.info("");
        let mut sets = Table::new(["set", "planned elements", "live elements"]);
        for s in &status.sets {
            sets.row([
                s.name.clone(),
                s.planned.to_string(),
                match s.live {
                    Some(n) if n == s.planned => n.to_string(),
                    Some(n) => out.paint(Style::Warn, &n.to_string()),
                    None => out.paint(Style::Bad, "absent"),
                },
            ]);
        }
        out.table(&sets, false);
    }
    if !gateways.is_empty() {
        out.info("");
        let mut table = Table::new(["bridge", "gateway (dnsmasq)"]);
        for g in &gateways {
            let state = match &g.status {
                GatewayStatus::Running { .. } => out.paint(Style::Good, &g.status.to_string()),
                _ => out.paint(Style::Bad, &g.status.to_string()),
            };
            table.row([g.bridge.clone(), state]);
        }
        out.table(&table, false);
    }
    out.info("");
    match &wiring {
        Err(note) => out.info(&format!("sandboxes: {note}")),
        Ok(w) => {
            if w.attached.is_empty() {
                out.info("sandboxes: none on corral's bridges");
            } else {
                let mut table = Table::new(["sandbox", "bridge", "profile", "state"]);
                for a in &w.attached {
                    table.row([
                        if a.owned {
                            a.name.clone()
                        } else {
                            format!("{} (not corral's)", a.name)
                        },
                        a.bridge.clone(),
                        a.profile
                            .as_ref()
                            .map_or("-".to_owned(), ToString::to_string),
                        a.state.to_string(),
                    ]);
                }
                out.table(&table, true);
            }
            for d in &w.detached {
                out.info(&format!(
                    "{}: `{}` (profile {}, {}) should be on {} but is on {}",
                    out.paint(Style::Bad, "detached"),
                    d.name,
                    d.profile,
                    d.state,
                    d.expected
                        .as_deref()
                        .unwrap_or("a bridge this host does not configure"),
                    if d.actual.is_empty() {
                        "no bridge".to_owned()
                    } else {
                        d.actual.join(", ")
                    }
                ));
            }
        }
    }
    out.info("");
    if status.drift == 0 {
        out.info(&format!(
            "{}: live state matches the plan",
            out.paint(Style::Good, "in sync")
        ));
    } else {
        out.info(&format!(
            "{}: {} from the plan; `corral host verify` lists them",
            out.paint(Style::Bad, "drift"),
            count(status.drift, "difference", "differences")
        ));
    }
    Ok(Outcome::Ok)
}
