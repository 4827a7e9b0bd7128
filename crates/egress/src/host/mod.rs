//! The host facade the CLI and API call: plan diff, apply, verify, status,
//! teardown, refresh — on this host or inside a network namespace.
//!
//! Apply order: sysctls → nftables (one transaction, so the rules are in
//! place before a new bridge comes up) → bridges (create or adopt, gateway
//! addresses, up) → read everything back; any difference from the plan
//! fails the apply. Teardown deletes corral's two tables and only the
//! bridges carrying corral's stamp, keeps going past failures and returns
//! every error. Sysctls are not reverted by teardown: forwarding may serve
//! other users of the host.

mod report;
mod state;

use std::time::Instant;

use crate::link::{LinkError, Links};
use crate::netns::Netns;
use crate::nft::{self, NftError};
use crate::plan::HostPlan;
use crate::sysctl::{SysctlError, Sysctls};

pub use report::{
    ApplyReport, BridgeReport, BridgeStatus, HostDrift, SetStatus, Status, TeardownReport,
};
pub use state::{AppliedInputs, StateError, StateStore, plan_settings};

/// A host operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// Entering the namespace or starting a worker thread failed.
    #[error("cannot run inside the target network namespace: {0}")]
    Namespace(#[source] std::io::Error),
    /// A sysctl could not be written or read.
    #[error(transparent)]
    Sysctl(#[from] SysctlError),
    /// nftables refused or could not be read.
    #[error(transparent)]
    Nft(#[from] NftError),
    /// A bridge, address or route operation failed.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// After apply, the live state still differs from the plan.
    #[error(
        "applied, but the host does not match the plan ({} difference(s), first: {}); run `corral host verify` for the list",
        .0.len(),
        .0.first().map(ToString::to_string).unwrap_or_default()
    )]
    NotEnforced(Vec<HostDrift>),
}

/// A host (or network namespace) corral manages.
#[derive(Debug)]
pub struct Host {
    ns: Netns,
}

impl Host {
    /// The host's own network namespace (of this process).
    pub fn current() -> Result<Self, HostError> {
        Ok(Self {
            ns: Netns::current().map_err(HostError::Namespace)?,
        })
    }

    /// Acts inside `ns` instead (tests, the drill, `--netns`).
    pub fn in_netns(ns: Netns) -> Self {
        Self { ns }
    }

    /// The namespace this host acts in.
    pub fn netns(&self) -> &Netns {
        &self.ns
    }

    /// Runs `f` on a thread inside the namespace with a runtime for
    /// rtnetlink; nft and /proc/sys calls in `f` see the same namespace.
    fn within<F, Fut, T>(&self, f: F) -> Result<T, HostError>
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<T, HostError>>,
        T: Send,
    {
        self.ns.run_async(f).map_err(HostError::Namespace)?
    }

    /// What `apply(plan)` would change: every difference between the plan
    /// and the live state (empty when applying would be a no-op).
    pub fn plan_diff(&self, plan: &HostPlan) -> Result<Vec<HostDrift>, HostError> {
        self.verify(plan)
    }

    /// Applies `plan`; see the module docs for the order.
    pub fn apply(&self, plan: &HostPlan) -> Result<ApplyReport, HostError> {
        self.within(|| async {
            let start = Instant::now();
            let sysctls = Sysctls::default().apply(&plan.sysctls)?;
            let stats = nft::apply(plan)?;
            let links = Links::connect()?;
            let mut bridges = Vec::new();
            for b in &plan.bridges {
                let outcome = links.ensure_bridge(b).await?;
                bridges.push(BridgeReport {
                    name: b.name.to_string(),
                    profile: b.profile.to_string(),
                    outcome,
                });
            }
            let drift = verify_inside(plan, &links).await?;
            if !drift.is_empty() {
                return Err(HostError::NotEnforced(drift));
            }
            Ok(ApplyReport {
                sysctls,
                bridges,
                nft_messages: stats.messages,
                nft_bytes: stats.bytes,
                rules: plan.rule_count(),
                set_elements: plan.element_count(),
                ms: elapsed_ms(start),
            })
        })
    }

    /// Every difference between the plan and the live host: nftables
    /// objects, bridges (absent, down, missing gateway address) and
    /// sysctls. Empty means the host enforces exactly the plan.
    pub fn verify(&self, plan: &HostPlan) -> Result<Vec<HostDrift>, HostError> {
        self.within(|| async {
            let links = Links::connect()?;
            verify_inside(plan, &links).await
        })
    }

    /// Bridges, per-profile counters, set sizes and the drift count.
    pub fn status(&self, plan: &HostPlan) -> Result<Status, HostError> {
        self.within(|| async {
            let links = Links::connect()?;
            let live = nft::read_live()?;
            let mut bridges = Vec::new();
            for b in &plan.bridges {
                let link = links.get(b.name.as_str()).await?;
                let addresses = match &link {
                    Some(_) => links.addresses(b.name.as_str()).await?,
                    None => Vec::new(),
                };
                bridges.push(BridgeStatus {
                    name: b.name.to_string(),
                    profile: b.profile.to_string(),
                    present: link.is_some(),
                    up: link.as_ref().is_some_and(|l| l.up),
                    managed: link.as_ref().is_some_and(|l| l.is_stamped_bridge()),
                    addresses: addresses.iter().map(ToString::to_string).collect(),
                });
            }
            let sets = plan
                .inet
                .sets
                .iter()
                .map(|s| SetStatus {
                    name: s.name.clone(),
                    planned: s.elements.len(),
                    live: live
                        .table(crate::plan::TableFamily::Inet)
                        .and_then(|t| t.set(&s.name))
                        .map(|l| l.elements.len()),
                })
                .collect();
            let drift = verify_inside(plan, &links).await?.len();
            Ok(Status {
                bridges,
                counters: nft::profile_counters(plan, &live),
                sets,
                drift,
            })
        })
    }

    /// Removes corral's tables and the bridges corral created (stamped);
    /// never an adopted bridge or a foreign table. Keeps going past
    /// failures: every error is in the report.
    pub fn teardown(&self) -> Result<TeardownReport, HostError> {
        self.within(|| async {
            let mut report = TeardownReport::default();
            match nft::delete_tables() {
                Ok(_) => report.tables_deleted = true,
                Err(e) => report
                    .errors
                    .push(format!("delete corral's nftables tables: {e}")),
            }
            let links = match Links::connect() {
                Ok(l) => l,
                Err(e) => {
                    report.errors.push(e.to_string());
                    return Ok(report);
                }
            };
            match links.stamped_bridges().await {
                Ok(bridges) => {
                    for b in bridges {
                        match links.delete_stamped_bridge(&b.name).await {
                            Ok(true) => report.bridges_deleted.push(b.name),
                            Ok(false) => {}
                            Err(e) => report.errors.push(e.to_string()),
                        }
                    }
                }
                Err(e) => report.errors.push(e.to_string()),
            }
            Ok(report)
        })
    }

    /// Re-resolved addresses: updates set elements in place (no rule
    /// rebuilt, established flows untouched), then checks the result.
    pub fn refresh(&self, old: &HostPlan, new: &HostPlan) -> Result<nft::RefreshReport, HostError> {
        self.within(|| async {
            let report = nft::refresh_sets(old, new)?;
            let links = Links::connect()?;
            let drift = verify_inside(new, &links).await?;
            if !drift.is_empty() {
                return Err(HostError::NotEnforced(drift));
            }
            Ok(report)
        })
    }
}

/// Drift of nft objects, bridges and sysctls, from inside the namespace.
async fn verify_inside(plan: &HostPlan, links: &Links) -> Result<Vec<HostDrift>, HostError> {
    let live = nft::read_live()?;
    let mut out: Vec<HostDrift> = crate::drift::diff(plan, &live)
        .into_iter()
        .map(HostDrift::Nft)
        .collect();
    for b in &plan.bridges {
        let name = b.name.as_str();
        let Some(link) = links.get(name).await? else {
            out.push(HostDrift::Bridge {
                name: name.to_owned(),
                problem: "missing".to_owned(),
            });
            continue;
        };
        if link.kind.as_deref() != Some("bridge") {
            out.push(HostDrift::Bridge {
                name: name.to_owned(),
                problem: format!("is a {} link, not a bridge", link.kind.unwrap_or_default()),
            });
            continue;
        }
        if !link.up {
            out.push(HostDrift::Bridge {
                name: name.to_owned(),
                problem: "down".to_owned(),
            });
        }
        let addrs = links.addresses(name).await?;
        let wanted = std::iter::once(ipnet::IpNet::V4(b.gateway_v4))
            .chain(b.gateway_v6.map(ipnet::IpNet::V6));
        for w in wanted {
            if !addrs.contains(&w) {
                out.push(HostDrift::Bridge {
                    name: name.to_owned(),
                    problem: format!("gateway address {w} missing"),
                });
            }
        }
    }
    out.extend(
        Sysctls::default()
            .diff(&plan.sysctls)?
            .into_iter()
            .map(HostDrift::Sysctl),
    );
    Ok(out)
}

fn elapsed_ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}
