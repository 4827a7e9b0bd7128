//! Numbered schema migrations. Each is applied once, in its own
//! transaction, and the database's `PRAGMA user_version` records the last
//! one applied; a later corral adds migrations at the end of [`MIGRATIONS`]
//! and never edits one that has shipped.

use rusqlite::Connection;

/// One schema step.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its number: 1, 2, … in order, with no gaps.
    pub version: u32,
    /// What it adds, for messages.
    pub what: &'static str,
    /// The SQL, run as one batch inside the migration's transaction.
    pub sql: &'static str,
}

/// Every migration, oldest first.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        what: "events, the verification gate's demotions, sandboxes",
        sql: "
        CREATE TABLE events (
            id       INTEGER PRIMARY KEY AUTOINCREMENT,
            at_ms    INTEGER NOT NULL,
            sandbox  TEXT    NOT NULL,
            event    TEXT    NOT NULL,
            alert    INTEGER NOT NULL DEFAULT 0,
            body     TEXT    NOT NULL
        );
        CREATE INDEX events_by_sandbox ON events (sandbox, id);
        CREATE TABLE gate (
            kind      TEXT    PRIMARY KEY,
            until_ms  INTEGER NOT NULL,
            reason    TEXT    NOT NULL
        );
        CREATE TABLE sandboxes (
            name              TEXT    PRIMARY KEY,
            kind              TEXT    NOT NULL,
            profile           TEXT,
            created_ms        INTEGER NOT NULL,
            last_verified_ms  INTEGER,
            verdict           TEXT
        );
    ",
    },
    Migration {
        version: 2,
        what: "each sandbox's owner (the uid that created it) and template",
        sql: "
            ALTER TABLE sandboxes ADD COLUMN owner_uid INTEGER;
            ALTER TABLE sandboxes ADD COLUMN template TEXT;
        ",
    },
    Migration {
        version: 3,
        what: "grants: the users `corral grant` gave sandbox rights, and their Incus projects",
        sql: "
            CREATE TABLE grants (
                uid         INTEGER PRIMARY KEY,
                user        TEXT    NOT NULL,
                project     TEXT    NOT NULL UNIQUE,
                granted_ms  INTEGER NOT NULL,
                revoked_ms  INTEGER
            );
        ",
    },
    Migration {
        version: 4,
        what: "lifetimes: each sandbox's time to live and idle limit",
        sql: "
            CREATE TABLE lifetimes (
                name            TEXT    PRIMARY KEY,
                ttl_secs        INTEGER,
                expires_ms      INTEGER,
                idle_stop_secs  INTEGER
            );
        ",
    },
];

/// The schema version this build knows.
pub fn latest() -> u32 {
    MIGRATIONS.last().map_or(0, |m| m.version)
}

/// Why the schema could not be brought up to date.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    /// The database was written by a newer corral.
    #[error(
        "the database is at schema version {found}, newer than this corral knows ({known}); run the corral that wrote it, or a newer one"
    )]
    Newer {
        /// Its version.
        found: u32,
        /// Ours.
        known: u32,
    },
    /// A migration failed; its transaction rolled back.
    #[error("schema migration {version} ({what}) failed; the database is unchanged by it")]
    Failed {
        /// Which.
        version: u32,
        /// What it adds.
        what: &'static str,
        /// The cause.
        #[source]
        source: rusqlite::Error,
    },
    /// The version could not be read.
    #[error("cannot read the schema version")]
    Version(#[source] rusqlite::Error),
}

/// Apply every migration newer than the database's version, each in an
/// immediate transaction (so two processes opening the same new database
/// never both apply one). Returns the versions applied.
pub fn apply(conn: &mut Connection, migrations: &[Migration]) -> Result<Vec<u32>, MigrationError> {
    let known = migrations.last().map_or(0, |m| m.version);
    let mut applied = Vec::new();
    for m in migrations {
        let tx = conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(MigrationError::Version)?;
        let found: u32 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(MigrationError::Version)?;
        if found > known {
            return Err(MigrationError::Newer { found, known });
        }
        if found >= m.version {
            continue;
        }
        let failed = |source| MigrationError::Failed {
            version: m.version,
            what: m.what,
            source,
        };
        tx.execute_batch(m.sql).map_err(failed)?;
        // PRAGMA takes no bound parameters; the version is a number we own.
        tx.execute_batch(&format!("PRAGMA user_version = {}", m.version))
            .map_err(failed)?;
        tx.commit().map_err(failed)?;
        applied.push(m.version);
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_consecutive_from_one() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version as usize, i + 1, "{}", m.what);
        }
    }

    #[test]
    fn each_migration_applies_once_and_a_failure_rolls_back() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(apply(&mut conn, MIGRATIONS).unwrap(), [1, 2, 3, 4]);
        assert!(apply(&mut conn, MIGRATIONS).unwrap().is_empty());
        // A later migration that fails leaves the version and schema as they were.
        let more = [
            MIGRATIONS[0],
            MIGRATIONS[1],
            MIGRATIONS[2],
            MIGRATIONS[3],
            Migration {
                version: 5,
                what: "broken",
                sql: "CREATE TABLE t3 (x); THIS IS NOT SQL;",
            },
        ];
        let e = apply(&mut conn, &more).unwrap_err();
        assert!(
            matches!(e, MigrationError::Failed { version: 5, .. }),
            "{e}"
        );
        let v: u32 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, 4);
        let t3: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 't3'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(t3, 0, "the failed migration's table was rolled back");
        // A database from the future is refused.
        conn.execute_batch("PRAGMA user_version = 9").unwrap();
        let e = apply(&mut conn, MIGRATIONS).unwrap_err();
        assert!(e.to_string().contains("newer than this corral"), "{e}");
    }

    #[test]
    fn a_version_1_database_keeps_its_sandboxes_and_gains_owners() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(apply(&mut conn, &MIGRATIONS[..1]).unwrap(), [1]);
        conn.execute_batch(
            "INSERT INTO sandboxes (name, kind, profile, created_ms) VALUES ('old', 'incus', NULL, 5)",
        )
        .unwrap();
        assert_eq!(apply(&mut conn, MIGRATIONS).unwrap(), [2, 3, 4]);
        let (owner, template): (Option<u32>, Option<String>) = conn
            .query_row(
                "SELECT owner_uid, template FROM sandboxes WHERE name = 'old'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        // Created before owners were recorded: no owner, so admins only.
        assert_eq!((owner, template), (None, None));
    }
}
