//! corral's durable store: one SQLite database, `<state_dir>/corral.db`,
//! that `corral` and `corrald` both open. It holds the event log (lifecycle
//! and verification events, with per-check timings), the verification
//! gate's demotions (cool-down and probation per kind) and what corral
//! knows of each sandbox (kind, profile, when it was created and last
//! verified, the last verdict).
//!
//! Durability: the database runs in WAL mode with `synchronous=FULL`, so
//! every committed transaction is fsynced to the write-ahead log before
//! the commit returns; a gate change is one transaction, committed before
//! the caller acts on it. The file is created 0600 in the trusted state
//! directory (the state-files rule), and SQLite gives its `-wal` and `-shm`
//! files the database file's mode. Closing does not checkpoint: the WAL
//! and its index stay beside the database for the next opener (a commit
//! checkpoints once the WAL passes 1 MiB).
//!
//! Schema changes are numbered migrations ([`migrations::MIGRATIONS`]),
//! each applied once in a transaction; `PRAGMA user_version` holds the last.
//! A `verification.json` left by an older corral is imported into the gate
//! table once, then removed.

mod events;
mod gate;
mod grants;
mod legacy;
mod lifetimes;
pub mod migrations;
mod sandboxes;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use corral_state_files::{StateDir, StateFileError};
use rusqlite::Connection;
use rusqlite::config::DbConfig;

pub use events::{EventQuery, RecordChange, StoredEvent};
pub use grants::GrantRecord;
pub use lifetimes::LifetimeRecord;
pub use sandboxes::{SandboxRecord, Verdict};

use migrations::MigrationError;

use crate::audit::{AuditError, AuditLog};

/// The database's file name inside the state directory.
pub const FILE: &str = "corral.db";

/// How long a writer waits for another process's transaction to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The store could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state directory (or the database file) is not safe to use.
    #[error(transparent)]
    Files(#[from] StateFileError),
    /// SQLite failed.
    #[error("{what} in {}", path.display())]
    Sqlite {
        /// What was being done.
        what: &'static str,
        /// The database.
        path: PathBuf,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// The schema could not be brought up to date.
    #[error("{}", path.display())]
    Migration {
        /// The database.
        path: PathBuf,
        /// The cause.
        #[source]
        source: MigrationError,
    },
    /// The audit trail could not be opened or written.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// A stored value does not parse.
    #[error("{} holds a bad {what}: {detail}; move the database away to start afresh (its events are lost)", path.display())]
    Corrupt {
        /// The database (or the imported file).
        path: PathBuf,
        /// Which value.
        what: &'static str,
        /// Why.
        detail: String,
    },
}

/// corral's durable store (see the module docs).
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    audit: AuditLog,
}

impl Store {
    /// Open (creating if needed) the store in `state_dir`, bring its schema
    /// up to date and import a legacy `verification.json` once.
    pub fn open(state_dir: &Path) -> Result<Self, StoreError> {
        let dir = StateDir::open(state_dir)?;
        let path = dir.private_file(FILE)?;
        let sql = |what: &'static str| {
            let path = path.clone();
            move |source| StoreError::Sqlite { what, path, source }
        };
        let mut conn = Connection::open(&path).map_err(sql("open the database"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(sql("set the busy timeout"))?;
        // WAL: readers never wait for a writer; FULL: every commit is
        // fsynced before it returns.
        conn.query_row("PRAGMA journal_mode = WAL", [], |_| Ok(()))
            .map_err(sql("switch to WAL mode"))?;
        conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(sql("set synchronous=FULL"))?;
        // Every commit is already durable in the WAL, so closing need not
        // checkpoint it into the database (and then sync and delete it):
        // that cost each short-lived `corral` command up to tens of ms on
        // its way out. The next opener reads the WAL as it is.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(sql("keep the WAL on close"))?;
        // The next opener reads the WAL back (no connection kept its
        // index): a commit checkpoints once it passes 1 MiB, which keeps
        // that read short.
        conn.execute_batch("PRAGMA wal_autocheckpoint = 256;")
            .map_err(sql("bound the WAL"))?;
        migrations::apply(&mut conn, migrations::MIGRATIONS).map_err(|source| {
            StoreError::Migration {
                path: path.clone(),
                source,
            }
        })?;
        let store = Self {
            conn: Mutex::new(conn),
            path,
            audit: AuditLog::open(state_dir)?,
        };
        legacy::import_verification_json(&store, &dir)?;
        Ok(store)
    }

    /// The audit trail every recorded event is mirrored to.
    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection (a panic elsewhere while holding it leaves SQLite in
    /// a consistent state: an open transaction is rolled back on drop).
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn sql(&self, what: &'static str) -> impl FnOnce(rusqlite::Error) -> StoreError + use<> {
        let path = self.path.clone();
        move |source| StoreError::Sqlite { what, path, source }
    }

    fn corrupt(&self, what: &'static str, detail: impl ToString) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            what,
            detail: detail.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn opens_private_in_wal_mode_at_the_latest_schema() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let store = Store::open(&state).unwrap();
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode()
            & 0o7777;
        assert_eq!(mode, 0o600);
        let conn = store.conn();
        let journal: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(journal, "wal");
        let sync: i64 = conn
            .query_row("PRAGMA synchronous", [], |r| r.get(0))
            .unwrap();
        assert_eq!(sync, 2, "synchronous=FULL");
        let v: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, migrations::latest());
        drop(conn);
        drop(store);
        // A second open (corral and corrald alike) finds it as it was.
        Store::open(&state).unwrap();
    }

    #[test]
    fn a_commit_outlives_the_close_that_skips_the_checkpoint() {
        use corral_sandbox_core::verify::Timestamp;

        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let event = crate::hooks::Event::Started { name: "a".into() };
        store.record(&event, Timestamp(10)).unwrap();
        drop(store);
        // Not checkpointed on close: the commit is still in the WAL, which
        // stays private like the database.
        let wal = dir.path().join(format!("{FILE}-wal"));
        let meta = std::fs::metadata(&wal).expect("the WAL is kept on close");
        assert!(meta.len() > 0);
        assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
        let events = Store::open(dir.path())
            .unwrap()
            .events(&EventQuery::default())
            .unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].event, event);
    }

    #[test]
    fn an_unsafe_state_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = Store::open(dir.path()).unwrap_err();
        assert!(matches!(e, StoreError::Files(_)), "{e}");
        assert!(!dir.path().join(FILE).exists());
    }
}
