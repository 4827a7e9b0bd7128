//! The gate record of older corrals, `<state_dir>/verification.json`
//! (the gate serialized whole), imported into the gate table once: its
//! demotions are added where the table has none for the kind, then the
//! file is removed. A file that does not parse is left in place and the
//! open fails, naming it.

use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::verify::Timestamp;
use corral_state_files::StateDir;
use serde::Deserialize;
use std::collections::BTreeMap;

use super::{Store, StoreError};

/// The legacy record's file name.
pub const LEGACY_FILE: &str = "verification.json";

#[derive(Debug, Deserialize)]
struct Legacy {
    #[serde(default)]
    demotions: BTreeMap<SandboxKind, LegacyDemotion>,
}

#[derive(Debug, Deserialize)]
struct LegacyDemotion {
    until: Timestamp,
    reason: String,
}

/// Import `dir`'s `verification.json`, if any, into `store`.
pub(super) fn import_verification_json(store: &Store, dir: &StateDir) -> Result<(), StoreError> {
    let Some(bytes) = dir.read(LEGACY_FILE)? else {
        return Ok(());
    };
    let legacy: Legacy = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
        path: dir.file_path(LEGACY_FILE),
        what: "legacy gate record",
        detail: format!("{e} (it was left in place; fix or remove it)"),
    })?;
    for (kind, d) in &legacy.demotions {
        store.import_demotion(*kind, d.until, &d.reason)?;
    }
    tracing::info!(
        file = %dir.file_path(LEGACY_FILE).display(),
        demotions = legacy.demotions.len(),
        "imported the legacy verification gate record into the store"
    );
    dir.remove(LEGACY_FILE)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use corral_sandbox_core::config::VerificationConfig;
    use corral_sandbox_core::verify::KindStatus;

    use super::*;

    #[test]
    fn a_legacy_record_is_imported_once_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"{"opted_in":["tart"],"options":{"check_timeout":{"secs":5,"nanos":0},"cool_down":{"secs":900,"nanos":0},"reverify_interval":{"secs":3600,"nanos":0},"max_probe_output":4096},"demotions":{"tart":{"until":5000,"reason":"failed: canary destination blocked"}}}"#;
        StateDir::open(dir.path())
            .unwrap()
            .write(LEGACY_FILE, text.as_bytes())
            .unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(!dir.path().join(LEGACY_FILE).exists());
        let cfg = VerificationConfig {
            kinds: vec![SandboxKind::Tart],
            ..VerificationConfig::default()
        };
        let gate = store.gate(&cfg).unwrap();
        assert_eq!(
            gate.status(SandboxKind::Tart, Timestamp(10)),
            KindStatus::Demoted {
                until: Timestamp(5000)
            }
        );
        assert_eq!(
            gate.demotion_reason(SandboxKind::Tart),
            Some("failed: canary destination blocked")
        );
    }

    #[test]
    fn a_corrupt_legacy_record_is_named_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        StateDir::open(dir.path())
            .unwrap()
            .write(LEGACY_FILE, b"{not json")
            .unwrap();
        let e = Store::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains("verification.json"), "{e}");
        assert!(dir.path().join(LEGACY_FILE).exists());
    }
}
