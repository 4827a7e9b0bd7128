//! The rotation as the controller last wrote it, so another process on the
//! same member (`corral new`, `corral cluster status`, a corrald without the
//! controller) places and reports from the same standings:
//! `<state_dir>/cluster/rotation.json`, written atomically under the
//! state-dir trust rule (mode 0600: root's, like the rest of the state).
//!
//! A reader trusts no more than the file says: an in-rotation member whose
//! attestation is older than the interval is refused by
//! [`Rotation::choose`], so a controller that stopped writing leaves no
//! member placeable once its last attestations age out.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use corral_sandbox_core::verify::Timestamp;
use corral_state_files::{StateDir, StateFileError};
use serde::{Deserialize, Serialize};

use super::{Rotation, Standing};

/// The sub-directory of the state directory.
pub const DIR: &str = "cluster";
/// The file in it.
pub const FILE: &str = "rotation.json";
/// The file's schema name.
pub const SCHEMA: &str = "corral.cluster.rotation.v1";

/// The persisted rotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RotationFile {
    /// [`SCHEMA`].
    pub schema: String,
    /// When the controller wrote it (ms since the Unix epoch).
    pub written_at: Timestamp,
    /// The attestation interval, in seconds.
    pub interval_secs: u64,
    /// Every member Incus listed, by name.
    pub members: Vec<MemberRecord>,
}

/// Whether a member takes profiled work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StandingName {
    /// Its last attestation passed.
    InRotation,
    /// It takes no new work.
    Drained,
}

/// One member's standing, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberRecord {
    /// The Incus member.
    pub member: String,
    /// What Incus reported at the tick (`Online`, `Evacuated`, `Offline`…).
    pub incus_status: String,
    /// Incus's explanation.
    pub incus_message: String,
    /// In rotation or drained.
    pub standing: StandingName,
    /// When its last passing attestation was taken (`None`: never).
    pub attested_at: Option<Timestamp>,
    /// Since when it stands so.
    pub since: Timestamp,
    /// Why it is drained (`None` in rotation).
    pub reason: Option<String>,
    /// The last failed attestation or missing answer, even after a
    /// later one passed (`None`: none seen by this controller).
    pub last_failure: Option<String>,
}

/// Why the persisted rotation could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RotationFileError {
    /// The state directory refused (trust rule, I/O).
    #[error("cluster rotation in {}: {source}", dir.display())]
    Files {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: StateFileError,
    },
    /// The file is not a rotation this corral understands.
    #[error(
        "{} is not a cluster rotation ({detail}); the controller (`corrald --cluster FILE`) rewrites it on its next tick",
        path.display()
    )]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
}

/// An instant as ms since the Unix epoch (epoch 0 before it).
pub fn timestamp(t: SystemTime) -> Timestamp {
    Timestamp(
        t.duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    )
}

/// The instant `t` names.
pub fn system_time(t: Timestamp) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(t.0)
}

impl RotationFile {
    /// Where it lives under `state_dir`.
    pub fn path(state_dir: &Path) -> PathBuf {
        state_dir.join(DIR).join(FILE)
    }

    /// The rotation it describes, for [`Rotation::choose`].
    pub fn rotation(&self) -> Rotation {
        let members = self.members.iter().map(|m| {
            let standing = match (m.standing, m.attested_at) {
                (StandingName::InRotation, Some(at)) => Standing::InRotation {
                    attested_at: system_time(at),
                },
                // In rotation without an attestation is not a state the
                // controller writes: read as drained, never as placeable.
                (StandingName::InRotation, None) => Standing::Drained {
                    reason: "in rotation without an attestation time".to_owned(),
                    since: system_time(m.since),
                },
                (StandingName::Drained, _) => Standing::Drained {
                    reason: m.reason.clone().unwrap_or_else(|| "drained".to_owned()),
                    since: system_time(m.since),
                },
            };
            (m.member.clone(), standing)
        });
        Rotation::with_standings(Duration::from_secs(self.interval_secs), members)
    }

    /// How long ago it was written, at `now`.
    pub fn age(&self, now: Timestamp) -> Duration {
        now.since(self.written_at)
    }

    /// Read it from `state_dir`; `None` when no controller wrote one.
    pub fn load(state_dir: &Path) -> Result<Option<Self>, RotationFileError> {
        let files = |source| RotationFileError::Files {
            dir: state_dir.join(DIR),
            source,
        };
        let Some(root) = StateDir::open_existing(state_dir).map_err(files)? else {
            return Ok(None);
        };
        let Some(dir) = root.subdir_existing(DIR).map_err(files)? else {
            return Ok(None);
        };
        let Some(bytes) = dir.read(FILE).map_err(files)? else {
            return Ok(None);
        };
        let file: Self =
            serde_json::from_slice(&bytes).map_err(|e| RotationFileError::Corrupt {
                path: Self::path(state_dir),
                detail: e.to_string(),
            })?;
        if file.schema != SCHEMA {
            return Err(RotationFileError::Corrupt {
                path: Self::path(state_dir),
                detail: format!("schema `{}`, expected `{SCHEMA}`", file.schema),
            });
        }
        Ok(Some(file))
    }

    /// Write it under `state_dir`, atomically (a reader sees the old file
    /// or the new one, never half of either).
    pub fn save(&self, state_dir: &Path) -> Result<(), RotationFileError> {
        let files = |source| RotationFileError::Files {
            dir: state_dir.join(DIR),
            source,
        };
        let body = serde_json::to_vec_pretty(self).map_err(|e| RotationFileError::Corrupt {
            path: Self::path(state_dir),
            detail: e.to_string(),
        })?;
        StateDir::open(state_dir)
            .and_then(|d| d.subdir(DIR))
            .and_then(|d| d.write(FILE, &body))
            .map_err(files)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> RotationFile {
        RotationFile {
            schema: SCHEMA.into(),
            written_at: Timestamp(5_000),
            interval_secs: 10,
            members: vec![
                MemberRecord {
                    member: "m1".into(),
                    incus_status: "Online".into(),
                    incus_message: "Fully operational".into(),
                    standing: StandingName::InRotation,
                    attested_at: Some(Timestamp(4_000)),
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
                    since: Timestamp(3_000),
                    reason: Some("attestation failed: read-back differs".into()),
                    last_failure: Some("attestation failed: read-back differs".into()),
                },
            ],
        }
    }

    #[test]
    fn written_and_read_back_unchanged_with_owner_only_mode() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        assert!(RotationFile::load(&state).unwrap().is_none());
        file().save(&state).unwrap();
        assert_eq!(RotationFile::load(&state).unwrap(), Some(file()));
        let mode = std::fs::metadata(RotationFile::path(&state))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn the_rotation_read_back_places_as_the_file_says() {
        let r = file().rotation();
        let members = [
            corral_provider_incus::ClusterMember {
                name: "m1".into(),
                url: String::new(),
                status: "Online".into(),
                message: String::new(),
                roles: Vec::new(),
            },
            corral_provider_incus::ClusterMember {
                name: "m2".into(),
                url: String::new(),
                status: "Online".into(),
                message: String::new(),
                roles: Vec::new(),
            },
        ];
        let now = system_time(Timestamp(6_000));
        assert_eq!(r.choose(&members, None, now).unwrap(), "m1");
        let e = r.choose(&members, Some("m2"), now).unwrap_err();
        assert!(e.contains("m2: drained: attestation failed"), "{e}");
        // The controller stopped: m1's attestation ages past the interval.
        let later = system_time(Timestamp(4_000 + 11_000));
        let e = r.choose(&members, None, later).unwrap_err();
        assert!(e.contains("m1: attestation 11 s old"), "{e}");
    }

    #[test]
    fn another_schema_is_refused_with_what_rewrites_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = file();
        f.schema = "corral.cluster.rotation.v0".into();
        f.save(dir.path()).unwrap();
        let e = RotationFile::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("expected `corral.cluster.rotation.v1`"), "{e}");
        assert!(e.contains("corrald --cluster"), "{e}");
    }
}
