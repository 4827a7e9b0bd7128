//! The event log: every lifecycle and verification event, in order, with
//! its whole JSON (a verification event carries its per-check timings).

use corral_sandbox_core::verify::Timestamp;
use rusqlite::params;
use serde::Serialize;

use super::{SandboxRecord, Store, StoreError};
use crate::hooks::Event;

/// One stored event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StoredEvent {
    /// Its position in the log (increasing).
    pub id: i64,
    /// When it was recorded (ms since the Unix epoch). Named apart from
    /// a verification event's own `at`, which sits beside it.
    pub recorded: Timestamp,
    /// True for an alert an operator must look at.
    pub alert: bool,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

/// Which events to list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    /// Only this sandbox's.
    pub sandbox: Option<String>,
    /// Only events after this id.
    pub after: Option<i64>,
    /// At most this many, the newest (default 100).
    pub limit: Option<u32>,
}

/// What an event changes in the sandbox records, committed with it.
#[derive(Debug, Clone, Copy)]
pub enum RecordChange<'a> {
    /// A sandbox was made: its record.
    Add(&'a SandboxRecord),
    /// A sandbox was deleted: forget the record of this name.
    Remove(&'a str),
}

/// Events listed when the caller does not say how many.
pub const DEFAULT_LIMIT: u32 = 100;

impl Store {
    /// Append `event`, recorded at `at`, and mirror it to the audit
    /// trail; returns its id.
    pub fn record(&self, event: &Event, at: Timestamp) -> Result<i64, StoreError> {
        self.record_with(event, at, None)
    }

    /// Append `event` and, in the same transaction (one commit, one
    /// sync), the change it makes to the sandbox records; then mirror the
    /// event to the audit trail. Returns the event's id.
    pub fn record_with(
        &self,
        event: &Event,
        at: Timestamp,
        change: Option<RecordChange<'_>>,
    ) -> Result<i64, StoreError> {
        let body = serde_json::to_string(event).map_err(|e| self.corrupt("event to write", e))?;
        let at_ts = at;
        let at = i64::try_from(at.millis()).unwrap_or(i64::MAX);
        let mut conn = self.conn();
        let tx = conn
            .transaction()
            .map_err(self.sql("begin recording an event"))?;
        tx.execute(
            "INSERT INTO events (at_ms, sandbox, event, alert, body) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                at,
                // A member's event has no sandbox: the column holds ''.
                event.sandbox().unwrap_or_default(),
                event.type_name(),
                event.is_alert(),
                body
            ],
        )
        .map_err(self.sql("record an event"))?;
        let id = tx.last_insert_rowid();
        match change {
            Some(RecordChange::Add(rec)) => {
                super::sandboxes::insert_sandbox(&tx, rec).map_err(self.sql("record a sandbox"))?;
            }
            Some(RecordChange::Remove(name)) => {
                tx.execute("DELETE FROM sandboxes WHERE name = ?1", params![name])
                    .map_err(self.sql("forget a sandbox"))?;
                tx.execute("DELETE FROM lifetimes WHERE name = ?1", params![name])
                    .map_err(self.sql("forget a sandbox's lifetime"))?;
            }
            None => {}
        }
        if let Event::Created {
            name,
            ttl_secs,
            idle_stop_secs,
            ..
        } = event
        {
            // A name made anew drops any lifetime an old sandbox of that
            // name left (one deleted behind corral's back).
            let life = crate::lifetimes::Limits {
                ttl_secs: *ttl_secs,
                idle_stop_secs: *idle_stop_secs,
            }
            .record(at_ts);
            super::lifetimes::write(&tx, name, &life)
                .map_err(self.sql("record a sandbox's lifetime"))?;
        }
        tx.commit().map_err(self.sql("commit an event"))?;
        drop(conn);
        self.audit
            .append(at_ts, crate::audit::Entry::Sandbox(event.clone()))?;
        Ok(id)
    }

    /// The events `query` selects, oldest first.
    pub fn events(&self, query: &EventQuery) -> Result<Vec<StoredEvent>, StoreError> {
        let limit = i64::from(query.limit.unwrap_or(DEFAULT_LIMIT));
        let conn = self.conn();
        let mut stmt = conn
            .prepare(
                "SELECT id, at_ms, alert, body FROM (
                     SELECT id, at_ms, alert, body FROM events
                     WHERE (?1 IS NULL OR sandbox = ?1) AND id > ?2
                     ORDER BY id DESC LIMIT ?3
                 ) ORDER BY id",
            )
            .map_err(self.sql("list events"))?;
        let rows = stmt
            .query_map(
                params![query.sandbox, query.after.unwrap_or(0), limit],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, bool>(2)?,
                        r.get::<_, String>(3)?,
                    ))
                },
            )
            .map_err(self.sql("list events"))?;
        let mut out = Vec::new();
        for row in rows {
            let (id, at, alert, body) = row.map_err(self.sql("read an event"))?;
            let event: Event = serde_json::from_str(&body)
                .map_err(|e| self.corrupt("event", format!("event {id}: {e}")))?;
            out.push(StoredEvent {
                id,
                recorded: Timestamp(u64::try_from(at).unwrap_or(0)),
                alert,
                event,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_in_order_and_filter() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let a = Event::Started { name: "a".into() };
        let b = Event::Alert {
            name: "b".into(),
            reason: "canary destination blocked failed".into(),
        };
        let ia = store.record(&a, Timestamp(10)).unwrap();
        let ib = store.record(&b, Timestamp(20)).unwrap();
        assert!(ib > ia);
        let all = store.events(&EventQuery::default()).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].event, a);
        assert!(!all[0].alert);
        assert_eq!(all[1].event, b);
        assert!(all[1].alert);
        assert_eq!(all[1].recorded, Timestamp(20));
        // Mirrored to the audit trail, same instants, same events.
        let (trail, bad) = store
            .audit()
            .read(&crate::audit::AuditFilter::default())
            .unwrap();
        assert_eq!(bad, 0);
        let mirrored: Vec<_> = trail
            .iter()
            .map(|l| (l.recorded, l.entry.clone()))
            .collect();
        assert_eq!(
            mirrored,
            [
                (Timestamp(10), crate::audit::Entry::Sandbox(a.clone())),
                (Timestamp(20), crate::audit::Entry::Sandbox(b.clone())),
            ]
        );
        let only_b = store
            .events(&EventQuery {
                sandbox: Some("b".into()),
                ..EventQuery::default()
            })
            .unwrap();
        assert_eq!(only_b.len(), 1);
        let after = store
            .events(&EventQuery {
                after: Some(ia),
                ..EventQuery::default()
            })
            .unwrap();
        assert_eq!(after.len(), 1);
        let last = store
            .events(&EventQuery {
                limit: Some(1),
                ..EventQuery::default()
            })
            .unwrap();
        assert_eq!(last[0].id, ib, "the limit keeps the newest");
        let json = serde_json::to_value(&all[1]).unwrap();
        assert_eq!(json["event"], "alert");
        assert_eq!(json["name"], "b");
    }

    #[test]
    fn a_create_records_its_event_and_its_sandbox_together_or_not_at_all() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let created = |name: &str| Event::Created {
            name: name.into(),
            kind: Some(corral_sandbox_core::SandboxKind::Incus),
            profile: None,
            owner: Some(1000),
            template: Some("blank".into()),
            from: None,
            ttl_secs: None,
            idle_stop_secs: None,
        };
        let rec = |name: &str| SandboxRecord {
            name: name.into(),
            kind: corral_sandbox_core::SandboxKind::Incus,
            profile: None,
            created: Timestamp(7),
            last_verified: None,
            verdict: None,
            owner: Some(1000),
            template: Some("blank".into()),
        };
        store
            .record_with(
                &created("a"),
                Timestamp(7),
                Some(RecordChange::Add(&rec("a"))),
            )
            .unwrap();
        assert_eq!(store.sandbox("a").unwrap(), Some(rec("a")));
        assert_eq!(store.events(&EventQuery::default()).unwrap().len(), 1);
        // A delete forgets the record in its event's transaction.
        store
            .record_with(
                &Event::Deleted { name: "a".into() },
                Timestamp(8),
                Some(RecordChange::Remove("a")),
            )
            .unwrap();
        assert_eq!(store.sandbox("a").unwrap(), None);
        store
            .record_with(
                &created("a"),
                Timestamp(9),
                Some(RecordChange::Add(&rec("a"))),
            )
            .unwrap();
        // The record cannot be written: the event is not committed either.
        store.conn().execute_batch("DROP TABLE sandboxes").unwrap();
        assert!(
            store
                .record_with(
                    &created("b"),
                    Timestamp(8),
                    Some(RecordChange::Add(&rec("b"))),
                )
                .is_err()
        );
        let events = store.events(&EventQuery::default()).unwrap();
        assert_eq!(events.len(), 3, "{events:?}");
    }
}
