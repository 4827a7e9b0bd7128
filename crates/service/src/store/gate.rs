//! The verification gate's durable part: one row per demoted kind (end of
//! its cool-down and why). A row whose cool-down is over is the kind's
//! probation; a passing canary deletes it. Opted-in kinds and bounds come
//! from the configuration each time the gate is loaded.

use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::config::VerificationConfig;
use corral_sandbox_core::verify::{Gate, Timestamp};
use rusqlite::{Connection, TransactionBehavior, params};

use super::{Store, StoreError};

impl Store {
    /// The gate under `cfg` with every stored demotion.
    pub fn gate(&self, cfg: &VerificationConfig) -> Result<Gate, StoreError> {
        let conn = self.conn();
        self.load_gate(&conn, cfg)
    }

    /// Change the gate in one transaction: load it, let `change` judge or
    /// revoke, write every demotion back, commit (fsynced) — before the
    /// caller acts on the answer. Another process's change in between
    /// waits for this one, so no demotion is lost.
    pub fn update_gate<R>(
        &self,
        cfg: &VerificationConfig,
        change: impl FnOnce(&mut Gate) -> R,
    ) -> Result<R, StoreError> {
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(self.sql("begin a gate change"))?;
        let mut gate = self.load_gate(&tx, cfg)?;
        let before = gate.demotions();
        let answer = change(&mut gate);
        let after = gate.demotions();
        if before != after {
            tx.execute("DELETE FROM gate", [])
                .map_err(self.sql("write the gate"))?;
            for (kind, until, reason) in &after {
                tx.execute(
                    "INSERT INTO gate (kind, until_ms, reason) VALUES (?1, ?2, ?3)",
                    params![
                        kind.as_str(),
                        i64::try_from(until.millis()).unwrap_or(i64::MAX),
                        reason
                    ],
                )
                .map_err(self.sql("write the gate"))?;
            }
        }
        tx.commit().map_err(self.sql("commit a gate change"))?;
        Ok(answer)
    }

    /// Add `kind`'s demotion unless one is on record (the legacy import).
    pub(super) fn import_demotion(
        &self,
        kind: SandboxKind,
        until: Timestamp,
        reason: &str,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT OR IGNORE INTO gate (kind, until_ms, reason) VALUES (?1, ?2, ?3)",
                params![
                    kind.as_str(),
                    i64::try_from(until.millis()).unwrap_or(i64::MAX),
                    reason
                ],
            )
            .map_err(self.sql("import a demotion"))?;
        Ok(())
    }

    fn load_gate(&self, conn: &Connection, cfg: &VerificationConfig) -> Result<Gate, StoreError> {
        let mut gate = Gate::new(cfg);
        let mut stmt = conn
            .prepare("SELECT kind, until_ms, reason FROM gate ORDER BY kind")
            .map_err(self.sql("read the gate"))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                ))
            })
            .map_err(self.sql("read the gate"))?;
        for row in rows {
            let (kind, until, reason) = row.map_err(self.sql("read the gate"))?;
            let kind: SandboxKind = kind
                .parse()
                .map_err(|e: String| self.corrupt("gate row", e))?;
            gate.restore_demotion(kind, Timestamp(u64::try_from(until).unwrap_or(0)), reason);
        }
        Ok(gate)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

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

    /// A canary run with no results: fails closed and demotes tart.
    fn fail_tart(gate: &mut Gate, now: Timestamp) {
        let config = corral_sandbox_core::Config::builtin_default();
        let canary = plan(
            config.profiles.get("isolated").unwrap(),
            &cfg(&[SandboxKind::Tart]),
            &Vantage::default(),
            Requirement::Strict,
        )
        .unwrap();
        let j = gate.judge(
            &"s1".parse().unwrap(),
            SandboxKind::Tart,
            &canary,
            &[],
            Some(&FilterHealth::Alive),
            now,
        );
        assert!(j.verified.is_none());
    }

    #[test]
    fn a_demotion_is_on_disk_when_the_change_returns_and_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let tart = cfg(&[SandboxKind::Tart]);
        let now = Timestamp(1_000);
        {
            let store = Store::open(dir.path()).unwrap();
            store.update_gate(&tart, |g| fail_tart(g, now)).unwrap();
            // Another process's view, before this one closes anything.
            let other = Store::open(dir.path()).unwrap();
            assert!(matches!(
                other.gate(&tart).unwrap().status(SandboxKind::Tart, now),
                KindStatus::Demoted { .. }
            ));
        }
        // A configuration change keeps the demotion, adds the new kind.
        let both = cfg(&[SandboxKind::Tart, SandboxKind::Multipass]);
        let gate = Store::open(dir.path()).unwrap().gate(&both).unwrap();
        assert!(matches!(
            gate.status(SandboxKind::Tart, now),
            KindStatus::Demoted { .. }
        ));
        assert_eq!(
            gate.status(SandboxKind::Multipass, now),
            KindStatus::Eligible
        );
        // After the cool-down: probation, still on record.
        let later = now.plus(Duration::from_secs(3600));
        assert!(matches!(
            gate.status(SandboxKind::Tart, later),
            KindStatus::Probation { .. }
        ));
        assert!(gate.demotion_reason(SandboxKind::Tart).is_some());
    }
}
