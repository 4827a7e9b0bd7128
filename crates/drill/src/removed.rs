//! The drill's removed-profile row: a sandbox left on the bridge of a
//! profile the configuration no longer has reaches nothing once corral
//! applies the smaller plan with `--force` (docs/security.md, "A removed
//! profile").
//!
//! Its control is corral's path before the fail-closed rules existed: the
//! smaller ruleset without them, the bridge left up with its gateway
//! address — where the same sandbox reached the host's TCP service. The
//! row runs last: it deletes a bridge of the lab.

use std::time::{Duration, Instant};

use corral_egress::plan::fail_closed::{self, CUT_PORTS};
use corral_egress::plan::{HostPlan, Match, PlanError, PlanSettings};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::ProfileSet;

use crate::lab::topology::{HOST_SERVICE_PORT, SandboxNs};
use crate::lab::{Lab, Observed, tcp};
use crate::report::{DrillRow, Expect, judge};

/// The row's probe label.
pub const REMOVED: &str =
    "removed profile (apply --force): a sandbox left on its bridge reaches the host's TCP service";

/// `lab`'s plan without profile `gone`: the same host networks and
/// resolution, the other profiles' bindings kept, `gone`'s subnets
/// retired (what `corral host apply` records).
pub fn plan_without(lab: &Lab, gone: &str, resolution: &Resolution) -> Result<HostPlan, String> {
    let kept = ProfileSet::new(
        lab.profiles
            .iter()
            .filter(|p| p.name.as_str() != gone)
            .cloned()
            .collect(),
    )
    .map_err(|e| e.to_string())?;
    let settings = PlanSettings {
        host_networks: lab.plan.host_networks.clone(),
        ..PlanSettings::default()
    };
    let bindings = lab
        .plan
        .bindings
        .iter()
        .filter(|b| kept.by_bridge(b.bridge.as_str()).is_some())
        .cloned()
        .collect();
    let plan = HostPlan::build(&kept, &settings, resolution)
        .and_then(|p| p.with_bindings(&kept, bindings))
        .map_err(|e: PlanError| e.to_string())?;
    let retired = fail_closed::retire(&[], &lab.plan.subnets(), &plan.subnets());
    Ok(plan.with_fail_closed(retired, Vec::new()))
}

/// `plan` as corral planned it before the fail-closed rules: no rule on
/// groups, retired subnets or cut ports (the control's ruleset).
pub fn without_fail_closed(plan: &HostPlan) -> HostPlan {
    let added = |m: &Match| match m {
        Match::IifGroup(_) | Match::OifGroup(_) | Match::SaddrInSet(..) => true,
        Match::DaddrInSet(_, s) => s == fail_closed::RETIRED4 || s == fail_closed::RETIRED6,
        Match::InSet { set, .. } => set == CUT_PORTS,
        _ => false,
    };
    let mut old = plan.clone();
    for t in [&mut old.inet, &mut old.bridge] {
        for c in &mut t.chains {
            c.rules.retain(|r| !r.matches.iter().any(added));
        }
    }
    old
}

/// The row for the last profile of the lab (its first sandbox).
pub(crate) fn row(lab: &Lab, resolution: &Resolution, timeout: Duration) -> Option<DrillRow> {
    let profile = lab.profiles.iter().last()?;
    let sb: &SandboxNs = lab.topo.sandbox(profile.name.as_str())?;
    let start = Instant::now();
    let probe = tcp(sb.gateway_v4, HOST_SERVICE_PORT);
    let (control, observed) = match plan_without(lab, profile.name.as_str(), resolution) {
        Ok(gone) => {
            let control = match lab
                .topo
                .host
                .run(|| corral_egress::nft::apply(&without_fail_closed(&gone)))
            {
                Ok(Ok(_)) => lab.probe(sb, &probe, timeout).observed,
                Ok(Err(e)) => Observed::Error(format!("control ruleset: {e}")),
                Err(e) => Observed::Error(format!("control ruleset: {e}")),
            };
            let observed = match lab.host.apply_removing(&gone, Some(&lab.plan), true) {
                Ok(r) if r.removed.iter().any(|b| b.name == sb.bridge) => {
                    lab.probe(sb, &probe, timeout).observed
                }
                Ok(_) => Observed::Error(format!("the apply did not remove {}", sb.bridge)),
                Err(e) => Observed::Error(format!("apply --force: {e}")),
            };
            (control, observed)
        }
        Err(e) => {
            let e = Observed::Error(format!("plan without {}: {e}", profile.name));
            (e.clone(), e)
        }
    };
    Some(DrillRow {
        probe: REMOVED.to_owned(),
        from: sb.name.clone(),
        to: probe.to_string(),
        expected: Expect::Block,
        verdict: judge(Expect::Block, &control, &observed),
        observed,
        control,
        ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
        packet: Some(probe),
    })
}
