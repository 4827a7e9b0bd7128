//! Where profiled work goes on a cluster: only to a member in rotation
//! with a fresh attestation, as the controller last wrote the standings.
//! Fail closed: no standings (no controller ran on this member), a
//! drained or unattested target, or attestations that aged out (the
//! controller stopped) refuse the placement and change nothing.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use corral_provider_incus::ClusterMember;

use super::persisted::{RotationFile, RotationFileError, timestamp};

/// How to start the controller, for every refusal that needs it.
const START: &str = "start `corrald --cluster FILE` on this member (docs/cluster.md)";

/// Why profiled work was not placed on the cluster.
#[derive(Debug, thiserror::Error)]
pub enum PlacementRefused {
    /// No controller has written standings under this state directory.
    #[error(
        "this Incus server is a cluster member and no cluster controller has written member standings ({}); profiled work goes only to attested members: {START}",
        path.display()
    )]
    NoController {
        /// The file that is missing.
        path: PathBuf,
    },
    /// The target, or every member, may not take profiled work now.
    #[error("{reason}{hint}")]
    NotInRotation {
        /// [`super::Rotation::choose`]'s reason, per member.
        reason: String,
        /// What to do when the standings are stale.
        hint: String,
    },
    /// The standings could not be read.
    #[error(transparent)]
    File(#[from] RotationFileError),
}

/// The member profiled work goes to: `target` when it is in rotation with
/// a fresh attestation, else (no target) the first member that is,
/// according to the standings under `state_dir`, at `now`.
pub fn place(
    state_dir: &Path,
    members: &[ClusterMember],
    target: Option<&str>,
    now: SystemTime,
) -> Result<String, PlacementRefused> {
    let Some(file) = RotationFile::load(state_dir)? else {
        return Err(PlacementRefused::NoController {
            path: RotationFile::path(state_dir),
        });
    };
    file.rotation()
        .choose(members, target, now)
        .map_err(|reason| {
            let age = file.age(timestamp(now));
            // Two intervals without a write: the controller is not running.
            let hint = if age.as_secs() > 2 * file.interval_secs {
                format!(
                    "; the standings were last written {} s ago (interval {} s): {START}",
                    age.as_secs(),
                    file.interval_secs
                )
            } else {
                String::new()
            };
            PlacementRefused::NotInRotation { reason, hint }
        })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use corral_sandbox_core::verify::Timestamp;

    use super::super::persisted::{MemberRecord, SCHEMA, StandingName, system_time};
    use super::*;

    fn member(name: &str) -> ClusterMember {
        ClusterMember {
            name: name.into(),
            url: String::new(),
            status: "Online".into(),
            message: String::new(),
            roles: Vec::new(),
        }
    }

    fn write(dir: &Path, written: u64, attested: u64) {
        RotationFile {
            schema: SCHEMA.into(),
            written_at: Timestamp(written),
            interval_secs: 10,
            members: vec![MemberRecord {
                member: "m1".into(),
                incus_status: "Online".into(),
                incus_message: String::new(),
                standing: StandingName::InRotation,
                attested_at: Some(Timestamp(attested)),
                since: Timestamp(attested),
                reason: None,
                last_failure: None,
            }],
        }
        .save(dir)
        .unwrap();
    }

    #[test]
    fn without_standings_nothing_is_placed_and_the_error_says_how_to_start_the_controller() {
        let dir = tempfile::tempdir().unwrap();
        let e = place(dir.path(), &[member("m1")], None, SystemTime::now())
            .unwrap_err()
            .to_string();
        assert!(e.contains("corrald --cluster FILE"), "{e}");
        assert!(e.contains("rotation.json"), "{e}");
    }

    #[test]
    fn fresh_standings_place_and_stale_ones_refuse_naming_the_controller() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), 1_000, 1_000);
        let ms = [member("m1"), member("m2")];
        let at = |ms: u64| system_time(Timestamp(ms));
        assert_eq!(place(dir.path(), &ms, None, at(5_000)).unwrap(), "m1");
        let e = place(dir.path(), &ms, Some("m2"), at(5_000))
            .unwrap_err()
            .to_string();
        assert!(e.contains("m2: never attested"), "{e}");
        assert!(!e.contains("last written"), "{e}");
        let late = at(1_000) + Duration::from_secs(25);
        let e = place(dir.path(), &ms, None, late).unwrap_err().to_string();
        assert!(e.contains("m1: attestation 25 s old"), "{e}");
        assert!(
            e.contains("last written 25 s ago") && e.contains("corrald --cluster"),
            "{e}"
        );
    }
}
