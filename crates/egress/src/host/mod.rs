//! The host facade the CLI and API call: plan diff, apply, verify, status,
//! teardown, refresh — on this host or inside a network namespace.
//!
//! Apply order: sysctls → nftables (one transaction, so the rules are in
//! place before a new bridge comes up; the gateway resolver's learned
//! elements are carried over) → bridges (create or adopt, br_netfilter
//! switches, gateway addresses, up) → the bridges' own sysctls (they exist
//! only once the bridge does) → the ports of the bridges (each isolated;
//! each bound or quarantined) → read everything back (any difference from
//! the plan fails the apply) → revocation: every tracked flow from a
//! profile subnet that the new plan would not let start is deleted from
//! conntrack (`crate::conntrack`), so narrowing a profile also ends what
//! it no longer allows. Refresh ends the same way.
//!
//! Every step after the commit is part of one transaction: when one fails
//! the previous plan's ruleset is committed again and its revocation run
//! (or, with no previous plan to return to, the new one is completed), so
//! the error always names one plan in force, never a mix
//! ([`HostError::AfterCommit`]).
//!
//! Ports: [`Host::bind_port`] / [`Host::unbind_port`] add or remove one
//! port's binding as set elements (no rule rebuilt) and return the new
//! plan; [`Host::sweep_ports`] isolates and quarantines ports that appeared
//! since (a provider hot-plugged a NIC nobody bound).
//!
//! Teardown deletes corral's two tables and only the bridges carrying
//! corral's stamp, keeps going past failures and returns every error.
//! Sysctls are not reverted by teardown: forwarding may serve other users
//! of the host.

mod carry;
mod live;
mod ports;
mod removal;
mod report;
mod revoke;
mod state;

use std::time::Instant;

use crate::link::{LinkError, Links};
use crate::netns::Netns;
use crate::nft::{self, NftError};
use crate::plan::{HostPlan, PlanError, PortBinding, SysctlPlan};
use crate::sysctl::{SysctlError, Sysctls};
use corral_sandbox_core::ProfileSet;
use serde::Serialize;

pub use live::{LiveAsk, LiveReading};
pub use ports::PortReport;
pub use removal::UnplannedBridge;

pub use report::{
    ApplyReport, BridgeReport, BridgeStatus, HostDrift, RemovedBridge, SetStatus, Status,
    TeardownReport,
};
pub use revoke::RevokeReport;
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
    /// Listing or deleting conntrack entries failed.
    #[error(transparent)]
    Conntrack(#[from] crate::conntrack::ConntrackError),
    /// The plan cannot take the change (a bad binding).
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// A step after the nftables commit failed; the error says which
    /// ruleset is in force now.
    #[error("{step} failed after the new ruleset was committed, so {in_force}")]
    AfterCommit {
        /// The step that failed.
        step: ApplyStep,
        /// Why it failed.
        #[source]
        cause: Box<HostError>,
        /// What is in force now, and what the caller must record.
        in_force: InForce,
    },
    /// A failure injected by a fault test.
    #[error("fault injected at: {0}")]
    Injected(ApplyStep),
    /// After apply, the live state still differs from the plan.
    #[error(
        "applied, but the host does not match the plan ({} difference(s), first: {}); run `corral host verify` for the list",
        .0.len(),
        .0.first().map(ToString::to_string).unwrap_or_default()
    )]
    NotEnforced(Vec<HostDrift>),
    /// The plan drops bridges that still have ports (sandboxes attached);
    /// nothing was changed.
    #[error(
        "{}; nothing was changed. Stop or remove the sandboxes on them, or pass --force (their ports are set down and cut off, then the bridges removed)",
        removal::describe(.0)
    )]
    PortsAttached(Vec<UnplannedBridge>),
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

    /// The addresses the gateway resolvers learned into the dynamic sets
    /// and that have not expired yet (what
    /// [`HostPlan::trace`](crate::plan::HostPlan::trace) looks up there).
    pub fn learned(&self) -> Result<crate::plan::eval::Learned, HostError> {
        self.within(|| async { revoke::learned_now() })
    }

    /// What `apply(plan)` would change: every difference between the plan
    /// and the live state (empty when applying would be a no-op).
    pub fn plan_diff(&self, plan: &HostPlan) -> Result<Vec<HostDrift>, HostError> {
        self.verify(plan)
    }

    /// The host's directly connected networks and routers, leaving out the
    /// plan's own bridges: what `PlanSettings::host_networks` should hold.
    pub fn networks(&self, bridges: &[String]) -> Result<crate::hostnet::HostNetworks, HostError> {
        self.within(|| async {
            let links = Links::connect()?;
            let names: Vec<&str> = bridges.iter().map(String::as_str).collect();
            Ok(links.host_networks(&names).await?)
        })
    }

    /// True when a link named `name` exists in the host's namespace.
    pub fn link_exists(&self, name: &str) -> Result<bool, HostError> {
        self.within(|| async { Ok(Links::connect()?.get(name).await?.is_some()) })
    }

    /// Applies `plan`; see the module docs for the order. Nothing the
    /// gateway resolver learned is carried over (there is no previous plan
    /// to vouch for it): [`Host::apply_after`] does.
    pub fn apply(&self, plan: &HostPlan) -> Result<ApplyReport, HostError> {
        self.apply_after(plan, None)
    }

    /// Applies `plan` in place of `before` (the plan in force, when known):
    /// as [`Host::apply`], carrying over the learned elements `plan` still
    /// admits for the same name and class, each with the lifetime it had
    /// left, in the same transaction (the rule: `carry`).
    ///
    /// Transactional to the end: a failure at any step after the nftables
    /// commit never leaves a mix. With `before`, the previous ruleset is
    /// committed again, the flows it does not allow are revoked and the
    /// bridges this apply created are removed
    /// ([`HostError::AfterCommit`] with [`InForce::Previous`]). Without
    /// `before`, or when that roll-back itself fails, the new ruleset
    /// stays and the apply is completed as far as it can be: its
    /// revocation runs ([`InForce::New`]), and the caller must record the
    /// new plan as applied.
    pub fn apply_after(
        &self,
        plan: &HostPlan,
        before: Option<&HostPlan>,
    ) -> Result<ApplyReport, HostError> {
        self.apply_faulted(plan, before, false, None)
    }

    /// [`Host::apply_after`] failing on purpose at `step` (fault tests:
    /// every step after the commit must leave the previous ruleset in
    /// force or the new one complete).
    #[cfg(any(test, feature = "test-support"))]
    pub fn apply_with_fault(
        &self,
        plan: &HostPlan,
        before: Option<&HostPlan>,
        step: ApplyStep,
    ) -> Result<ApplyReport, HostError> {
        self.apply_faulted(plan, before, false, Some(step))
    }

    /// The bridges corral created or uses that `plan` does not name, with
    /// their ports: what an apply of `plan` removes (and refuses to remove
    /// without `force` while a port is attached).
    pub fn unplanned(&self, plan: &HostPlan) -> Result<Vec<UnplannedBridge>, HostError> {
        self.within(|| async { removal::unplanned(plan, &Links::connect()?).await })
    }

    /// [`Host::apply_after`], removing the bridges `plan` does not name
    /// (see [`Host::unplanned`]). A bridge with ports is refused
    /// ([`HostError::PortsAttached`], before anything changes) unless
    /// `force`: then its ports are set down and added to `cut_ports` first,
    /// the new ruleset goes in, and the bridge is deleted (an adopted one
    /// only leaves corral's group). The report's `cut_ports` is what the
    /// record must keep.
    pub fn apply_removing(
        &self,
        plan: &HostPlan,
        before: Option<&HostPlan>,
        force: bool,
    ) -> Result<ApplyReport, HostError> {
        self.apply_faulted(plan, before, force, None)
    }

    fn apply_faulted(
        &self,
        plan: &HostPlan,
        before: Option<&HostPlan>,
        force: bool,
        fault: Option<ApplyStep>,
    ) -> Result<ApplyReport, HostError> {
        self.within(|| async {
            let start = Instant::now();
            let links = Links::connect()?;
            let leaving = removal::unplanned(plan, &links).await?;
            if !force && leaving.iter().any(|b| !b.ports.is_empty()) {
                return Err(HostError::PortsAttached(
                    leaving
                        .into_iter()
                        .filter(|b| !b.ports.is_empty())
                        .collect(),
                ));
            }
            let cut = removal::cut_ports(plan, &leaving, &links).await?;
            let plan = &plan.with_fail_closed(plan.retired.clone(), cut);
            let (early, per_bridge) = split_sysctls(plan);
            let mut sysctls = Sysctls::default().apply(&early)?;
            let keep = carry::kept_learned(plan, before, &nft::read_learned()?);
            let carried = keep.values().map(Vec::len).sum();
            let stats = nft::apply_keeping(plan, &keep)?;
            // From here on the new ruleset is in force: every failure goes
            // through `after_commit`, never straight out.
            let mut created = Vec::new();
            let finished = async {
                let links = Links::connect()?;
                fail_at(fault, ApplyStep::Bridges)?;
                // Already cut and dropped: a failure from here leaves them so.
                let removed = removal::remove(&leaving, &links).await?;
                let outcomes = links.ensure_bridges(&plan.bridges).await?;
                let bridges: Vec<BridgeReport> = plan
                    .bridges
                    .iter()
                    .zip(outcomes)
                    .map(|(b, outcome)| BridgeReport {
                        name: b.name.to_string(),
                        profile: b.profile.to_string(),
                        outcome,
                    })
                    .collect();
                created.extend(
                    bridges
                        .iter()
                        .filter(|b| b.outcome == crate::link::BridgeOutcome::Created)
                        .map(|b| b.name.clone()),
                );
                fail_at(fault, ApplyStep::BridgeSysctls)?;
                sysctls.extend(Sysctls::default().apply(&per_bridge)?);
                fail_at(fault, ApplyStep::Ports)?;
                let ports = ports::sweep(plan, &links).await?;
                fail_at(fault, ApplyStep::ReadBack)?;
                let drift = verify_inside(plan, &links, false).await?;
                if !drift.is_empty() {
                    return Err(HostError::NotEnforced(drift));
                }
                fail_at(fault, ApplyStep::Revoke)?;
                let revoked = revoke::revoke(plan)?;
                Ok((bridges, ports, revoked, removed))
            }
            .await;
            let (bridges, ports, revoked, removed) = match finished {
                Ok(done) => done,
                Err(cause) => return Err(after_commit(plan, before, &created, cause).await),
            };
            Ok(ApplyReport {
                sysctls,
                bridges,
                nft_messages: stats.messages,
                nft_bytes: stats.bytes,
                rules: plan.rule_count(),
                set_elements: plan.element_count(),
                carried,
                revoked,
                ports,
                removed,
                cut_ports: plan.cut_ports.clone(),
                ms: elapsed_ms(start),
            })
        })
    }

    /// Puts `to` back in force in place of `from` (whose commit succeeded
    /// but whose apply could not be completed or recorded): `to`'s ruleset
    /// in one transaction, keeping what was learned that `to` admits, then
    /// the flows `to` does not allow revoked.
    pub fn roll_back(&self, from: &HostPlan, to: &HostPlan) -> Result<RevokeReport, HostError> {
        self.within(|| async { roll_back_inside(from, to) })
    }

    /// Every difference between the plan and the live host: nftables
    /// objects, bridges (absent, down, missing gateway address) and
    /// sysctls. Empty means the host enforces exactly the plan.
    pub fn verify(&self, plan: &HostPlan) -> Result<Vec<HostDrift>, HostError> {
        self.within(|| async {
            let links = Links::connect()?;
            verify_inside(plan, &links, true).await
        })
    }

    /// Bridges, per-profile counters, set sizes and the drift count.
    pub fn status(&self, plan: &HostPlan) -> Result<Status, HostError> {
        self.within(|| async {
            let links = Links::connect()?;
            let live = nft::read_live()?;
            let mut bridges = Vec::new();
            let all = links.list().await?;
            let mut by_index = links.all_addresses().await?;
            for b in &plan.bridges {
                let link = all.iter().find(|l| l.name == b.name.as_str()).cloned();
                let addresses = link
                    .as_ref()
                    .and_then(|l| by_index.remove(&l.index))
                    .unwrap_or_default();
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
            let drift = verify_inside(plan, &links, true).await?.len();
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
            // An adopted bridge keeps its place but leaves corral's group.
            match links.unplanned_bridges(&[]).await {
                Ok(all) => {
                    for (b, _) in all.iter().filter(|(b, _)| !b.is_stamped_bridge()) {
                        if let Err(e) = links.set_group(&b.name, 0).await {
                            report.errors.push(e.to_string());
                        }
                    }
                }
                Err(e) => report.errors.push(e.to_string()),
            }
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

    /// Binds `binding`'s port (replacing an earlier binding of the same
    /// port) and returns the new plan: the binding's set elements are added
    /// in one transaction (no rule rebuilt), the port — if it exists yet —
    /// is isolated and leaves the quarantine, and the result is verified.
    /// `profiles` is the profile set `plan` was built from. Call it before
    /// the sandbox starts, with the MAC and addresses it will use (see
    /// [`PortBinding::allocate`]).
    pub fn bind_port(
        &self,
        plan: &HostPlan,
        profiles: &ProfileSet,
        binding: PortBinding,
    ) -> Result<HostPlan, HostError> {
        let new = plan.with_binding(profiles, binding)?;
        self.rebind(plan, new)
    }

    /// Removes the binding of `port` (if any) and returns the new plan; a
    /// port still on a bridge is quarantined.
    pub fn unbind_port(
        &self,
        plan: &HostPlan,
        profiles: &ProfileSet,
        port: &str,
    ) -> Result<HostPlan, HostError> {
        let new = plan.without_binding(profiles, port)?;
        self.rebind(plan, new)
    }

    fn rebind(&self, old: &HostPlan, new: HostPlan) -> Result<HostPlan, HostError> {
        self.within(|| async {
            nft::refresh_sets(old, &new)?;
            let links = Links::connect()?;
            ports::sweep(&new, &links).await?;
            let drift = verify_inside(&new, &links, false).await?;
            if !drift.is_empty() {
                return Err(HostError::NotEnforced(drift));
            }
            Ok(())
        })?;
        Ok(new)
    }

    /// Isolates every port of the plan's bridges and quarantines every one
    /// without a binding (and releases ports that left or got bound).
    pub fn sweep_ports(&self, plan: &HostPlan) -> Result<Vec<PortReport>, HostError> {
        self.within(|| async {
            let links = Links::connect()?;
            ports::sweep(plan, &links).await
        })
    }

    /// Re-resolved addresses and re-read host networks: updates set
    /// elements in place (no rule rebuilt), checks the result, then revokes
    /// the tracked flows the new plan no longer allows (flows it still
    /// allows are untouched).
    pub fn refresh(
        &self,
        old: &HostPlan,
        new: &HostPlan,
    ) -> Result<(nft::RefreshReport, RevokeReport), HostError> {
        self.within(|| async {
            let report = nft::refresh_sets(old, new)?;
            // As in apply: once the new elements are in force a failure
            // puts the old ones back (or completes the revocation).
            let finished = async {
                let links = Links::connect()?;
                let drift = verify_inside(new, &links, false).await?;
                if !drift.is_empty() {
                    return Err(HostError::NotEnforced(drift));
                }
                revoke::revoke(new)
            }
            .await;
            match finished {
                Ok(revoked) => Ok((report, revoked)),
                Err(cause) => {
                    let step = match &cause {
                        HostError::NotEnforced(_) => ApplyStep::ReadBack,
                        _ => ApplyStep::Revoke,
                    };
                    let in_force = match nft::refresh_sets(new, old)
                        .map_err(HostError::from)
                        .and_then(|_| revoke::revoke(old))
                    {
                        Ok(revoked) => InForce::Previous { revoked },
                        Err(e) => InForce::New {
                            revoked: revoke::revoke(new).map_err(|e| e.to_string()),
                            roll_back: Some(e.to_string()),
                        },
                    };
                    Err(HostError::AfterCommit {
                        step,
                        cause: Box::new(cause),
                        in_force,
                    })
                }
            }
        })
    }
}

/// A step of an apply after its nftables commit (where a failure must
/// be rolled back or completed, never left half done).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ApplyStep {
    /// Creating or adopting the bridges, their addresses, bringing them up.
    Bridges,
    /// The bridges' own sysctls.
    BridgeSysctls,
    /// Isolating, binding and quarantining the bridges' ports.
    Ports,
    /// Reading everything back and comparing it with the plan.
    ReadBack,
    /// Deleting the tracked flows the new plan does not allow.
    Revoke,
}

impl ApplyStep {
    /// Every step, in the order an apply runs them.
    pub const ALL: [ApplyStep; 5] = [
        ApplyStep::Bridges,
        ApplyStep::BridgeSysctls,
        ApplyStep::Ports,
        ApplyStep::ReadBack,
        ApplyStep::Revoke,
    ];
}

impl std::fmt::Display for ApplyStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ApplyStep::Bridges => "setting up the bridges",
            ApplyStep::BridgeSysctls => "writing the bridges' sysctls",
            ApplyStep::Ports => "sweeping the bridges' ports",
            ApplyStep::ReadBack => "reading the result back",
            ApplyStep::Revoke => "revoking flows the new plan refuses",
        })
    }
}

/// Which ruleset a failed apply left in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "in_force")]
pub enum InForce {
    /// The previous plan's: committed again, the flows it does not allow
    /// revoked, the bridges the apply created removed. Keep the previous
    /// record.
    Previous {
        /// What the revocation under the previous plan deleted.
        revoked: RevokeReport,
    },
    /// The new plan's (there was no previous plan to return to, or
    /// returning failed): its revocation ran. Record the new plan as
    /// applied; `verify` names what is still missing.
    New {
        /// What the revocation under the new plan deleted, or why it
        /// could not run.
        revoked: Result<RevokeReport, String>,
        /// Why the previous plan could not be put back, when there was one.
        roll_back: Option<String>,
    },
}

impl std::fmt::Display for InForce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InForce::Previous { revoked } => write!(
                f,
                "the previous ruleset was put back in force ({} flow(s) it refuses revoked)",
                revoked.deleted.len()
            ),
            InForce::New { revoked, roll_back } => {
                f.write_str("the new ruleset stays in force")?;
                if let Some(why) = roll_back {
                    write!(f, " (the previous one could not be put back: {why})")?;
                }
                match revoked {
                    Ok(r) => write!(
                        f,
                        "; {} flow(s) it refuses revoked; run `corral host verify` for what is missing",
                        r.deleted.len()
                    ),
                    Err(e) => write!(f, "; revoking the flows it refuses failed too: {e}"),
                }
            }
        }
    }
}

fn fail_at(fault: Option<ApplyStep>, step: ApplyStep) -> Result<(), HostError> {
    if fault == Some(step) {
        return Err(HostError::Injected(step));
    }
    Ok(())
}

/// The failure `cause` hit after `plan`'s commit: roll back to `before`
/// (removing the bridges this apply `created` that `before` lacks), or,
/// without it or when that fails, complete the revocation under `plan`.
async fn after_commit(
    plan: &HostPlan,
    before: Option<&HostPlan>,
    created: &[String],
    cause: HostError,
) -> HostError {
    let step = match &cause {
        HostError::Injected(step) => *step,
        HostError::NotEnforced(_) => ApplyStep::ReadBack,
        HostError::Conntrack(_) => ApplyStep::Revoke,
        HostError::Sysctl(_) => ApplyStep::BridgeSysctls,
        _ => ApplyStep::Bridges,
    };
    let mut roll_back = None;
    if let Some(before) = before {
        match roll_back_inside(plan, before) {
            Ok(revoked) => {
                remove_created(before, created).await;
                return HostError::AfterCommit {
                    step,
                    cause: Box::new(cause),
                    in_force: InForce::Previous { revoked },
                };
            }
            Err(e) => roll_back = Some(e.to_string()),
        }
    }
    let revoked = revoke::revoke(plan).map_err(|e| e.to_string());
    HostError::AfterCommit {
        step,
        cause: Box::new(cause),
        in_force: InForce::New { revoked, roll_back },
    }
}

fn roll_back_inside(from: &HostPlan, to: &HostPlan) -> Result<RevokeReport, HostError> {
    let keep = carry::kept_learned(to, Some(from), &nft::read_learned()?);
    nft::apply_keeping(to, &keep)?;
    revoke::revoke(to)
}

/// Best effort: a bridge the failed apply created has no port yet and is
/// not in the plan put back; left in place it would only be refused
/// (nothing plans it), so a failure to remove it is not reported.
async fn remove_created(kept: &HostPlan, created: &[String]) {
    let Ok(links) = Links::connect() else {
        return;
    };
    for name in created {
        if !kept.bridges.iter().any(|b| b.name.as_str() == name) {
            let _ = links.delete_stamped_bridge(name).await;
        }
    }
}

/// Sysctls that exist before the bridges, and the bridges' own
/// (`net.ipv4.conf.<bridge>.*`), which exist only once the bridge does.
fn split_sysctls(plan: &HostPlan) -> (Vec<SysctlPlan>, Vec<SysctlPlan>) {
    let devs: std::collections::HashSet<String> = plan
        .bridges
        .iter()
        .map(|b| b.name.as_str().replace('.', "/"))
        .collect();
    // `net.ipv4.conf.<dev>.<key>`: the device is the segment after `.conf.`
    // (a bridge name holds no dot: dots are written as slashes).
    let bridge_of = |key: &str| {
        key.split_once(".conf.")
            .and_then(|(_, rest)| rest.split_once('.'))
            .map(|(dev, _)| dev.to_owned())
    };
    plan.sysctls
        .iter()
        .cloned()
        .partition(|s| !bridge_of(&s.key).is_some_and(|d| devs.contains(&d)))
}

/// Drift of nft objects, bridges and sysctls, from inside the namespace.
/// With `live_checks` (verify and status, not the read-back that ends an apply or
/// refresh), also what happened on the host since: its networks differ
/// from those the plan was built with, or packets from a profile subnet
/// arrived elsewhere than on its bridge (counted by the prerouting drops:
/// a sandbox whose port left its bridge).
async fn verify_inside(
    plan: &HostPlan,
    links: &Links,
    live_checks: bool,
) -> Result<Vec<HostDrift>, HostError> {
    // The planned rules' texts need no live state: encode them on a second
    // thread while this one reads the kernel's (one libnftnl rule each,
    // tens of thousands at hundreds of profiles).
    let (nft_live, texts) = std::thread::scope(|s| {
        let texts = s.spawn(|| crate::drift::PlannedTexts::of(plan));
        let live = nft::read_live_enforcing();
        (live, texts.join())
    });
    let nft_live = nft_live?;
    let texts = texts.unwrap_or_else(|_| crate::drift::PlannedTexts::of(plan));
    let mut out: Vec<HostDrift> = crate::drift::diff_with(plan, &nft_live, &texts)
        .into_iter()
        .map(HostDrift::Nft)
        .collect();
    out.extend(ports::drift(plan, links, &nft_live).await?);
    if live_checks {
        out.extend(stray_sources(plan, &nft_live));
    }
    if let Some(planned) = plan.host_networks.as_ref().filter(|_| live_checks) {
        let bridges: Vec<&str> = plan.bridges.iter().map(|b| b.name.as_str()).collect();
        let now = links.host_networks(&bridges).await?.to_nets();
        if &now != planned {
            let fmt = |v: Vec<&ipnet::IpNet>| {
                v.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            out.push(HostDrift::HostNetworks {
                new: fmt(now.iter().filter(|n| !planned.contains(n)).collect()),
                gone: fmt(planned.iter().filter(|n| !now.contains(n)).collect()),
            });
        }
    }
    let planned: Vec<&str> = plan.bridges.iter().map(|b| b.name.as_str()).collect();
    for (b, ports) in links.unplanned_bridges(&planned).await? {
        out.push(HostDrift::UnplannedBridge {
            name: b.name,
            ports,
        });
    }
    // One dump of the links and one of the addresses for every bridge.
    let all = links.list().await?;
    let mut addresses = links.all_addresses().await?;
    for b in &plan.bridges {
        let name = b.name.as_str();
        let Some(link) = all.iter().find(|l| l.name == name).cloned() else {
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
        if link.group != crate::link::STAMP_GROUP {
            out.push(HostDrift::Bridge {
                name: name.to_owned(),
                problem: format!(
                    "in netdev group {} instead of corral's {} (once its profile is removed, the rules that drop an unplanned bridge's traffic would not know it)",
                    link.group,
                    crate::link::STAMP_GROUP
                ),
            });
        }
        let addrs = addresses.remove(&link.index).unwrap_or_default();
        let wanted = std::iter::once(ipnet::IpNet::V4(b.gateway_v4))
            .chain(b.gateway_v6.map(ipnet::IpNet::V6));
        let wanted: Vec<ipnet::IpNet> = wanted.collect();
        for w in &wanted {
            if !addrs.contains(w) {
                out.push(HostDrift::Bridge {
                    name: name.to_owned(),
                    problem: format!("gateway address {w} missing"),
                });
            }
        }
        for a in &addrs {
            let link_local =
                matches!(a, ipnet::IpNet::V6(v6) if (v6.addr().segments()[0] & 0xffc0) == 0xfe80);
            if !wanted.contains(a) && !link_local {
                out.push(HostDrift::Bridge {
                    name: name.to_owned(),
                    problem: format!(
                        "extra address {a} (not planned: it makes the host reachable on another address and its subnet connected to the bridge)"
                    ),
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

/// Packets the arrival rules (each profile's `<p>-arrival` chain, reached
/// from prerouting by source subnet) dropped, per profile.
fn stray_sources(plan: &HostPlan, live: &nft::LiveState) -> Vec<HostDrift> {
    let Some(table) = live.table(crate::plan::TableFamily::Inet) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for b in &plan.bridges {
        let name = crate::plan::names::arrival_chain(&b.profile);
        let (Some(planned), Some(lc)) = (
            plan.inet.chains.iter().find(|c| c.name == name),
            table.chain(&name),
        ) else {
            continue;
        };
        let packets: u64 = planned
            .rules
            .iter()
            .zip(&lc.rules)
            .filter(|(r, _)| {
                r.verdict == crate::plan::Verdict::Drop
                    && r.matches
                        .contains(&crate::plan::Match::IifNameNot(b.name.to_string()))
            })
            .map(|(_, l)| l.packets)
            .sum();
        if packets > 0 {
            out.push(HostDrift::StraySource {
                profile: b.profile.to_string(),
                bridge: b.name.to_string(),
                packets,
            });
        }
    }
    out
}

fn elapsed_ms(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX)
}
