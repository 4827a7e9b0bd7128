//! The users `corral grant` gave sandbox rights: one row per uid, naming
//! the Incus project their sandboxes live in. `corral revoke` stamps the
//! row (the user is refused at once) and keeps it while their project
//! still holds sandboxes, so an admin can still reach them; `revoke
//! --purge` removes the row with the project.

use corral_sandbox_core::verify::Timestamp;
use rusqlite::{OptionalExtension as _, params};
use serde::Serialize;

use super::{Store, StoreError};

/// One user's grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrantRecord {
    /// The user's id.
    pub uid: u32,
    /// The user's name when granted.
    pub user: String,
    /// The Incus project their sandboxes are created in.
    pub project: String,
    /// When it was (last) granted, ms since the Unix epoch.
    pub granted_ms: u64,
    /// When it was revoked (`None`: in force).
    pub revoked_ms: Option<u64>,
}

impl GrantRecord {
    /// True while the grant is in force.
    pub fn active(&self) -> bool {
        self.revoked_ms.is_none()
    }
}

fn ms(t: Timestamp) -> i64 {
    i64::try_from(t.millis()).unwrap_or(i64::MAX)
}

fn raw(row: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, String, String, i64, Option<i64>)> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
    ))
}

impl Store {
    fn grant_row(
        &self,
        (uid, user, project, granted, revoked): (i64, String, String, i64, Option<i64>),
    ) -> Result<GrantRecord, StoreError> {
        let uid = u32::try_from(uid).map_err(|_| self.corrupt("a grant's uid", uid))?;
        let to_ms = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(GrantRecord {
            uid,
            user,
            project,
            granted_ms: to_ms(granted),
            revoked_ms: revoked.map(to_ms),
        })
    }

    /// Grant `uid` (named `user`) sandbox rights in `project` at `at`. A
    /// grant in force is left as it was (false); a revoked one is renewed
    /// in its old project.
    pub fn grant(
        &self,
        uid: u32,
        user: &str,
        project: &str,
        at: Timestamp,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                "INSERT INTO grants (uid, user, project, granted_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (uid) DO UPDATE
                     SET granted_ms = excluded.granted_ms, revoked_ms = NULL, user = excluded.user
                     WHERE revoked_ms IS NOT NULL",
                params![uid, user, project, ms(at)],
            )
            .map_err(self.sql("record a grant"))?;
        Ok(n > 0)
    }

    /// Revoke `uid`'s grant at `at` (the row stays for its project); true
    /// when a grant was in force.
    pub fn revoke(&self, uid: u32, at: Timestamp) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                "UPDATE grants SET revoked_ms = ?2 WHERE uid = ?1 AND revoked_ms IS NULL",
                params![uid, ms(at)],
            )
            .map_err(self.sql("revoke a grant"))?;
        Ok(n > 0)
    }

    /// Forget `uid`'s grant row (after its project is gone); true when
    /// there was one.
    pub fn forget_grant(&self, uid: u32) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute("DELETE FROM grants WHERE uid = ?1", params![uid])
            .map_err(self.sql("forget a grant"))?;
        Ok(n > 0)
    }

    /// `uid`'s grant row, in force or revoked.
    pub fn grant_of(&self, uid: u32) -> Result<Option<GrantRecord>, StoreError> {
        let row = self
            .conn()
            .query_row(
                "SELECT uid, user, project, granted_ms, revoked_ms FROM grants WHERE uid = ?1",
                params![uid],
                raw,
            )
            .optional()
            .map_err(self.sql("read a grant"))?;
        row.map(|r| self.grant_row(r)).transpose()
    }

    /// Every grant row, by uid.
    pub fn grants(&self) -> Result<Vec<GrantRecord>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare("SELECT uid, user, project, granted_ms, revoked_ms FROM grants ORDER BY uid")
            .map_err(self.sql("list grants"))?;
        let rows: Vec<_> = stmt
            .query_map([], raw)
            .map_err(self.sql("list grants"))?
            .collect::<Result<_, _>>()
            .map_err(self.sql("list grants"))?;
        drop(stmt);
        drop(conn);
        rows.into_iter().map(|r| self.grant_row(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_revoke_regrant_and_forget() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("s")).unwrap();
        assert!(
            store
                .grant(1001, "alice", "corral-u-alice", Timestamp(5))
                .unwrap()
        );
        // Idempotent: a grant in force is left alone.
        assert!(
            !store
                .grant(1001, "alice", "corral-u-x", Timestamp(6))
                .unwrap()
        );
        let g = store.grant_of(1001).unwrap().unwrap();
        assert_eq!((g.granted_ms, g.project.as_str()), (5, "corral-u-alice"));
        assert!(g.active());
        assert!(store.revoke(1001, Timestamp(7)).unwrap());
        assert!(!store.revoke(1001, Timestamp(8)).unwrap());
        assert_eq!(store.grant_of(1001).unwrap().unwrap().revoked_ms, Some(7));
        // Granted again: the old project, in force again.
        assert!(
            store
                .grant(1001, "alice", "corral-u-y", Timestamp(9))
                .unwrap()
        );
        let g = store.grant_of(1001).unwrap().unwrap();
        assert_eq!((g.active(), g.project.as_str()), (true, "corral-u-alice"));
        assert_eq!(store.grants().unwrap(), vec![g]);
        assert!(store.forget_grant(1001).unwrap());
        assert!(store.grant_of(1001).unwrap().is_none());
        assert!(!store.forget_grant(1001).unwrap());
    }
}
