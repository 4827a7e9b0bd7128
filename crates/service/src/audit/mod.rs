//! The audit trail: one JSON object per line in
//! `<state_dir>/audit/audit.jsonl`, rotated by size, holding every
//! lifecycle and verification event (mirrored from the store's event log)
//! every network decision the host made for a sandbox (blocked packets,
//! suppressed counts, DNS answers and refusals) and every grant and
//! revocation of sandbox rights.
//!
//! Only the host writes it: the file lives in corral's private state
//! directory, which no sandbox can reach. The schema is
//! docs/json-schema.md#audit-records; `corral log` and `GET /v1/events`
//! read it.

pub mod collector;
pub mod coverage;
mod dns;
mod filter;
mod follow;
pub mod ocsf;
mod time;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};

use corral_sandbox_core::audit::{AccessRecord, NetRecord};
use corral_sandbox_core::verify::Timestamp;
use corral_state_files::{RotatingLog, StateDir, StateFileError};
use serde::{Deserialize, Serialize};

pub use collector::{Collector, NicSource, NoNics};
pub use dns::DnsTracker;
pub use filter::{AuditFilter, EntryKind};
pub use follow::Follower;
pub use time::{SinceError, parse_since, rfc3339_millis};

use crate::hooks::Event;

/// The audit directory, inside the state directory.
pub const DIR: &str = "audit";
/// The current file of the trail.
pub const FILE: &str = "audit.jsonl";
/// A file is rotated when a line would take it past this size.
pub const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Rotated files kept (`audit.jsonl.1` … `.4`): the trail is bounded by
/// about 80 MiB.
pub const KEEP: u32 = 4;

/// One record of the trail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Entry {
    /// A network decision.
    Net(NetRecord),
    /// A grant or a revocation.
    Access(AccessRecord),
    /// A lifecycle or verification event.
    Sandbox(Event),
}

impl Entry {
    /// The sandbox the record is about, when known.
    pub fn sandbox(&self) -> Option<&str> {
        match self {
            Entry::Net(n) => n.sandbox(),
            Entry::Access(_) => None,
            Entry::Sandbox(e) => e.sandbox(),
        }
    }

    /// The profile, when the record names one.
    pub fn profile(&self) -> Option<&str> {
        match self {
            Entry::Net(n) => Some(n.profile()),
            Entry::Access(_) => None,
            Entry::Sandbox(Event::Created { profile, .. }) => profile.as_deref(),
            Entry::Sandbox(Event::Verification(v)) => v.profile.as_ref().map(|p| p.as_str()),
            Entry::Sandbox(
                Event::GatewayDied { profile, .. } | Event::GatewayRestarted { profile, .. },
            ) => profile.as_deref(),
            Entry::Sandbox(_) => None,
        }
    }

    /// What kind of record it is.
    pub fn kind(&self) -> EntryKind {
        match self {
            Entry::Net(NetRecord::Blocked(_) | NetRecord::Suppressed { .. }) => EntryKind::Blocked,
            Entry::Net(
                NetRecord::DnsAnswered(_)
                | NetRecord::DnsRefused(_)
                | NetRecord::DnsSuppressed { .. }
                | NetRecord::LearnRefused { .. },
            ) => EntryKind::Dns,
            Entry::Access(_) => EntryKind::Access,
            // What supervision found is judged like a verification: the
            // gateways', the kernel watch's, the cluster controller's.
            Entry::Sandbox(
                Event::Verification(_)
                | Event::Alert { .. }
                | Event::GatewayDied { .. }
                | Event::GatewayRestarted { .. }
                | Event::UnmanagedStart { .. }
                | Event::HostDrift { .. }
                | Event::MemberDrained { .. }
                | Event::MemberRestored { .. },
            ) => EntryKind::Verification,
            Entry::Sandbox(_) => EntryKind::Lifecycle,
        }
    }
}

/// One line of the trail: when, and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditLine {
    /// When it was recorded, ms since the Unix epoch (named apart from a
    /// verification event's own `at`, which sits beside it).
    pub recorded: Timestamp,
    /// The same instant as RFC 3339 UTC (for people and `jq`; readers use
    /// `at`).
    #[serde(default, skip_deserializing)]
    pub time: String,
    /// The record (its `event` field says which).
    #[serde(flatten)]
    pub entry: Entry,
}

impl AuditLine {
    /// `entry`, recorded at `at`.
    pub fn new(at: Timestamp, entry: Entry) -> Self {
        Self {
            recorded: at,
            time: rfc3339_millis(at),
            entry,
        }
    }
}

/// The trail could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The audit directory or a file of it is unsafe or unwritable.
    #[error(transparent)]
    Files(#[from] StateFileError),
    /// A file of the trail could not be read.
    #[error("cannot read the audit trail {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A record would not serialise (a bug).
    #[error("cannot write an audit record: {0}")]
    Encode(#[from] serde_json::Error),
}

/// The audit trail of one state directory.
#[derive(Debug)]
pub struct AuditLog {
    log: RotatingLog,
}

impl AuditLog {
    /// The trail under `state_dir` (the `audit` directory is created, mode
    /// 0700, under the state directory's trust rule).
    pub fn open(state_dir: &Path) -> Result<Self, AuditError> {
        let dir = StateDir::open(state_dir)?.subdir(DIR)?;
        Ok(Self {
            log: RotatingLog::new(dir, FILE, MAX_BYTES, KEEP)?,
        })
    }

    /// The trail under `state_dir` if it was ever written (`None`: no
    /// audit directory, so nothing to read).
    pub fn open_existing(state_dir: &Path) -> Result<Option<Self>, AuditError> {
        let Some(dir) = StateDir::open_existing(state_dir)? else {
            return Ok(None);
        };
        let Some(dir) = dir.subdir_existing(DIR)? else {
            return Ok(None);
        };
        Ok(Some(Self {
            log: RotatingLog::new(dir, FILE, MAX_BYTES, KEEP)?,
        }))
    }

    /// The current file.
    pub fn path(&self) -> PathBuf {
        self.log.path()
    }

    /// Appends `entry`, recorded at `at`.
    pub fn append(&self, at: Timestamp, entry: Entry) -> Result<(), AuditError> {
        let line = serde_json::to_string(&AuditLine::new(at, entry))?;
        Ok(self.log.append(&line)?)
    }

    /// Every record `filter` selects, oldest first, across the rotated
    /// files. Lines that do not parse (a writer killed mid-line, a record
    /// of a newer corral) are skipped and counted in the second value.
    pub fn read(&self, filter: &AuditFilter) -> Result<(Vec<AuditLine>, usize), AuditError> {
        let mut out = Vec::new();
        let mut bad = 0;
        for path in self.log.files() {
            let file = match std::fs::File::open(&path) {
                Ok(f) => f,
                // Rotated away between the listing and the open.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(source) => return Err(AuditError::Read { path, source }),
            };
            for line in BufReader::new(file).lines() {
                let line = line.map_err(|source| AuditError::Read {
                    path: path.clone(),
                    source,
                })?;
                match parse_line(&line) {
                    Some(l) if filter.matches(&l) => out.push(l),
                    Some(_) => {}
                    None => bad += 1,
                }
            }
        }
        if let Some(n) = filter.last {
            let skip = out.len().saturating_sub(n);
            out.drain(..skip);
        }
        Ok((out, bad))
    }

    /// A follower positioned at the current end of the trail.
    pub fn follow(&self) -> Follower {
        Follower::at_end(self.path(), self.log.keep())
    }
}

/// One line parsed (`None`: blank, partial or unknown).
pub fn parse_line(line: &str) -> Option<AuditLine> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let mut l: AuditLine = serde_json::from_str(line).ok()?;
    l.time = rfc3339_millis(l.recorded);
    Some(l)
}

#[cfg(test)]
mod tests;
