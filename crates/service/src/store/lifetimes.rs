//! Each sandbox's lifetime: when its time to live runs out and how long it
//! may sit idle. A table of its own (not columns of `sandboxes`) so a
//! record written by a verdict or an adoption never clears one; a delete
//! or a rename carries it with the sandbox's record.

use corral_sandbox_core::verify::Timestamp;
use rusqlite::{Connection, OptionalExtension as _, params};
use serde::{Deserialize, Serialize};

use super::{Store, StoreError};

/// One sandbox's lifetime (`None` fields: no such limit).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifetimeRecord {
    /// The time to live it was given, seconds.
    pub ttl_secs: Option<u64>,
    /// When that runs out (creation plus the time to live).
    pub expires: Option<Timestamp>,
    /// How long it may sit idle while running before corral stops it.
    pub idle_stop_secs: Option<u64>,
}

impl LifetimeRecord {
    /// True when it sets no limit at all.
    pub fn is_empty(&self) -> bool {
        self.expires.is_none() && self.idle_stop_secs.is_none()
    }
}

fn int(v: Option<u64>) -> Option<i64> {
    v.map(|v| i64::try_from(v).unwrap_or(i64::MAX))
}

fn nat(v: Option<i64>) -> Option<u64> {
    v.map(|v| u64::try_from(v).unwrap_or(0))
}

impl Store {
    /// Set (replace) `name`'s lifetime; an empty one removes it.
    pub fn set_lifetime(&self, name: &str, life: &LifetimeRecord) -> Result<(), StoreError> {
        write(&self.conn(), name, life).map_err(self.sql("record a sandbox's lifetime"))
    }

    /// `name`'s lifetime (empty when it has none).
    pub fn lifetime(&self, name: &str) -> Result<LifetimeRecord, StoreError> {
        let row = self
            .conn()
            .query_row(
                "SELECT ttl_secs, expires_ms, idle_stop_secs FROM lifetimes WHERE name = ?1",
                params![name],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .map_err(self.sql("read a sandbox's lifetime"))?;
        Ok(row.map(life).unwrap_or_default())
    }

    /// Every sandbox with a lifetime, by name.
    pub fn lifetimes(&self) -> Result<Vec<(String, LifetimeRecord)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT name, ttl_secs, expires_ms, idle_stop_secs FROM lifetimes ORDER BY name",
            )
            .map_err(self.sql("list lifetimes"))?;
        let rows = stmt
            .query_map([], |r| {
                Ok((r.get::<_, String>(0)?, (r.get(1)?, r.get(2)?, r.get(3)?)))
            })
            .map_err(self.sql("list lifetimes"))?;
        let mut out = Vec::new();
        for r in rows {
            let (name, raw) = r.map_err(self.sql("read a lifetime"))?;
            out.push((name, life(raw)));
        }
        Ok(out)
    }
}

fn life((ttl, expires, idle): (Option<i64>, Option<i64>, Option<i64>)) -> LifetimeRecord {
    LifetimeRecord {
        ttl_secs: nat(ttl),
        expires: nat(expires).map(Timestamp),
        idle_stop_secs: nat(idle),
    }
}

/// Set (replace) `name`'s lifetime through `conn` (a transaction or not);
/// an empty one removes it.
pub(super) fn write(conn: &Connection, name: &str, life: &LifetimeRecord) -> rusqlite::Result<()> {
    if life.is_empty() {
        conn.execute("DELETE FROM lifetimes WHERE name = ?1", params![name])?;
    } else {
        conn.execute(
            "INSERT OR REPLACE INTO lifetimes (name, ttl_secs, expires_ms, idle_stop_secs)
             VALUES (?1, ?2, ?3, ?4)",
            params![
                name,
                int(life.ttl_secs),
                int(life.expires.map(Timestamp::millis)),
                int(life.idle_stop_secs)
            ],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::Event;
    use crate::store::RecordChange;

    #[test]
    fn a_lifetime_follows_its_sandbox_through_rename_and_delete() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert!(store.lifetime("a").unwrap().is_empty());
        let life = LifetimeRecord {
            ttl_secs: Some(60),
            expires: Some(Timestamp(65_000)),
            idle_stop_secs: Some(30),
        };
        store.set_lifetime("a", &life).unwrap();
        store.set_lifetime("b", &LifetimeRecord::default()).unwrap();
        assert_eq!(store.lifetime("a").unwrap(), life);
        assert_eq!(store.lifetimes().unwrap(), vec![("a".to_owned(), life)]);
        store.rename_sandbox("a", "c").unwrap();
        assert!(store.lifetime("a").unwrap().is_empty());
        assert_eq!(store.lifetime("c").unwrap(), life);
        // A delete's event forgets it in the event's transaction.
        store
            .record_with(
                &Event::Deleted { name: "c".into() },
                Timestamp(70_000),
                Some(RecordChange::Remove("c")),
            )
            .unwrap();
        assert!(store.lifetimes().unwrap().is_empty());
        store.set_lifetime("d", &life).unwrap();
        store.remove_sandbox("d").unwrap();
        assert!(store.lifetime("d").unwrap().is_empty());
        // A create's event sets it, from the event's time.
        let created = |ttl| Event::Created {
            name: "f".into(),
            kind: None,
            profile: None,
            owner: None,
            template: None,
            from: None,
            ttl_secs: ttl,
            idle_stop_secs: Some(30),
        };
        store
            .record_with(&created(Some(60)), Timestamp(1_000), None)
            .unwrap();
        assert_eq!(
            store.lifetime("f").unwrap(),
            LifetimeRecord {
                ttl_secs: Some(60),
                expires: Some(Timestamp(61_000)),
                idle_stop_secs: Some(30),
            }
        );
        // Control: a create of the name without limits leaves none.
        let mut bare = created(None);
        if let Event::Created { idle_stop_secs, .. } = &mut bare {
            *idle_stop_secs = None;
        }
        store.record_with(&bare, Timestamp(2_000), None).unwrap();
        assert!(store.lifetime("f").unwrap().is_empty());
        // Clearing every limit removes the row.
        store.set_lifetime("e", &life).unwrap();
        store.set_lifetime("e", &LifetimeRecord::default()).unwrap();
        assert!(store.lifetimes().unwrap().is_empty());
    }
}
