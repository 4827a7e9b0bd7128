//! The cluster's members and their standing (`corral cluster status
//! --json`, `GET /v1/cluster`): what Incus reports, what the controller
//! last wrote, whether profiled work may go there now and why not, and
//! how many sandboxes each runs.

use std::time::SystemTime;

use corral_provider_incus::ClusterMember;
use corral_sandbox_core::sandbox::{SandboxInfo, SandboxState};
use corral_sandbox_core::verify::Timestamp;
use serde::Serialize;

use crate::cluster::RotationFile;
use crate::cluster::persisted::{StandingName, timestamp};
use crate::error::ServiceError;
use crate::sandboxes::SandboxService;

/// The report, schema `corral.cluster.v1`.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterReport {
    /// `corral.cluster.v1`.
    pub schema: &'static str,
    /// The Incus server is a cluster member (`false`: nothing else is
    /// filled, and placement is as on a single server).
    pub clustered: bool,
    /// What the controller last wrote (`None`: it never ran here).
    pub controller: Option<ControllerView>,
    /// Every member Incus lists, in its order.
    pub members: Vec<MemberView>,
}

/// The controller's last write.
#[derive(Debug, Clone, Serialize)]
pub struct ControllerView {
    /// When (ms since the Unix epoch).
    pub written_at: Timestamp,
    /// How long ago, in seconds.
    pub age_secs: u64,
    /// The attestation interval, in seconds.
    pub interval_secs: u64,
    /// It wrote within two intervals (else it is presumed stopped, and
    /// its attestations age out).
    pub current: bool,
}

/// One member.
#[derive(Debug, Clone, Serialize)]
pub struct MemberView {
    /// The Incus member.
    pub member: String,
    /// What Incus reports now (`Online`, `Evacuated`, `Offline`…).
    pub incus_status: String,
    /// Incus's explanation.
    pub incus_message: String,
    /// `in_rotation`, `drained`, or `unknown` (the controller has not
    /// written this member).
    pub standing: String,
    /// Profiled work may be placed there now.
    pub placeable: bool,
    /// Why not, when it may not.
    pub refused: Option<String>,
    /// When its last passing attestation was taken.
    pub attested_at: Option<Timestamp>,
    /// Its age, in seconds.
    pub attestation_age_secs: Option<u64>,
    /// Why it is drained.
    pub reason: Option<String>,
    /// Since when it stands so.
    pub since: Option<Timestamp>,
    /// The last failed attestation or missing answer.
    pub last_failure: Option<String>,
    /// corral's sandboxes on it.
    pub sandboxes: usize,
    /// Of those, running.
    pub running: usize,
}

impl ClusterReport {
    /// The report from Incus's `members` (`None`: not clustered), the
    /// controller's `file` and `sandboxes` (with their locations), at `now`.
    pub fn new(
        members: Option<&[ClusterMember]>,
        file: Option<&RotationFile>,
        sandboxes: &[SandboxInfo],
        now: SystemTime,
    ) -> Self {
        let Some(members) = members else {
            return Self {
                schema: "corral.cluster.v1",
                clustered: false,
                controller: None,
                members: Vec::new(),
            };
        };
        let at = timestamp(now);
        let rotation = file.map(RotationFile::rotation);
        let views = members
            .iter()
            .map(|m| {
                let record = file.and_then(|f| f.members.iter().find(|r| r.member == m.name));
                let refused = match &rotation {
                    None => Some("no cluster controller has written standings".to_owned()),
                    Some(r) => r.choose(members, Some(&m.name), now).err(),
                };
                let on: Vec<&SandboxInfo> = sandboxes
                    .iter()
                    .filter(|s| s.location.as_deref() == Some(m.name.as_str()))
                    .collect();
                MemberView {
                    member: m.name.clone(),
                    incus_status: m.status.clone(),
                    incus_message: m.message.clone(),
                    standing: match record.map(|r| r.standing) {
                        Some(StandingName::InRotation) => "in_rotation",
                        Some(StandingName::Drained) => "drained",
                        None => "unknown",
                    }
                    .to_owned(),
                    placeable: refused.is_none(),
                    refused,
                    attested_at: record.and_then(|r| r.attested_at),
                    attestation_age_secs: record
                        .and_then(|r| r.attested_at)
                        .map(|t| at.since(t).as_secs()),
                    reason: record.and_then(|r| r.reason.clone()),
                    since: record.map(|r| r.since),
                    last_failure: record.and_then(|r| r.last_failure.clone()),
                    sandboxes: on.len(),
                    running: on
                        .iter()
                        .filter(|s| s.state == SandboxState::Running)
                        .count(),
                }
            })
            .collect();
        Self {
            schema: "corral.cluster.v1",
            clustered: true,
            controller: file.map(|f| {
                let age = f.age(at).as_secs();
                ControllerView {
                    written_at: f.written_at,
                    age_secs: age,
                    interval_secs: f.interval_secs,
                    current: age <= 2 * f.interval_secs,
                }
            }),
            members: views,
        }
    }
}

/// The report for `service`'s backend and state directory, now.
pub async fn cluster_report(service: &SandboxService) -> Result<ClusterReport, ServiceError> {
    let members = service.backend().cluster_members().await?;
    if members.is_none() {
        return Ok(ClusterReport::new(None, None, &[], SystemTime::now()));
    }
    let file = RotationFile::load(&service.settings().state_dir)
        .map_err(crate::cluster::PlacementRefused::from)?;
    let sandboxes = service.list().await?;
    Ok(ClusterReport::new(
        members.as_deref(),
        file.as_ref(),
        &sandboxes,
        SystemTime::now(),
    ))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use corral_sandbox_core::SandboxKind;
    use corral_sandbox_core::sandbox::InstanceType;

    use super::*;
    use crate::cluster::persisted::{MemberRecord, SCHEMA, system_time};

    fn member(name: &str, status: &str) -> ClusterMember {
        ClusterMember {
            name: name.into(),
            url: String::new(),
            status: status.into(),
            message: String::new(),
            roles: Vec::new(),
        }
    }

    fn sandbox(name: &str, on: &str, state: SandboxState) -> SandboxInfo {
        SandboxInfo {
            name: name.parse().unwrap(),
            kind: SandboxKind::Incus,
            state,
            instance_type: InstanceType::Container,
            profile: None,
            image: None,
            created: None,
            addresses: Vec::new(),
            nic: None,
            location: Some(on.into()),
        }
    }

    #[test]
    fn members_standing_age_reason_and_sandboxes_per_member() {
        let file = RotationFile {
            schema: SCHEMA.into(),
            written_at: Timestamp(10_000),
            interval_secs: 10,
            members: vec![
                MemberRecord {
                    member: "m1".into(),
                    incus_status: "Online".into(),
                    incus_message: String::new(),
                    standing: StandingName::InRotation,
                    attested_at: Some(Timestamp(10_000)),
                    since: Timestamp(1_000),
                    reason: None,
                    last_failure: None,
                },
                MemberRecord {
                    member: "m2".into(),
                    incus_status: "Online".into(),
                    incus_message: String::new(),
                    standing: StandingName::Drained,
                    attested_at: Some(Timestamp(2_000)),
                    since: Timestamp(9_000),
                    reason: Some("attestation failed: read-back differs".into()),
                    last_failure: Some("attestation failed: read-back differs".into()),
                },
            ],
        };
        let members = [member("m1", "Online"), member("m2", "Online")];
        let sandboxes = [
            sandbox("a", "m1", SandboxState::Running),
            sandbox("b", "m2", SandboxState::Stopped),
            sandbox("c", "m2", SandboxState::Running),
        ];
        let now = system_time(Timestamp(13_000));
        let r = ClusterReport::new(Some(&members), Some(&file), &sandboxes, now);
        assert!(r.clustered);
        let c = r.controller.as_ref().unwrap();
        assert_eq!((c.age_secs, c.current), (3, true));
        let (m1, m2) = (&r.members[0], &r.members[1]);
        assert!(m1.placeable && m1.refused.is_none(), "{m1:?}");
        assert_eq!((m1.sandboxes, m1.running), (1, 1));
        assert_eq!(m1.attestation_age_secs, Some(3));
        assert_eq!(m2.standing, "drained");
        assert!(!m2.placeable);
        assert!(m2.refused.as_deref().unwrap().contains("m2: drained"));
        assert_eq!(
            m2.reason.as_deref(),
            Some("attestation failed: read-back differs")
        );
        assert_eq!((m2.sandboxes, m2.running), (2, 1));

        // The controller stopped: nothing is placeable, and it says so.
        let late = now + Duration::from_secs(30);
        let r = ClusterReport::new(Some(&members), Some(&file), &sandboxes, late);
        assert!(!r.controller.as_ref().unwrap().current);
        assert!(r.members.iter().all(|m| !m.placeable), "{:?}", r.members);
        // No controller ever: every member refused, standing unknown.
        let r = ClusterReport::new(Some(&members), None, &sandboxes, now);
        assert!(r.controller.is_none());
        assert!(
            r.members
                .iter()
                .all(|m| !m.placeable && m.standing == "unknown")
        );
        // Off a cluster: nothing but `clustered: false`.
        assert!(!ClusterReport::new(None, None, &[], now).clustered);
    }
}
