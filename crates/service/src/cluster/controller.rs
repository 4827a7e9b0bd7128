//! The controller: one [`Controller::tick`] lists the Incus members, asks
//! every online one for its attestation at once (each bounded by a
//! timeout), feeds each outcome to the [`Rotation`], drains members whose
//! attestation aged out, records every change of standing on the event
//! log, starts re-verifying a newly drained member's sandboxes
//! ([`OnDrain`], in the background: a slow member must not hold up the
//! rotation) and writes the standings where other processes read them
//! ([`RotationFile`]). corrald runs it every attestation interval.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use corral_provider_incus::{ClusterMember, IncusProvider};
use corral_sandbox_core::verify::Clock;
use serde::Serialize;

use super::drain::{OnDrain, Reverified};
use super::persisted::{
    MemberRecord, RotationFile, RotationFileError, SCHEMA, StandingName, system_time, timestamp,
};
use super::{Attester, Change, Rotation, Standing};
use crate::hooks::Event;
use crate::provider::Backend;
use crate::store::Store;

/// Where the controller reads the cluster's members.
#[async_trait]
pub trait MemberList: Send + Sync {
    /// The members as Incus reports them; `None` off a cluster.
    async fn members(&self) -> Result<Option<Vec<ClusterMember>>, String>;
}

#[async_trait]
impl MemberList for IncusProvider {
    async fn members(&self) -> Result<Option<Vec<ClusterMember>>, String> {
        IncusProvider::members(self)
            .await
            .map_err(|e| e.to_string())
    }
}

#[async_trait]
impl MemberList for Backend {
    async fn members(&self) -> Result<Option<Vec<ClusterMember>>, String> {
        self.cluster_members().await.map_err(|e| e.to_string())
    }
}

#[async_trait]
impl MemberList for crate::SandboxService {
    async fn members(&self) -> Result<Option<Vec<ClusterMember>>, String> {
        self.backend()
            .cluster_members()
            .await
            .map_err(|e| e.to_string())
    }
}

/// What one tick did.
#[derive(Debug, Clone, Serialize)]
pub struct Tick {
    /// The changes of standing, in the order they were recorded.
    pub changes: Vec<Change>,
    /// Newly drained members whose sandboxes are being re-verified (in
    /// the background: a slow or unreachable member must not hold up the
    /// rotation; [`Controller::reverified`] waits for them).
    pub reverifying: Vec<String>,
    /// The standings written.
    pub written: RotationFile,
    /// Incus did not list the members (in time): the ones it listed last
    /// were asked.
    pub list_error: Option<String>,
}

/// Why a tick could not finish.
#[derive(Debug, thiserror::Error)]
pub enum TickError {
    /// Incus did not list its members and none is known from an earlier
    /// tick: nothing was attested, the rotation only aged (written all
    /// the same).
    #[error("cannot list the cluster's members: {0}; fix the Incus connection")]
    Members(String),
    /// The server is not clustered: there is no rotation to keep.
    #[error(
        "this Incus server is not part of a cluster; the cluster controller has nothing to attest (start corrald without --cluster)"
    )]
    NotClustered,
    /// The standings could not be written (placement reads the old ones,
    /// which age out: fail closed).
    #[error(transparent)]
    Write(#[from] RotationFileError),
}

/// What the controller remembers beyond the rotation, for status.
#[derive(Debug, Clone, Default)]
struct Notes {
    last_passed: Option<SystemTime>,
    last_failure: Option<String>,
    since: Option<SystemTime>,
    incus_status: String,
    incus_message: String,
}

/// The rotation kept current (see the module docs).
pub struct Controller {
    rotation: Rotation,
    notes: BTreeMap<String, Notes>,
    members: Arc<dyn MemberList>,
    attester: Arc<dyn Attester>,
    on_drain: Option<Arc<dyn OnDrain>>,
    draining: Vec<tokio::task::JoinHandle<Vec<Reverified>>>,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    state_dir: PathBuf,
    timeout: Duration,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("rotation", &self.rotation)
            .field("state_dir", &self.state_dir)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller whose attestations hold for `interval`, asking
    /// `attester`, listing `members`, recording into `store` and writing
    /// under `state_dir`. The member list and each attestation may take a
    /// quarter of the interval (at least one second) before they count as
    /// no answer, so a tick fits in the half interval between two. The standings
    /// a previous controller wrote there are taken up again, so a restart
    /// keeps a drain (and its reason) until a fresh attestation passes.
    pub fn new(
        interval: Duration,
        members: Arc<dyn MemberList>,
        attester: Arc<dyn Attester>,
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
        state_dir: PathBuf,
    ) -> Self {
        let mut rotation = Rotation::new(interval);
        let mut notes = BTreeMap::new();
        match RotationFile::load(&state_dir) {
            Ok(Some(file)) => {
                let taken = file.rotation();
                rotation = Rotation::with_standings(
                    interval,
                    taken.standings().map(|(m, s)| (m.to_owned(), s.clone())),
                );
                for m in file.members {
                    notes.insert(
                        m.member,
                        Notes {
                            last_passed: m.attested_at.map(system_time),
                            last_failure: m.last_failure,
                            since: Some(system_time(m.since)),
                            incus_status: m.incus_status,
                            incus_message: m.incus_message,
                        },
                    );
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "cluster: starting from an empty rotation"),
        }
        Self {
            rotation,
            notes,
            members,
            attester,
            on_drain: None,
            draining: Vec::new(),
            store,
            clock,
            state_dir,
            timeout: (interval / 4).max(Duration::from_secs(1)),
        }
    }

    /// Re-verify a newly drained member's sandboxes through `on_drain`.
    pub fn with_on_drain(mut self, on_drain: Arc<dyn OnDrain>) -> Self {
        self.on_drain = Some(on_drain);
        self
    }

    /// Bound each attestation by `timeout` instead.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The rotation as of the last tick.
    pub fn rotation(&self) -> &Rotation {
        &self.rotation
    }

    /// One round at `now` (see the module docs).
    pub async fn tick(&mut self, now: SystemTime) -> Result<Tick, TickError> {
        // Bounded like an attestation: a member cut off from its cluster
        // may not answer for the member list either.
        let listed = match tokio::time::timeout(self.timeout, self.members.members()).await {
            Ok(listed) => listed,
            Err(_) => Err(format!(
                "Incus gave no member list within {} ms",
                self.timeout.as_millis()
            )),
        };
        let (members, list_error) = match listed {
            Ok(Some(m)) => {
                for m in &m {
                    let n = self.notes.entry(m.name.clone()).or_default();
                    n.incus_status.clone_from(&m.status);
                    n.incus_message.clone_from(&m.message);
                }
                (m, None)
            }
            Ok(None) => return Err(TickError::NotClustered),
            // Incus did not list them (in time): a degraded cluster can be
            // slow to. The members it last listed are asked all the same —
            // an attestation comes from each member's corral, not from
            // Incus, and placement checks Incus's own word live.
            Err(e) if !self.notes.is_empty() => {
                tracing::warn!(error = %e, "cluster: asking the members Incus last listed");
                (self.last_listed(), Some(e))
            }
            Err(e) => {
                let changes = self.rotation.expire(now);
                self.settle(&changes);
                self.write(now)?;
                tracing::error!(error = %e, ?changes, "cluster: no member list");
                return Err(TickError::Members(e));
            }
        };
        // Offline or evacuated members are not asked: Incus already
        // keeps work off them, and asking would only wait out the timeout.
        let asked: Vec<&ClusterMember> = members.iter().filter(|m| m.takes_work()).collect();
        let outcomes = futures::future::join_all(asked.iter().map(|m| {
            let attester = Arc::clone(&self.attester);
            let timeout = self.timeout;
            async move {
                match tokio::time::timeout(timeout, attester.attest(&m.name)).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(format!("no answer within {} ms", timeout.as_millis())),
                }
            }
        }))
        .await;
        let mut changes = Vec::new();
        for (m, outcome) in asked.iter().zip(&outcomes) {
            let outcome = outcome.as_ref().map_err(String::as_str);
            let change = self.rotation.observe(&m.name, outcome, now);
            let n = self.notes.entry(m.name.clone()).or_default();
            match self.rotation.standing(&m.name) {
                Some(Standing::InRotation { attested_at }) => n.last_passed = Some(*attested_at),
                Some(Standing::Drained { reason, .. }) => n.last_failure = Some(reason.clone()),
                None => {}
            }
            changes.extend(change);
        }
        changes.extend(self.rotation.expire(now));
        let reverifying = self.settle(&changes);
        let written = self.write(now)?;
        Ok(Tick {
            changes,
            reverifying,
            written,
            list_error,
        })
    }

    /// The members as Incus last listed them.
    fn last_listed(&self) -> Vec<ClusterMember> {
        self.notes
            .iter()
            .map(|(name, n)| ClusterMember {
                name: name.clone(),
                url: String::new(),
                status: n.incus_status.clone(),
                message: n.incus_message.clone(),
                roles: Vec::new(),
            })
            .collect()
    }

    /// Record each change, and start re-verifying each newly drained
    /// member's sandboxes in the background; the members handed over.
    fn settle(&mut self, changes: &[Change]) -> Vec<String> {
        let mut reverifying = Vec::new();
        let now = self.clock.now();
        for change in changes {
            let (member, event) = match change {
                Change::Drained { member, reason } => (
                    member,
                    Event::MemberDrained {
                        member: member.clone(),
                        reason: reason.clone(),
                    },
                ),
                Change::Restored { member } => (
                    member,
                    Event::MemberRestored {
                        member: member.clone(),
                    },
                ),
            };
            self.notes.entry(member.clone()).or_default().since = Some(system_time(now));
            match change {
                Change::Drained { reason, .. } => {
                    tracing::error!(member = %member, "cluster: drained: {reason}");
                }
                Change::Restored { .. } => tracing::info!(member = %member, "cluster: restored"),
            }
            if let Err(e) = self.store.record(&event, now) {
                tracing::error!(error = %e, "cluster: cannot record a change of standing");
            }
            if let (Change::Drained { .. }, Some(on_drain)) = (change, &self.on_drain) {
                let on_drain = Arc::clone(on_drain);
                let m = member.clone();
                self.draining.push(tokio::spawn(async move {
                    let done = on_drain.drained(&m).await;
                    tracing::info!(member = %m, reverified = ?done, "cluster: drained member's sandboxes re-verified");
                    done
                }));
                reverifying.push(member.clone());
            }
        }
        reverifying
    }

    /// Wait for every re-verification started so far; what each did.
    pub async fn reverified(&mut self) -> Vec<Reverified> {
        let mut out = Vec::new();
        for task in std::mem::take(&mut self.draining) {
            match task.await {
                Ok(done) => out.extend(done),
                Err(e) => tracing::error!(error = %e, "cluster: a re-verification task failed"),
            }
        }
        out
    }

    /// The standings at `now`, written atomically.
    fn write(&self, now: SystemTime) -> Result<RotationFile, TickError> {
        let file = self.file(now);
        file.save(&self.state_dir)?;
        Ok(file)
    }

    /// The standings at `now`.
    pub fn file(&self, now: SystemTime) -> RotationFile {
        let members = self
            .notes
            .iter()
            .map(|(name, n)| {
                let (standing, reason, since) = match self.rotation.standing(name) {
                    Some(Standing::InRotation { attested_at }) => (
                        StandingName::InRotation,
                        None,
                        n.since.unwrap_or(*attested_at),
                    ),
                    Some(Standing::Drained { reason, since }) => {
                        (StandingName::Drained, Some(reason.clone()), *since)
                    }
                    None => (
                        StandingName::Drained,
                        Some(not_asked(&n.incus_status)),
                        n.since.unwrap_or(now),
                    ),
                };
                MemberRecord {
                    member: name.clone(),
                    incus_status: n.incus_status.clone(),
                    incus_message: n.incus_message.clone(),
                    standing,
                    attested_at: n.last_passed.map(timestamp),
                    since: timestamp(since),
                    reason,
                    last_failure: n.last_failure.clone(),
                }
            })
            .collect();
        RotationFile {
            schema: SCHEMA.to_owned(),
            written_at: timestamp(now),
            interval_secs: self.rotation.interval().as_secs(),
            members,
        }
    }

    /// A tick every half interval until the task is dropped: a healthy
    /// member's attestation is then never older than the interval when
    /// placement reads it (a tick every interval would leave it just past
    /// the interval while the next tick runs), and a failing one is seen
    /// within one interval. A failed tick is logged (the standings it
    /// could not refresh age out: fail closed).
    pub async fn run(mut self) {
        let period = self.rotation.interval() / 2;
        loop {
            let started = tokio::time::Instant::now();
            self.draining.retain(|t| !t.is_finished());
            match self.tick(SystemTime::now()).await {
                Ok(t) if !t.changes.is_empty() => {
                    tracing::info!(changes = ?t.changes, "cluster: standings changed");
                }
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "cluster: tick failed"),
            }
            tokio::time::sleep_until(started + period).await;
        }
    }
}

/// Why a member never asked stands drained.
fn not_asked(incus_status: &str) -> String {
    if incus_status.eq_ignore_ascii_case("online") || incus_status.is_empty() {
        "never attested".to_owned()
    } else {
        format!(
            "never attested (Incus reports it {})",
            incus_status.to_lowercase()
        )
    }
}

#[cfg(test)]
#[path = "controller_tests.rs"]
mod tests;
