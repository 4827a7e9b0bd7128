//! What the host commands fail with: each variant of an apply's failure
//! says what is in force afterwards (fail closed), a refresh's what was
//! refreshed, a teardown's why it could not start.

use std::path::PathBuf;

use corral_egress::host::{HostError, StateError};
use corral_gateway::GatewayError;

use super::PlanningError;

/// An apply stopped part-way; each variant says what is in force.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The state directory's host lock could not be taken; nothing changed.
    #[error("cannot take the host lock; nothing was changed")]
    Lock(#[source] StateError),
    /// Everything else is in force and recorded; corral's own canary
    /// targets (the stand-ins for unset `host.verification.canary` and
    /// `canary_v6`) could not be set up or removed.
    #[error(
        "the ruleset is applied and recorded and the gateways run, but corral's own canary targets could not be set up; until an apply succeeds the canary counts the checks they serve as could not run (or set host.verification.canary and canary_v6)"
    )]
    OwnTargets(#[source] corral_egress::own_targets::OwnTargetsError),
    /// The port bindings recorded by the last apply could not be read or
    /// kept; nothing changed.
    #[error("keeping the port bindings of what was applied; nothing was changed")]
    Bindings(#[source] PlanningError),
    /// The host refused the change or does not match the plan afterwards;
    /// the previous ruleset stays in force (one transaction).
    #[error("applying to {target}")]
    Host {
        /// `this host` or the namespace.
        target: String,
        /// The cause (`NotEnforced` carries the drift).
        #[source]
        source: HostError,
    },
    /// The rules were committed but the record of them could not be
    /// written; `restored` says what is in force now.
    #[error("recording the applied ruleset failed, so {restored}")]
    Record {
        /// Why the record could not be written.
        #[source]
        source: StateError,
        /// What was done about it, in words.
        restored: String,
    },
    /// The rules are in force but a gateway did not start.
    #[error(
        "the ruleset is applied (sandboxes can reach only what it allows), but the gateway DHCP/DNS services did not start"
    )]
    Gateways(#[source] GatewayError),
    /// A gateway still serving names the new plan removes could not be
    /// stopped before the new ruleset; the previous ruleset is in force.
    #[error(
        "nothing was changed: the gateway serving names this apply removes could not be stopped first"
    )]
    GatewayStop(#[source] GatewayError),
    /// The plan could not be completed with the host's networks; nothing
    /// changed.
    #[error("nothing was changed")]
    Planning(#[source] PlanningError),
}

/// A refresh failed.
#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    /// The state directory's host lock could not be taken; nothing changed.
    #[error("cannot take the host lock; nothing was changed")]
    Lock(#[source] StateError),
    /// Nothing to refresh.
    #[error("nothing has been applied to {target} yet (no {}); run `corral host apply` first", state_file.display())]
    NothingApplied {
        /// `this host` or the namespace.
        target: String,
        /// The missing record.
        state_file: PathBuf,
    },
    /// Reading what was applied, or planning the new inputs, failed.
    #[error(transparent)]
    Planning(#[from] PlanningError),
    /// The host refused the update or drifted.
    #[error("refreshing {target}")]
    Host {
        /// `this host` or the namespace.
        target: String,
        /// The cause.
        #[source]
        source: HostError,
    },
    /// The sets are updated but the record could not be written.
    #[error("the sets are refreshed, but recording it failed")]
    Record(#[source] StateError),
    /// The ports of the bridges could not be swept; nothing else changed.
    #[error(
        "sweeping the ports of corral's bridges (a port nobody bound may not be quarantined yet); the sets were not refreshed"
    )]
    Sweep(#[source] HostError),
}

/// A teardown failed before it could start.
#[derive(Debug, thiserror::Error)]
pub enum TeardownError {
    /// The state directory's host lock could not be taken; nothing changed.
    #[error("cannot take the host lock; nothing was changed")]
    Lock(#[source] StateError),
    /// The host could not be entered.
    #[error(transparent)]
    Host(HostError),
}
