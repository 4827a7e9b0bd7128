//! The two reactions: heal (the recorded plan again, then read back) and
//! cut (the profiles' sandbox ports down).

use std::time::Instant;

use corral_egress::host::{Host, HostDrift, HostError};
use corral_egress::link::Links;
use corral_egress::plan::HostPlan;

/// Re-applies `plan` as apply does (one nftables transaction keeping the
/// learned elements, bridges, ports, read-back inside), then reads back
/// once more: `Ok` only when the host matches the plan again.
pub(crate) fn heal(host: &Host, plan: &HostPlan) -> Result<(), String> {
    match host.apply_after(plan, Some(plan)) {
        Ok(_) => {}
        Err(HostError::NotEnforced(d)) => return Err(describe("still differs", &d)),
        Err(e) => return Err(crate::error::chain(&e)),
    }
    match host.verify(plan) {
        Ok(d) if d.iter().any(super::scope::reacts_to) => Err(describe("still differs", &d)),
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "the read-back after the heal failed: {}",
            crate::error::chain(&e)
        )),
    }
}

fn describe(what: &str, d: &[HostDrift]) -> String {
    format!(
        "the host {what} from the plan after the heal ({} difference(s), first: {})",
        d.len(),
        d.first().map(ToString::to_string).unwrap_or_default()
    )
}

/// One port the cut set down, or failed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutPort {
    /// The bridge port.
    pub port: String,
    /// Its bridge.
    pub bridge: String,
    /// `None` when it is down; otherwise why not.
    pub error: Option<String>,
}

/// Sets every port of the bridges of `profiles` down: a port that is down
/// forwards nothing either way, whatever the rules say (or do not say).
/// Keeps going past a failure and reports each port.
pub(crate) fn cut(host: &Host, plan: &HostPlan, profiles: &[String]) -> Vec<CutPort> {
    let bridges: Vec<String> = plan
        .bridges
        .iter()
        .filter(|b| profiles.contains(&b.profile.to_string()))
        .map(|b| b.name.to_string())
        .collect();
    let run = host.netns().run_async(|| async move {
        let mut out = Vec::new();
        let links = match Links::connect() {
            Ok(l) => l,
            Err(e) => {
                return bridges
                    .iter()
                    .map(|b| CutPort {
                        port: "*".to_owned(),
                        bridge: b.clone(),
                        error: Some(e.to_string()),
                    })
                    .collect();
            }
        };
        for bridge in &bridges {
            let ports = match links.ports_of(bridge).await {
                Ok(p) => p,
                // A bridge that is gone forwards nothing.
                Err(corral_egress::link::LinkError::NoSuchLink(_)) => continue,
                Err(e) => {
                    out.push(CutPort {
                        port: "*".to_owned(),
                        bridge: bridge.clone(),
                        error: Some(e.to_string()),
                    });
                    continue;
                }
            };
            for p in ports {
                let error = links.set_down(&p.name).await.err().map(|e| e.to_string());
                out.push(CutPort {
                    port: p.name,
                    bridge: bridge.clone(),
                    error,
                });
            }
        }
        out
    });
    run.unwrap_or_else(|e| {
        vec![CutPort {
            port: "*".to_owned(),
            bridge: "*".to_owned(),
            error: Some(format!("cannot enter the target namespace: {e}")),
        }]
    })
}

/// Milliseconds since `t`.
pub(crate) fn ms_since(t: Instant) -> u64 {
    u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX)
}
