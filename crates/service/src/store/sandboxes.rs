//! What corral knows of each sandbox it created: kind, profile, when it was
//! created, when its canary last ran and what the gate said. The backend
//! stays the truth for whether a sandbox exists and runs; this table is
//! what the watchdog and `corral verify` read to know what is due.

use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::verify::{EventOutcome, Timestamp};
use rusqlite::{Connection, OptionalExtension as _, params};
use serde::{Deserialize, Serialize};

use super::{Store, StoreError};

/// The gate's last word on a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every check passed.
    Passed,
    /// A check failed; the sandbox was disposed of or stopped.
    Failed,
    /// The gate would not judge (kind not opted in, or demoted).
    Refused,
}

impl Verdict {
    /// The kebab-case name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Passed => "passed",
            Verdict::Failed => "failed",
            Verdict::Refused => "refused",
        }
    }
}

impl From<EventOutcome> for Verdict {
    fn from(o: EventOutcome) -> Self {
        match o {
            EventOutcome::Passed => Verdict::Passed,
            EventOutcome::Failed => Verdict::Failed,
            EventOutcome::Refused => Verdict::Refused,
        }
    }
}

/// One sandbox's record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxRecord {
    /// Its name.
    pub name: String,
    /// Its backend.
    pub kind: SandboxKind,
    /// Its profile, if any.
    pub profile: Option<String>,
    /// When corral created it (ms since the Unix epoch).
    pub created: Timestamp,
    /// When its canary last ran.
    pub last_verified: Option<Timestamp>,
    /// What the gate said then.
    pub verdict: Option<Verdict>,
    /// The uid that created it (`None`: created before owners were
    /// recorded, or adopted; only admins may act on it).
    #[serde(default)]
    pub owner: Option<u32>,
    /// The image or template it was created from.
    #[serde(default)]
    pub template: Option<String>,
}

fn ms(t: Timestamp) -> i64 {
    i64::try_from(t.millis()).unwrap_or(i64::MAX)
}

fn ts(v: i64) -> Timestamp {
    Timestamp(u64::try_from(v).unwrap_or(0))
}

impl Store {
    /// Record a sandbox corral created (replacing an old record of the name).
    pub fn add_sandbox(&self, rec: &SandboxRecord) -> Result<(), StoreError> {
        insert_sandbox(&self.conn(), rec).map_err(self.sql("record a sandbox"))
    }

    /// Record a canary run's verdict for `name` (a sandbox created before
    /// the store existed gets a record with `kind` and `profile`).
    pub fn set_verdict(
        &self,
        name: &str,
        kind: SandboxKind,
        profile: Option<&str>,
        at: Timestamp,
        verdict: Verdict,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "INSERT INTO sandboxes (name, kind, profile, created_ms, last_verified_ms, verdict)
                 VALUES (?1, ?2, ?3, ?4, ?4, ?5)
                 ON CONFLICT (name) DO UPDATE
                     SET last_verified_ms = excluded.last_verified_ms,
                         verdict = excluded.verdict",
                params![name, kind.as_str(), profile, ms(at), verdict.as_str()],
            )
            .map_err(self.sql("record a verdict"))?;
        Ok(())
    }

    /// Forget `name`'s passing verdict (it stopped: the next start's canary
    /// decides again, and the watchdog leaves it alone until then). A failed
    /// verdict stays on record.
    pub fn clear_verdict(&self, name: &str) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE sandboxes SET verdict = NULL WHERE name = ?1 AND verdict = 'passed'",
                params![name],
            )
            .map_err(self.sql("clear a verdict"))?;
        Ok(())
    }

    /// Forget a deleted sandbox; true when there was a record.
    pub fn remove_sandbox(&self, name: &str) -> Result<bool, StoreError> {
        let conn = self.conn();
        conn.execute("DELETE FROM lifetimes WHERE name = ?1", params![name])
            .map_err(self.sql("forget a sandbox's lifetime"))?;
        let n = conn
            .execute("DELETE FROM sandboxes WHERE name = ?1", params![name])
            .map_err(self.sql("forget a sandbox"))?;
        Ok(n > 0)
    }

    /// Carry `from`'s record (owner, verdict, times) over to `to`.
    pub fn rename_sandbox(&self, from: &str, to: &str) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().map_err(self.sql("rename a sandbox"))?;
        tx.execute("DELETE FROM sandboxes WHERE name = ?1", params![to])
            .map_err(self.sql("rename a sandbox"))?;
        tx.execute(
            "UPDATE sandboxes SET name = ?2 WHERE name = ?1",
            params![from, to],
        )
        .map_err(self.sql("rename a sandbox"))?;
        tx.execute("DELETE FROM lifetimes WHERE name = ?1", params![to])
            .map_err(self.sql("rename a sandbox"))?;
        tx.execute(
            "UPDATE lifetimes SET name = ?2 WHERE name = ?1",
            params![from, to],
        )
        .map_err(self.sql("rename a sandbox"))?;
        tx.commit().map_err(self.sql("rename a sandbox"))
    }

    /// One sandbox's record.
    pub fn sandbox(&self, name: &str) -> Result<Option<SandboxRecord>, StoreError> {
        let conn = self.conn();
        let row = conn
            .query_row(
                "SELECT name, kind, profile, created_ms, last_verified_ms, verdict,
                        owner_uid, template
                 FROM sandboxes WHERE name = ?1",
                params![name],
                raw,
            )
            .optional()
            .map_err(self.sql("read a sandbox"))?;
        row.map(|r| self.parse(r)).transpose()
    }

    /// Every record, by name.
    pub fn sandboxes(&self) -> Result<Vec<SandboxRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT name, kind, profile, created_ms, last_verified_ms, verdict,
                        owner_uid, template
                 FROM sandboxes ORDER BY name",
            )
            .map_err(self.sql("list sandboxes"))?;
        let rows = stmt
            .query_map([], raw)
            .map_err(self.sql("list sandboxes"))?;
        let mut out = Vec::new();
        for r in rows {
            out.push(self.parse(r.map_err(self.sql("read a sandbox"))?)?);
        }
        Ok(out)
    }

    fn parse(&self, r: Raw) -> Result<SandboxRecord, StoreError> {
        let kind =
            r.1.parse()
                .map_err(|e: String| self.corrupt("sandbox kind", e))?;
        let verdict = match r.5.as_deref() {
            None => None,
            Some("passed") => Some(Verdict::Passed),
            Some("failed") => Some(Verdict::Failed),
            Some("refused") => Some(Verdict::Refused),
            Some(other) => return Err(self.corrupt("verdict", other)),
        };
        Ok(SandboxRecord {
            name: r.0,
            kind,
            profile: r.2,
            created: ts(r.3),
            last_verified: r.4.map(ts),
            verdict,
            owner: r.6,
            template: r.7,
        })
    }
}

type Raw = (
    String,
    String,
    Option<String>,
    i64,
    Option<i64>,
    Option<String>,
    Option<u32>,
    Option<String>,
);

fn raw(r: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

/// Insert (or replace) `rec` through `conn` (a transaction or not).
pub(super) fn insert_sandbox(conn: &Connection, rec: &SandboxRecord) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT OR REPLACE INTO sandboxes
             (name, kind, profile, created_ms, last_verified_ms, verdict,
              owner_uid, template)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            rec.name,
            rec.kind.as_str(),
            rec.profile,
            ms(rec.created),
            rec.last_verified.map(ms),
            rec.verdict.map(Verdict::as_str),
            rec.owner,
            rec.template
        ],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_verdicts_and_removal() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let rec = SandboxRecord {
            name: "a".into(),
            kind: SandboxKind::Incus,
            profile: Some("internet".into()),
            created: Timestamp(5),
            last_verified: None,
            verdict: None,
            owner: Some(1000),
            template: Some("corral-test".into()),
        };
        store.add_sandbox(&rec).unwrap();
        assert_eq!(store.sandbox("a").unwrap(), Some(rec.clone()));
        store
            .set_verdict(
                "a",
                SandboxKind::Incus,
                Some("internet"),
                Timestamp(9),
                Verdict::Passed,
            )
            .unwrap();
        let got = store.sandbox("a").unwrap().unwrap();
        assert_eq!(
            got.created,
            Timestamp(5),
            "a verdict keeps the creation time"
        );
        assert_eq!(got.last_verified, Some(Timestamp(9)));
        assert_eq!(got.verdict, Some(Verdict::Passed));
        // A sandbox the store never saw created gets a record.
        store
            .set_verdict(
                "b",
                SandboxKind::Incus,
                None,
                Timestamp(11),
                Verdict::Failed,
            )
            .unwrap();
        assert_eq!(store.sandboxes().unwrap().len(), 2);
        store.clear_verdict("a").unwrap();
        assert_eq!(store.sandbox("a").unwrap().unwrap().verdict, None);
        store.clear_verdict("b").unwrap();
        assert_eq!(
            store.sandbox("b").unwrap().unwrap().verdict,
            Some(Verdict::Failed),
            "a failure stays on record"
        );
        store.rename_sandbox("a", "c").unwrap();
        assert_eq!(store.sandbox("a").unwrap(), None);
        assert_eq!(store.sandbox("c").unwrap().unwrap().owner, Some(1000));
        store.rename_sandbox("c", "a").unwrap();
        assert!(store.remove_sandbox("a").unwrap());
        assert!(!store.remove_sandbox("a").unwrap());
        assert_eq!(store.sandbox("a").unwrap(), None);
    }
}
