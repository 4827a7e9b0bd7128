//! corrald's cluster controller (`--cluster FILE`): the rotation kept
//! current every attestation interval over this corrald's backend, store
//! and state directory, a drained member's sandboxes re-verified by that
//! member's own corrald (its canary, where their host side is), else
//! stopped. The attester is the caller's: corrald asks every member
//! (itself included) over mutually authenticated TLS
//! (`RemoteAttester`); a test may ask in-process.

use std::sync::Arc;

use corral_service::WallClock;
use corral_service::cluster::{Attester, ClusterSettings, Controller, MemberCanary, Reverifier};

use crate::state::AppState;

/// The controller for `state` under `cluster`, asking through `attester`;
/// a drained member's sandboxes verified by `canary` (the member's own
/// corrald), else through this corrald's verifier.
pub fn controller(
    state: &AppState,
    cluster: &ClusterSettings,
    attester: Arc<dyn Attester>,
    canary: Option<Arc<dyn MemberCanary>>,
) -> Controller {
    let mut reverifier = Reverifier::new(state.sandboxes().clone(), state.verifier().clone());
    if let Some(canary) = canary {
        reverifier = reverifier.with_member_canary(canary);
    }
    tracing::info!(
        member = %cluster.member,
        interval_secs = cluster.interval.as_secs(),
        "cluster: keeping the rotation"
    );
    Controller::new(
        cluster.interval,
        Arc::new(state.sandboxes().clone()),
        attester,
        state.db_shared(),
        Arc::new(WallClock),
        state.settings().state_dir.clone(),
    )
    .with_on_drain(Arc::new(reverifier))
}
