//! The host lifecycle, in the order that keeps it fail-closed:
//! sysctls → nftables (one transaction) → bridges → read-back (all in
//! `Host::apply_after`, which carries over what the gateway resolver
//! learned under the plan in force and the new plan still admits) →
//! record what was applied → the bound ports' DHCP
//! reservations → gateways (dnsmasq binds the bridges' gateway addresses
//! and fills the DNS sets the apply created).
//! Teardown runs the other way: gateways, tables and bridges, then the
//! record. Front-ends call these and render the answers.
//!
//! Apply, refresh and teardown hold the state directory's host lock for
//! their whole run, so a timed refresh never interleaves with an apply (and
//! never records a stale plan over it).

mod config_check;
mod errors;
mod explain;
mod planned;
mod unresolved;
pub mod wiring;

use std::path::{Path, PathBuf};

use corral_egress::host::{
    ApplyReport, HostDrift, HostError, InForce, PortReport, StateStore, Status, TeardownReport,
};
use corral_egress::link::BridgeOutcome;
use corral_egress::nft::RefreshReport;
use corral_gateway::{GatewayReport, GatewayState};
use corral_sandbox_core::BridgeName;

pub use config_check::{ConfigCheck, compare_with_applied};
pub use errors::{ApplyError, RefreshError, TeardownError};
pub use explain::{Answer, ExplainError, Explanation, NameLookup, Subject, live_word};
pub use planned::{
    Planned, PlanningError, applied, plan_config, plan_to_check, with_host_networks,
};
pub use unresolved::{UnresolvedName, unresolved_names};

use crate::target::Target;

/// What an apply did.
#[derive(Debug)]
pub struct Applied {
    /// The host facade's report (sysctls, bridges, rules, timing).
    pub report: ApplyReport,
    /// The gateway started on every profile bridge.
    pub gateways: Vec<GatewayReport>,
    /// Where the applied inputs were recorded.
    pub state_file: PathBuf,
}

/// `planned` with the subnets it retires: those `before` retired or
/// planned and `planned` does not plan (`fail_closed::retire`), and the
/// ports `before` had cut.
fn retiring(planned: Planned, before: Option<&corral_egress::plan::HostPlan>) -> Planned {
    let Some(before) = before else {
        return planned;
    };
    let retired = corral_egress::plan::fail_closed::retire(
        &before.retired,
        &before.subnets(),
        &planned.plan.subnets(),
    );
    Planned {
        plan: planned
            .plan
            .with_fail_closed(retired, before.cut_ports.clone()),
        ..planned
    }
}

/// What a refresh did.
#[derive(Debug)]
pub struct Refreshed {
    /// Elements added and removed.
    pub report: RefreshReport,
    /// Tracked flows the refreshed plan no longer allows, deleted.
    pub revoked: corral_egress::host::RevokeReport,
    /// Every port of the bridges, swept: isolated, and bound or
    /// quarantined.
    pub ports: Vec<PortReport>,
    /// Where the new inputs were recorded.
    pub state_file: PathBuf,
}

/// The host commands on one target and state directory.
#[derive(Debug)]
pub struct HostService {
    target: Target,
    state_dir: PathBuf,
}

impl HostService {
    /// Act on `target`, with state in `state_dir` (see
    /// [`crate::state_dir::state_dir`] for the rule that picks it).
    pub fn new(target: Target, state_dir: PathBuf) -> Self {
        Self { target, state_dir }
    }

    /// The target.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The state directory.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The record of applied inputs.
    pub fn store(&self) -> StateStore {
        StateStore::new(&self.state_dir)
    }

    fn host_error(&self, source: HostError) -> (String, HostError) {
        (self.target.describe(), source)
    }

    /// `planned` with the target's own networks and routers (what apply
    /// and refresh enforce; see [`with_host_networks`]).
    pub fn complete(&self, planned: &Planned) -> Result<Planned, PlanningError> {
        with_host_networks(planned, &self.target.host)
    }

    /// Every difference between `planned` and the live state (what an apply
    /// would change: the port bindings recorded by the last apply are kept,
    /// as apply keeps them). Changes nothing.
    pub fn plan_diff(&self, planned: &Planned) -> Result<Vec<HostDrift>, HostError> {
        // An unreadable record fails the apply itself, with its reason.
        let recorded = applied(&self.store()).ok().flatten();
        match recorded.map(|r| planned.keeping_bindings(&r.plan.bindings)) {
            Some(Ok(kept)) => self.target.host.plan_diff(&kept.plan),
            _ => self.target.host.plan_diff(&planned.plan),
        }
    }

    /// Every difference between `planned` and the live state.
    pub fn verify(&self, planned: &Planned) -> Result<Vec<HostDrift>, HostError> {
        self.target.host.verify(&planned.plan)
    }

    /// Bridges, counters, sets and drift, plus every recorded gateway.
    pub fn status(&self, planned: &Planned) -> Result<(Status, Vec<GatewayState>), HostError> {
        let status = self.target.host.status(&planned.plan)?;
        Ok((status, corral_gateway::status_recorded(&self.state_dir)))
    }

    /// Apply `planned`: the sequence in the module docs. The port bindings
    /// recorded by the last apply that still fit `planned`'s profiles are
    /// kept (a re-apply must not cut bound sandboxes off).
    pub fn apply(&self, planned: &Planned) -> Result<Applied, ApplyError> {
        self.apply_forcing(planned, false)
    }

    /// [`HostService::apply`]; a bridge corral created or uses that
    /// `planned` no longer names is removed with its gateway. While such a
    /// bridge has ports (sandboxes attached) the apply refuses before
    /// changing anything, naming them, unless `force`: then the ports are
    /// set down and cut off (`cut_ports`), and the bridge removed. The
    /// subnets corral planned before and `planned` lacks are retired
    /// (dropped from and to any interface from now on).
    pub fn apply_forcing(&self, planned: &Planned, force: bool) -> Result<Applied, ApplyError> {
        let _lock = self.store().lock().map_err(ApplyError::Lock)?;
        let planned = self.complete(planned).map_err(ApplyError::Planning)?;
        let previous = self
            .store()
            .load()
            .map_err(|e| ApplyError::Bindings(PlanningError::State(e)))?
            .map(|i| i.bindings)
            .unwrap_or_default();
        let planned = planned
            .keeping_bindings(&previous)
            .map_err(ApplyError::Bindings)?;
        // The plan in force, to vouch for what the gateway resolver learned
        // under it: when it cannot be rebuilt, nothing learned is carried
        // over (sandboxes resolve again), which never opens anything.
        let before = self.store().load_plan().ok().flatten().map(|(_, p)| p);
        let planned = retiring(planned, before.as_ref());
        // Refused with ports before anything changes (the egress apply
        // checks again); otherwise the leaving bridges' gateways stop
        // first, as dnsmasq holds their addresses.
        let leaving = self.target.host.unplanned(&planned.plan).map_err(|e| {
            let (target, source) = self.host_error(e);
            ApplyError::Host { target, source }
        })?;
        let attached: Vec<_> = leaving
            .iter()
            .filter(|b| !b.ports.is_empty())
            .cloned()
            .collect();
        if !force && !attached.is_empty() {
            return Err(ApplyError::Host {
                target: self.target.describe(),
                source: HostError::PortsAttached(attached),
            });
        }
        for b in &leaving {
            if let Ok(name) = BridgeName::new(b.name.clone()) {
                corral_gateway::Gateway::new(&self.state_dir, &name)
                    .stop()
                    .map_err(ApplyError::GatewayStop)?;
            }
        }
        // A gateway still serving a name the new plan removes would add its
        // answers to a learned set the new plan keeps (its class lives on)
        // between the new ruleset and the gateway's restart: stop it first.
        // Its sandboxes have no DNS until the restart below (~0.1 s); if the
        // apply fails, none until the next one — closed, never open.
        if let Some(b) = &before {
            let narrowed =
                corral_egress::plan::feeds::narrowed(&b.dns_feeds, &planned.plan.dns_feeds);
            for bridge in b.bridges.iter().filter(|x| narrowed.contains(&x.profile)) {
                corral_gateway::Gateway::new(&self.state_dir, &bridge.name)
                    .stop()
                    .map_err(ApplyError::GatewayStop)?;
            }
        }
        // corral's resolvers see their records change before the rules do
        // (each refuses from then until its host starts the new one), so
        // none serves an old policy against the new ruleset.
        let upstreams = corral_gateway::upstreams_or_host(
            &planned.config.host.dns_upstreams,
            Path::new(corral_gateway::RESOLV_CONF),
        );
        corral_gateway::resolver::record_all(
            &self.state_dir,
            &planned.config.profiles,
            &upstreams,
            planned.plan.host_networks.as_deref().unwrap_or(&[]),
            corral_gateway::DnsTiming::default(),
        )
        .map_err(ApplyError::Gateways)?;
        let store = self.store();
        let report = match self
            .target
            .host
            .apply_removing(&planned.plan, before.as_ref(), force)
        {
            Ok(report) => report,
            Err(e) => {
                // The new ruleset stayed in force (nothing to return to, or
                // returning failed): it is what was applied, so it is what
                // the record must say, or verify and the gate would judge
                // the host against a plan that is no longer there.
                if let HostError::AfterCommit {
                    in_force: InForce::New { .. },
                    ..
                } = &e
                    && let Err(record) = store.save(&planned.inputs())
                {
                    tracing::error!(error = %record, "recording the plan left in force by a failed apply");
                }
                let (target, source) = self.host_error(e);
                return Err(ApplyError::Host { target, source });
            }
        };
        // The ports cut now and before (while they exist) are recorded.
        let planned = Planned {
            plan: planned
                .plan
                .with_fail_closed(planned.plan.retired.clone(), report.cut_ports.clone()),
            ..planned
        };
        if let Err(e) = store.save(&planned.inputs()) {
            // Unrecorded rules would be judged against the old record by
            // every later verify, refresh and start: put the old ones back.
            let restored = before
                .as_ref()
                .map(|b| self.target.host.roll_back(&planned.plan, b));
            return Err(ApplyError::Record {
                source: e,
                restored: match restored {
                    Some(Ok(_)) => "the previous ruleset was put back in force".to_owned(),
                    Some(Err(r)) => format!(
                        "putting the previous ruleset back failed too ({r}); the new one is in force unrecorded"
                    ),
                    None => "there was no previous ruleset; the new one is in force unrecorded"
                        .to_owned(),
                },
            });
        }
        // The bound ports' DHCP reservations first, so each gateway starts
        // serving exactly them.
        corral_gateway::reserve_all(
            &self.state_dir,
            planned.plan.bridges.iter().map(|b| &b.name),
            &planned.plan.bindings,
        )
        .map_err(ApplyError::Gateways)?;
        // A bridge created by this apply needs its gateway restarted (the
        // old daemon's sockets belonged to the bridge it replaced); every
        // other gateway restarts only when its configuration changed.
        let fresh: Vec<BridgeName> = report
            .bridges
            .iter()
            .filter(|b| b.outcome == BridgeOutcome::Created)
            .filter_map(|b| BridgeName::new(b.name.clone()).ok())
            .collect();
        let gateways = corral_gateway::start_for_host(
            &self.target.host,
            &self.state_dir,
            &planned.config.profiles,
            &planned.config.host,
            planned.plan.host_networks.as_deref().unwrap_or(&[]),
            &fresh,
        )
        .map_err(ApplyError::Gateways)?;
        // Last: they serve only the canary, never the enforcement, so their
        // failure leaves every rule above in force.
        let v = &planned.config.host.verification;
        let ns = self.target.host.netns();
        if v.canary.is_none() || v.canary_v6.is_none() {
            corral_egress::own_targets::ensure(ns, &self.state_dir)
                .map_err(ApplyError::OwnTargets)?;
        } else {
            corral_egress::own_targets::remove(ns, &self.state_dir)
                .map_err(ApplyError::OwnTargets)?;
        }
        Ok(Applied {
            report,
            gateways,
            state_file: store.path(),
        })
    }

    /// Re-resolve allowlisted names and update set elements in place. With
    /// `explicit`, that configuration replaces the applied one; otherwise
    /// the applied configuration is re-resolved as it stands.
    pub fn refresh(
        &self,
        explicit: Option<crate::config::LoadedConfig>,
    ) -> Result<(Planned, Refreshed), RefreshError> {
        let store = self.store();
        // Held from reading the applied plan to recording the new one, so an
        // apply in between is never undone by this refresh's stale plan.
        let _lock = store.lock().map_err(RefreshError::Lock)?;
        let Some(old) = applied(&store)? else {
            return Err(RefreshError::NothingApplied {
                target: self.target.describe(),
                state_file: store.path(),
            });
        };
        let new = match explicit {
            Some(loaded) => plan_config(loaded)?,
            None => {
                let mut again = plan_config(crate::config::LoadedConfig {
                    config: old.config.clone(),
                    origin: crate::config::Origin::Builtin,
                })?;
                again.origin = "what was applied".to_owned();
                again
            }
        };
        let new = self.complete(&new)?.keeping_bindings(&old.plan.bindings)?;
        // What the last apply retired and cut stays so.
        let new = Planned {
            plan: new
                .plan
                .with_fail_closed(old.plan.retired.clone(), old.plan.cut_ports.clone()),
            ..new
        };
        // A timed refresh is also when a port hot-plugged since the last
        // apply, and bound by nobody, gets quarantined (before the refresh
        // verifies the result, which reports such a port).
        let ports = self
            .target
            .host
            .sweep_ports(&new.plan)
            .map_err(RefreshError::Sweep)?;
        let (report, revoked) = match self.target.host.refresh(&old.plan, &new.plan) {
            Ok(done) => done,
            Err(e) => {
                // As in apply: new elements left in force are recorded.
                if let HostError::AfterCommit {
                    in_force: InForce::New { .. },
                    ..
                } = &e
                    && let Err(record) = store.save(&new.inputs())
                {
                    tracing::error!(error = %record, "recording the sets left in force by a failed refresh");
                }
                let (target, source) = self.host_error(e);
                return Err(RefreshError::Host { target, source });
            }
        };
        store.save(&new.inputs()).map_err(RefreshError::Record)?;
        Ok((
            new,
            Refreshed {
                report,
                revoked,
                ports,
                state_file: store.path(),
            },
        ))
    }

    /// Stop the gateways, remove corral's tables and the bridges corral
    /// created (and stop any gateway still serving one of them that no
    /// record names), then forget what was applied; keeps going past failures and
    /// reports every one.
    pub fn teardown(&self) -> Result<TeardownReport, TeardownError> {
        let _lock = self.store().lock().map_err(TeardownError::Lock)?;
        // Gateways first: dnsmasq holds the bridges' addresses.
        let gateway_errors = corral_gateway::stop_recorded(&self.state_dir);
        let mut report = self.target.host.teardown().map_err(TeardownError::Host)?;
        report.errors.extend(
            gateway_errors
                .into_iter()
                .map(|e| format!("stop gateway services: {e}")),
        );
        // Gateways this state directory has no record of (it was lost, or
        // another one started them) still serve the bridges just deleted.
        let (stopped, errors) = corral_gateway::stop_gateways(
            self.target.host.netns(),
            &report.bridges_deleted,
            Path::new(corral_gateway::DEFAULT_DNSMASQ),
        );
        report
            .gateways_stopped
            .extend(stopped.iter().map(ToString::to_string));
        report.errors.extend(errors);
        if let Err(e) =
            corral_egress::own_targets::remove(self.target.host.netns(), &self.state_dir)
        {
            report.errors.push(crate::error::chain(&e));
        }
        if report.is_clean()
            && let Err(e) = self.store().clear()
        {
            report.errors.push(e.to_string());
        }
        Ok(report)
    }
}
