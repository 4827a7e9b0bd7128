//! After an interruption, make corral's database and the backend agree.
//!
//! A create records its sandbox after the backend made it, and a delete
//! forgets it after the backend removed it; a process killed in between
//! (`kill -9`, a power cut) leaves one side without the other. At start,
//! corrald lists what the backend holds with corral's stamp and what the
//! database records for that backend's kind, and settles every difference
//! the safe way, saying so in the event log:
//! - a stamped sandbox with no record is **adopted**: recorded without an
//!   owner, so only admins can act on it (corral never deletes what it
//!   cannot account for; an admin decides);
//! - a record whose sandbox is gone is **forgotten**;
//! - a port binding (under the service's state directory, on a backend
//!   whose NICs land on this host's bridges) that no sandbox's NIC names,
//!   and that no create in progress claims, is **released**: its rules,
//!   DHCP reservation and record go, as a delete would have done (a create
//!   or delete killed between the binding and the provider leaves one).
//!   The claims are taken before the backend is listed (see
//!   [`crate::ports::claim_bindings`]), so a create in another process is
//!   never robbed of its port.

use std::collections::BTreeSet;

use corral_sandbox_core::verify::Clock;
use serde::Serialize;

use crate::error::ServiceError;
use crate::hooks::Event;
use crate::sandboxes::SandboxService;
use crate::store::{SandboxRecord, Store, StoreError};

/// What a reconcile did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reconciled {
    /// Sandboxes found on the backend with no record, now recorded.
    pub adopted: Vec<String>,
    /// Records whose sandbox was gone, now removed.
    pub forgotten: Vec<String>,
    /// Bound ports no sandbox used, now unbound.
    pub released: Vec<String>,
}

impl Reconciled {
    /// True when the two sides already agreed.
    pub fn is_empty(&self) -> bool {
        self.adopted.is_empty() && self.forgotten.is_empty() && self.released.is_empty()
    }
}

/// Why a reconcile could not finish (what it did before stays done).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The backend could not list its sandboxes.
    #[error("cannot list the backend's sandboxes to reconcile the database with them")]
    Backend(#[source] ServiceError),
    /// The database could not be read or written.
    #[error("cannot reconcile the database with the backend")]
    Store(#[source] StoreError),
    /// Bindings of gone sandboxes could not be claimed or released.
    #[error("cannot release the port bindings of sandboxes that no longer exist")]
    Ports(#[source] ServiceError),
}

/// Settle every difference between `service`'s backend and `store` (see
/// the module docs), recording an alert for each at `clock`'s now.
pub async fn reconcile(
    service: &SandboxService,
    store: &Store,
    clock: &dyn Clock,
) -> Result<Reconciled, ReconcileError> {
    let kind = service.backend().selection().kind;
    // Claims before the list: a create lets go of its claim only once the
    // backend lists its sandbox.
    let claimed = if service.backend().binds_ports() {
        let dir = service.settings().state_dir.clone();
        tokio::task::spawn_blocking(move || crate::ports::claim_bindings(&dir))
            .await
            .map_err(|e| ReconcileError::Ports(ServiceError::Worker(e)))?
            .map_err(|e| ReconcileError::Ports(e.into()))?
    } else {
        Vec::new()
    };
    let live = service.list().await.map_err(ReconcileError::Backend)?;
    let recorded: Vec<SandboxRecord> = store
        .sandboxes()
        .map_err(ReconcileError::Store)?
        .into_iter()
        .filter(|r| r.kind == kind)
        .collect();
    let recorded_names: BTreeSet<&str> = recorded.iter().map(|r| r.name.as_str()).collect();
    let live_names: BTreeSet<&str> = live.iter().map(|i| i.name.as_str()).collect();
    let now = clock.now();
    let mut done = Reconciled::default();
    for info in live
        .iter()
        .filter(|i| !recorded_names.contains(i.name.as_str()))
    {
        let name = info.name.to_string();
        store
            .add_sandbox(&SandboxRecord {
                name: name.clone(),
                kind: info.kind,
                profile: info.profile.as_ref().map(ToString::to_string),
                created: now,
                last_verified: None,
                verdict: None,
                owner: None,
                template: info.image.clone(),
            })
            .map_err(ReconcileError::Store)?;
        let reason = "adopted: on the backend with corral's stamp but not in the database (an operation was interrupted, e.g. corrald was killed during a create); recorded without an owner, so only admins can act on it".to_owned();
        tracing::warn!(sandbox = %name, "{reason}");
        store
            .record(
                &Event::Alert {
                    name: name.clone(),
                    reason,
                },
                now,
            )
            .map_err(ReconcileError::Store)?;
        done.adopted.push(name);
    }
    for rec in recorded
        .iter()
        .filter(|r| !live_names.contains(r.name.as_str()))
    {
        store
            .remove_sandbox(&rec.name)
            .map_err(ReconcileError::Store)?;
        let reason = "forgotten: in the database but no longer on the backend (deleted outside corral, or an interrupted operation); the record was removed".to_owned();
        tracing::warn!(sandbox = %rec.name, "{reason}");
        store
            .record(
                &Event::Alert {
                    name: rec.name.clone(),
                    reason,
                },
                now,
            )
            .map_err(ReconcileError::Store)?;
        done.forgotten.push(rec.name.clone());
    }
    if !claimed.is_empty() {
        let nics: Vec<_> = live.iter().filter_map(|i| i.nic.clone()).collect();
        let (netns, dir) = (
            service.settings().netns.clone(),
            service.settings().state_dir.clone(),
        );
        let released = tokio::task::spawn_blocking(move || {
            crate::ports::release_unused(netns.as_deref(), &dir, claimed, &nics)
        })
        .await
        .map_err(|e| ReconcileError::Ports(ServiceError::Worker(e)))?
        .map_err(|e| ReconcileError::Ports(e.into()))?;
        for b in released {
            let port = b.port.to_string();
            let reason = format!(
                "released: port {port} (MAC {}, {}) was bound for a sandbox that no longer exists (a create or delete was interrupted); its rules, DHCP reservation and record were removed",
                b.mac, b.v4
            );
            tracing::warn!(port = %port, "{reason}");
            store
                .record(
                    &Event::Alert {
                        name: port.clone(),
                        reason,
                    },
                    now,
                )
                .map_err(ReconcileError::Store)?;
            done.released.push(port);
        }
    }
    Ok(done)
}
