//! `corral-drill`: the namespace lab ([`lab`]) and the isolation drill: build the netns topology, apply the profiles inside
//! its simulated host, and prove each profile's promise with real packets.
//!
//! Every probe runs twice: first as a control, before corral's rules exist
//! (it must connect, or the row is `not_run`), then with the rules. The
//! attacker's rows ([`attack`]) are judged the same way: each crafted-frame
//! attack on a sibling or the host must land in the control and be held by
//! corral; the gateway capacity attacks run against real dnsmasq daemons,
//! their control the victim's own request answered; the conntrack-table
//! attacks (class 12) take corral's plan without class 12's rules as their
//! control, since a namespace without rules tracks nothing. The
//! drill never touches the real host's network: everything happens in
//! anonymous namespaces that vanish when it returns. Host names are not
//! resolved through DNS: each one gets a documentation address (see
//! [`drill_resolution`]) unless the caller passes a resolution.

#![warn(missing_docs)]

pub mod attack;
mod carry;
mod deleted_table;
mod dns;
pub mod lab;
mod probes;
pub mod raw;
pub mod removed;
mod report;
mod schedule;
pub mod slaac;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use corral_sandbox_core::{AllowTarget, ProfileSet};

pub use probes::{PlannedProbe, allows, derive};
pub use report::{DrillReport, DrillRow, Expect, Verdict, judge};

use crate::lab::{Lab, LabError, Observed};
use corral_egress::resolve::Resolution;

/// The drill's first line.
pub const CLAIM: &str = "corral drill: each profile reaches exactly what it allows — proved with real packets in throwaway network namespaces, each probe checked against a control without corral's rules";

/// Knobs of a drill run.
#[derive(Debug, Clone)]
pub struct DrillOptions {
    /// How long a probe waits for an answer (a dropped probe takes this long).
    pub timeout: Duration,
    /// Addresses for the profiles' host names; `None`: documentation
    /// addresses from [`drill_resolution`].
    pub resolution: Option<Resolution>,
}

impl Default for DrillOptions {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(1000),
            resolution: None,
        }
    }
}

/// The drill could not run at all (individual probes that cannot run are
/// rows, not errors).
#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    /// Building the namespaces, planning or applying failed.
    #[error("the drill could not set up its simulated host: {0}")]
    Lab(#[from] LabError),
}

/// Runs the drill for `profiles`.
pub fn run(profiles: &ProfileSet, opts: &DrillOptions) -> Result<DrillReport, DrillError> {
    let start = Instant::now();
    let resolution = opts
        .resolution
        .clone()
        .unwrap_or_else(|| drill_resolution(profiles));
    let lab = Lab::new(profiles, &resolution)?;
    let planned = derive(profiles, &resolution, &lab.topo);
    let needs: Vec<_> = planned.iter().filter_map(|p| p.needs).collect();
    let mut setup_rows = Vec::new();
    if let Err(e) = lab.topo.add_internet_listeners(&needs) {
        // The affected probes' controls fail and show as not run.
        setup_rows.push(format!("{} endpoint(s): {e}", needs.len()));
    }
    let attacks = attack::l3::derive(profiles, &lab.topo);
    if let Err(e) = lab
        .topo
        .add_internet_listeners(&attack::l3::listeners(&attacks))
    {
        setup_rows.push(format!("reserved-range listeners: {e}"));
    }
    let all: Vec<usize> = (0..attacks.len()).collect();
    lab.control()?;
    let mut control = schedule::run_all(&lab, &planned, opts.timeout);
    let mut attack_control = schedule::run_attacks(&lab, &attacks, &all, opts.timeout);
    // A control's first contact can meet a path still settling (IPv6
    // duplicate-address detection on the LAN, neighbour discovery); one
    // more try, still before corral's rules exist, tells a slow start from
    // a destination that is really unreachable without corral (a row whose
    // control fails again is `not_run`, as before).
    let again: Vec<usize> = (0..control.len())
        .filter(|i| !control[*i].observed.reached())
        .collect();
    if !again.is_empty() {
        let retry: Vec<PlannedProbe> = again.iter().map(|i| planned[*i].clone()).collect();
        for (i, r) in again
            .iter()
            .zip(schedule::run_all(&lab, &retry, opts.timeout))
        {
            control[*i] = r;
        }
    }
    let again: Vec<usize> = (0..attack_control.len())
        .filter(|i| !attack_control[*i].0.reached())
        .collect();
    if !again.is_empty() {
        for (i, r) in again
            .iter()
            .zip(schedule::run_attacks(&lab, &attacks, &again, opts.timeout))
        {
            attack_control[*i] = r;
        }
    }
    let l2_attacks = attack::l2::plan(&lab);
    let l2_control = schedule::l2(&lab, &l2_attacks);
    lab.apply()?;
    // Read-back is checked once every L3 attack is done and before the
    // gateways answer any name (a learned answer is the resolver's to
    // judge, not drift of the rules).
    let checks = || {
        let mut v = vec![verify_row(&lab)];
        v.extend(stray_row(&lab, &attacks, &attack_control));
        v
    };
    let enforced =
        schedule::Enforced::run(&lab, &planned, &attacks, &l2_attacks, opts.timeout, checks);
    let mut rows: Vec<DrillRow> = planned
        .iter()
        .zip(control)
        .zip(enforced.probes)
        .map(|((p, c), e)| {
            let sb = &lab.topo.sandboxes[p.from];
            DrillRow {
                probe: p.what.clone(),
                from: sb.name.clone(),
                to: p.probe.to_string(),
                expected: p.expect,
                verdict: judge(p.expect, &c.observed, &e.observed),
                observed: e.observed,
                control: c.observed,
                ms: e.ms,
                packet: Some(p.probe),
            }
        })
        .collect();
    rows.extend(
        attacks
            .iter()
            .zip(&attack_control)
            .zip(enforced.attacks)
            .map(|((a, c), (e, ms))| DrillRow {
                probe: format!("{}: {}", a.class.label(), a.what),
                from: lab.topo.sandboxes[a.from].name.clone(),
                to: a.target(),
                expected: Expect::Block,
                verdict: judge(Expect::Block, &c.0, &e),
                observed: e,
                control: c.0.clone(),
                ms,
                packet: None,
            }),
    );
    rows.extend(attack::l2::rows(
        &lab,
        &l2_attacks,
        &l2_control,
        &enforced.l2,
    ));
    rows.extend(enforced.checks);
    rows.extend(enforced.dns);
    // Its control swaps the ruleset for a moment: after everything that
    // needs the plan in force.
    rows.extend(attack::conntrack_fill::rows(&lab));
    // Late: it deletes the inet table (and puts the plan back).
    rows.extend(deleted_table::row(&lab, opts.timeout));
    // Last: it deletes a bridge of the lab.
    rows.extend(removed::row(&lab, &resolution, opts.timeout));
    for s in setup_rows {
        rows.push(DrillRow {
            probe: "listener setup".to_owned(),
            from: "drill".to_owned(),
            to: s.clone(),
            expected: Expect::Reach,
            observed: Observed::Error(s),
            control: Observed::Error("not run".to_owned()),
            verdict: Verdict::Error,
            ms: 0,
            packet: None,
        });
    }
    let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    Ok(DrillReport::new(CLAIM.to_owned(), rows, ms))
}

/// Read-back after apply must show no drift (the stray sources the
/// drill's own port-off-its-bridge attacks caused are judged by
/// [`stray_row`]).
fn verify_row(lab: &Lab) -> DrillRow {
    let start = Instant::now();
    let verified = lab.host.verify(&lab.plan).map(|mut d| {
        d.retain(|x| !matches!(x, corral_egress::host::HostDrift::StraySource { .. }));
        d
    });
    let (observed, verdict) = match verified {
        Ok(d) if d.is_empty() => (Observed::Connected, Verdict::Pass),
        Ok(d) => (
            Observed::Error(format!("{} difference(s), first: {}", d.len(), d[0])),
            Verdict::Fail,
        ),
        Err(e) => (Observed::Error(e.to_string()), Verdict::Error),
    };
    DrillRow {
        probe: "read-back matches the plan (no drift)".to_owned(),
        from: "host".to_owned(),
        to: "nftables, bridges, sysctls".to_owned(),
        expected: Expect::Reach,
        observed,
        control: Observed::Connected,
        verdict,
        ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        packet: None,
    }
}

/// After the port-off-its-bridge attacks, `verify` must name the profile
/// whose subnet arrived off its bridge. Its control is the attacks' own
/// (without rules the packets got through).
fn stray_row(
    lab: &Lab,
    attacks: &[attack::l3::Attack],
    attack_control: &[(Observed, u64)],
) -> Option<DrillRow> {
    let class = attack::l3::Class::OffBridge;
    let profiles: Vec<&str> = attacks
        .iter()
        .filter(|a| a.class == class)
        .map(|a| lab.topo.sandboxes[a.from].profile.as_str())
        .collect();
    if profiles.is_empty() {
        return None;
    }
    let control = if attacks
        .iter()
        .zip(attack_control)
        .filter(|(a, _)| a.class == class)
        .all(|(_, (c, _))| c.reached())
    {
        Observed::Connected
    } else {
        Observed::Error("an attack's control did not get through".to_owned())
    };
    let start = Instant::now();
    let observed = match lab.host.verify(&lab.plan) {
        Ok(d) => {
            let named = profiles.iter().all(|p| {
                d.iter().any(|x| {
                    matches!(x, corral_egress::host::HostDrift::StraySource { profile, .. } if profile == p)
                })
            });
            if named {
                Observed::Connected
            } else {
                Observed::Error(format!(
                    "verify did not report it ({} difference(s))",
                    d.len()
                ))
            }
        }
        Err(e) => Observed::Error(e.to_string()),
    };
    Some(DrillRow {
        probe: format!("{}: verify reports the stray source", class.label()),
        from: "host".to_owned(),
        to: "nftables counters".to_owned(),
        expected: Expect::Reach,
        verdict: judge(Expect::Reach, &control, &observed),
        observed,
        control,
        ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        packet: None,
    })
}

/// Documentation addresses for every host name of the profiles, so the
/// drill needs no DNS: the n-th name gets 203.0.113.(200+n) and
/// 2001:db8:200::(n+1).
pub fn drill_resolution(profiles: &ProfileSet) -> Resolution {
    let mut r = Resolution::new();
    let mut n: u8 = 0;
    for p in profiles {
        for e in &p.allow {
            if let AllowTarget::Host(h) = &e.target
                && r.get(h).is_none()
            {
                let v4 = Ipv4Addr::new(203, 0, 113, 200u8.saturating_add(n));
                let v6 = Ipv6Addr::new(0x2001, 0xdb8, 0x200, 0, 0, 0, 0, u16::from(n) + 1);
                r.insert(h, [IpAddr::V4(v4), IpAddr::V6(v6)]);
                n = n.saturating_add(1);
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sandbox_core::config::Config;

    #[test]
    fn builtin_drill_passes_every_probe() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let cfg = Config::builtin_default();
        let report = run(&cfg.profiles, &DrillOptions::default()).unwrap();
        let bad: Vec<_> = report
            .rows
            .iter()
            .filter(|r| r.verdict != Verdict::Pass)
            .collect();
        assert!(bad.is_empty(), "{bad:#?}");
        assert!(report.ok(), "{}", report.summary());
        assert!(report.rows.len() > 30, "{} rows", report.rows.len());
        // The whole-life rows are there (and passed, above).
        for label in [deleted_table::DELETED_TABLE, removed::REMOVED] {
            assert!(report.rows.iter().any(|r| r.probe == label), "{label}");
        }
        // Class 12's rows run with their own control (the plan without
        // class 12's rules), and are there, named by class.
        let class12 = attack::l3::Class::ConntrackFill.label();
        let rows12: Vec<_> = report
            .rows
            .iter()
            .filter(|r| r.probe.starts_with(&class12))
            .collect();
        for r in &rows12 {
            eprintln!(
                "{}: control {:?}, enforced {:?}",
                r.probe, r.control, r.observed
            );
        }
        assert_eq!(rows12.len(), 2, "{rows12:#?}");
        // Every profile is covered.
        for p in cfg.profiles.iter() {
            assert!(
                report
                    .rows
                    .iter()
                    .any(|r| r.from.starts_with(p.name.as_str()))
            );
        }
        eprintln!("{}", report.summary());
    }

    #[test]
    fn host_names_get_documentation_addresses() {
        let text = r#"
[[profile]]
name = "dev"
bridge = "cb-dev"
subnet = "10.9.0.0/24"
mode = "allowlist"
allow = ["api.example.com:443/tcp", "cdn.example.com", "api.example.com:80/tcp"]
"#;
        let cfg = Config::from_toml_str(text, "t").unwrap();
        let r = drill_resolution(&cfg.profiles);
        assert_eq!(r.len(), 2);
        let h = corral_sandbox_core::HostName::new("cdn.example.com").unwrap();
        assert_eq!(
            r.get(&h).unwrap()[0],
            IpAddr::V4(Ipv4Addr::new(203, 0, 113, 201))
        );
    }
}
