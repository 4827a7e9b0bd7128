//! The verification gate's state on disk: `<state_dir>/verification.json`,
//! loaded at start-up and written atomically (mode 0600) in the trusted
//! state directory, so a crash never leaves half a record and demotions
//! survive a restart.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use corral_sandbox_core::config::VerificationConfig;
use corral_sandbox_core::verify::{Clock, Gate, Timestamp};
use corral_state_files::{StateDir, StateFileError};

/// The record's file name inside the state directory.
pub const FILE: &str = "verification.json";

/// Why the gate record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum GateStoreError {
    /// The state directory is not safe to use, or a file in it failed.
    #[error(transparent)]
    Files(#[from] StateFileError),
    /// The file is not a gate record.
    #[error("{} is not a verification gate record; move it away to start with a fresh gate", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
}

/// Where the gate record lives.
#[derive(Debug, Clone)]
pub struct GateStore {
    dir: PathBuf,
}

impl GateStore {
    /// A store in `dir` (created on first save).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The record's path.
    pub fn path(&self) -> PathBuf {
        self.dir.join(FILE)
    }

    /// The stored gate, `None` when there is no record yet.
    pub fn load(&self) -> Result<Option<Gate>, GateStoreError> {
        let path = self.path();
        let Some(dir) = StateDir::open_existing(&self.dir)? else {
            return Ok(None);
        };
        let Some(bytes) = dir.read(FILE)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| GateStoreError::Corrupt { path, source })
    }

    /// Write `gate` atomically.
    pub fn save(&self, gate: &Gate) -> Result<(), GateStoreError> {
        let text =
            serde_json::to_string_pretty(gate).map_err(|source| GateStoreError::Corrupt {
                path: self.path(),
                source,
            })?;
        StateDir::open(&self.dir)?.write(FILE, text.as_bytes())?;
        Ok(())
    }

    /// The gate at start-up: the stored one with the configuration's opted-in
    /// kinds and bounds (the operator may have changed them) but its recorded
    /// demotions kept; a fresh gate when there is no record. Saved when it
    /// differs from the record.
    pub fn load_for(&self, cfg: &VerificationConfig) -> Result<Gate, GateStoreError> {
        let fresh = Gate::new(cfg);
        let stored = self.load()?;
        let gate = match &stored {
            None => fresh,
            Some(old) => with_config_of(old, &fresh).map_err(|source| GateStoreError::Corrupt {
                path: self.path(),
                source,
            })?,
        };
        if stored.as_ref() != Some(&gate) {
            self.save(&gate)?;
        }
        Ok(gate)
    }
}

/// `stored`'s demotions under `fresh`'s opted-in kinds and options. The gate
/// keeps its fields private, so the merge goes through its serialized form.
fn with_config_of(stored: &Gate, fresh: &Gate) -> Result<Gate, serde_json::Error> {
    let mut merged = serde_json::to_value(stored)?;
    let fresh = serde_json::to_value(fresh)?;
    for field in ["opted_in", "options"] {
        if let (Some(slot), Some(value)) = (merged.get_mut(field), fresh.get(field)) {
            *slot = value.clone();
        }
    }
    serde_json::from_value(merged)
}

/// The wall clock, in milliseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Timestamp {
        // Before 1970 only on a broken clock; epoch 0 then.
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Timestamp(ms)
    }
}

#[cfg(test)]
mod tests {
    use corral_sandbox_core::SandboxKind;
    use corral_sandbox_core::verify::{FilterHealth, KindStatus, Requirement, Vantage, plan};

    use super::*;

    fn cfg(kinds: &[SandboxKind]) -> VerificationConfig {
        VerificationConfig {
            kinds: kinds.to_vec(),
            canary: Some("198.51.100.7:443".parse().unwrap()),
            canary_v6: Some("[2001:db8::7]:443".parse().unwrap()),
            unlisted_name: Some("unlisted.example.org".parse().unwrap()),
            ..VerificationConfig::default()
        }
    }

    #[test]
    fn absent_record_is_created_and_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let store = GateStore::new(dir.path().join("state"));
        assert!(store.load().unwrap().is_none());
        let gate = store.load_for(&cfg(&[SandboxKind::Tart])).unwrap();
        assert!(store.path().exists());
        // Nothing but the record: no temp file left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path().join("state"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["verification.json"]);
        assert_eq!(store.load().unwrap(), Some(gate));
    }

    #[test]
    fn corrupt_record_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = GateStore::new(dir.path());
        std::fs::write(store.path(), "{not json").unwrap();
        let e = store.load_for(&cfg(&[])).unwrap_err();
        assert!(e.to_string().contains("verification.json"), "{e}");
        assert!(e.to_string().contains("move it away"), "{e}");
    }

    #[test]
    fn demotions_survive_a_config_change() {
        let dir = tempfile::tempdir().unwrap();
        let store = GateStore::new(dir.path());
        let mut gate = store.load_for(&cfg(&[SandboxKind::Tart])).unwrap();
        // A canary with no results fails and demotes the kind.
        let name = corral_sandbox_core::SandboxName::new("s1").unwrap();
        let config = corral_sandbox_core::Config::builtin_default();
        let profile = config.profiles.get("allowlist").unwrap();
        let canary = plan(
            profile,
            &cfg(&[SandboxKind::Tart]),
            &Vantage::default(),
            Requirement::Strict,
        )
        .unwrap();
        let now = Timestamp(1_000);
        let j = gate.judge(
            &name,
            SandboxKind::Tart,
            &canary,
            &[],
            Some(&FilterHealth::Alive),
            now,
        );
        assert!(j.verified.is_none());
        store.save(&gate).unwrap();

        let both = cfg(&[SandboxKind::Tart, SandboxKind::Multipass]);
        let reloaded = store.load_for(&both).unwrap();
        assert!(matches!(
            reloaded.status(SandboxKind::Tart, now),
            KindStatus::Demoted { .. }
        ));
        assert_eq!(
            reloaded.status(SandboxKind::Multipass, now),
            KindStatus::Eligible
        );
        assert_eq!(store.load().unwrap(), Some(reloaded));
    }

    #[test]
    fn an_open_state_directory_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let store = GateStore::new(dir.path());
        let e = store.load_for(&cfg(&[])).unwrap_err();
        assert!(matches!(e, GateStoreError::Files(_)), "{e}");
        assert!(!store.path().exists());
    }

    #[test]
    fn wall_clock_is_after_2020() {
        assert!(WallClock.now() > Timestamp(1_577_836_800_000));
    }
}
