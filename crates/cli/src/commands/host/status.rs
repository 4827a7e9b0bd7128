//! `corral host status`: bridges, profiles, sets and counters as they are.

use corral_egress::host::{BridgeStatus, Status};
use corral_gateway::GatewayState;
use corral_service::reports::StatusReport;

use super::context;
use super::render::count;
use crate::args::HostArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, Table, print_json};

/// Above this many profiles the human output summarises: the profiles,
/// sets and gateways that need attention, the busiest profiles, and
/// counts for the rest (`--json` stays complete).
const SUMMARISE_ABOVE: usize = 20;
/// Profiles shown by blocked packets when summarising.
const BUSIEST: usize = 10;

/// The bridges shown: all of them, or (summarising) those absent, down or
/// without a running gateway, then the `BUSIEST` by blocked packets.
fn shown_bridges<'a>(status: &'a Status, gateways: &[GatewayState]) -> Vec<&'a BridgeStatus> {
    if status.bridges.len() <= SUMMARISE_ABOVE {
        return status.bridges.iter().collect();
    }
    let gateway_down = |b: &BridgeStatus| {
        gateways
            .iter()
            .find(|g| g.bridge == b.name)
            .is_some_and(|g| !g.status.is_up())
    };
    let blocked = |b: &BridgeStatus| {
        status
            .counters
            .iter()
            .find(|c| c.profile == b.profile)
            .map_or(0, |c| c.blocked_packets)
    };
    let mut shown: Vec<&BridgeStatus> = status
        .bridges
        .iter()
        .filter(|b| !b.present || !b.up || gateway_down(b))
        .collect();
    let mut busy: Vec<&BridgeStatus> = status
        .bridges
        .iter()
        .filter(|b| blocked(b) > 0 && !shown.iter().any(|s| s.name == b.name))
        .collect();
    busy.sort_by_key(|b| std::cmp::Reverse(blocked(b)));
    shown.extend(busy.into_iter().take(BUSIEST));
    shown
}

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
    let shown = shown_bridges(&status, &gateways);
    for b in &shown {
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
    let summarise = status.bridges.len() > SUMMARISE_ABOVE;
    if !shown.is_empty() {
        out.table(&profiles, true);
    }
    if summarise {
        let healthy = status.bridges.iter().filter(|b| b.present && b.up).count();
        out.info(&format!(
            "{} profiles: {healthy} bridges present and up; shown above: those needing attention and the {BUSIEST} with the most blocked packets (`--json` lists every profile)",
            status.bridges.len()
        ));
    }
    let sets_shown: Vec<_> = status
        .sets
        .iter()
        .filter(|s| !summarise || s.live != Some(s.planned))
        .collect();
    if summarise {
        out.info(&format!(
            "{} sets: {} hold their planned elements",
            status.sets.len(),
            status.sets.len() - sets_shown.len()
        ));
    }
    if !sets_shown.is_empty() {
        out.info("");
        let mut sets = Table::new(["set", "planned elements", "live elements"]);
        for s in sets_shown {
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
    let gateways_shown: Vec<_> = gateways
        .iter()
        .filter(|g| !summarise || !g.status.is_up())
        .collect();
    if summarise {
        out.info(&format!(
            "{} gateways: {} running or served by corral's gateway",
            gateways.len(),
            gateways.len() - gateways_shown.len()
        ));
    }
    if !gateways_shown.is_empty() {
        out.info("");
        let mut table = Table::new(["bridge", "gateway (dnsmasq)"]);
        for g in gateways_shown {
            let state = match &g.status {
                s if s.is_up() => out.paint(Style::Good, &s.to_string()),
                s => out.paint(Style::Bad, &s.to_string()),
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

#[cfg(test)]
mod tests {
    use super::*;
    use corral_egress::nft::ProfileCounters;
    use corral_gateway::GatewayStatus;

    fn host(n: usize) -> (Status, Vec<GatewayState>) {
        let bridges = (0..n)
            .map(|i| BridgeStatus {
                name: format!("cs{i}"),
                profile: format!("s{i}"),
                present: i != 3,
                up: i != 3 && i != 4,
                managed: true,
                addresses: Vec::new(),
            })
            .collect();
        let counters = (0..n)
            .map(|i| ProfileCounters {
                profile: format!("s{i}"),
                blocked_packets: if i >= 10 { i as u64 } else { 0 },
                ..ProfileCounters::default()
            })
            .collect();
        let gateways = (0..n)
            .map(|i| GatewayState {
                bridge: format!("cs{i}"),
                status: if i == 7 {
                    GatewayStatus::Stopped
                } else {
                    GatewayStatus::Running {
                        pid: 100 + i as u32,
                    }
                },
            })
            .collect();
        (
            Status {
                bridges,
                counters,
                sets: Vec::new(),
                drift: 0,
            },
            gateways,
        )
    }

    #[test]
    fn a_small_host_shows_every_profile() {
        let (status, gateways) = host(SUMMARISE_ABOVE);
        assert_eq!(shown_bridges(&status, &gateways).len(), SUMMARISE_ABOVE);
    }

    #[test]
    fn a_large_host_shows_what_needs_attention_then_the_busiest() {
        let (status, gateways) = host(500);
        let shown: Vec<&str> = shown_bridges(&status, &gateways)
            .iter()
            .map(|b| b.name.as_str())
            .collect();
        // Absent, down, gateway stopped; then blocked 499, 498, ...
        let mut want = vec!["cs3", "cs4", "cs7"];
        let busiest: Vec<String> = (490..500).rev().map(|i| format!("cs{i}")).collect();
        want.extend(busiest.iter().map(String::as_str));
        assert_eq!(shown, want);
    }
}
