//! Which records a reader wants.

use std::str::FromStr;

use corral_sandbox_core::verify::Timestamp;
use serde::{Deserialize, Serialize};

use super::AuditLine;

/// What kind of record a line holds (`corral log --kind`, `?kind=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// Blocked packets and suppressed counts.
    Blocked,
    /// DNS answers and refusals.
    Dns,
    /// Created, started, stopped, deleted, snapshots, files, shells, ...
    Lifecycle,
    /// Verification results and alerts.
    Verification,
    /// Grants and revocations of sandbox rights.
    Access,
}

impl EntryKind {
    /// Every kind, in the order `--help` lists them.
    pub const ALL: [EntryKind; 5] = [
        EntryKind::Blocked,
        EntryKind::Dns,
        EntryKind::Lifecycle,
        EntryKind::Verification,
        EntryKind::Access,
    ];

    /// The kind's name.
    pub fn name(self) -> &'static str {
        match self {
            EntryKind::Blocked => "blocked",
            EntryKind::Dns => "dns",
            EntryKind::Lifecycle => "lifecycle",
            EntryKind::Verification => "verification",
            EntryKind::Access => "access",
        }
    }
}

impl FromStr for EntryKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EntryKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = EntryKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown record kind `{s}`: expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// A selection of records; every field that is set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only records about this sandbox.
    pub sandbox: Option<String>,
    /// Only records naming this profile.
    pub profile: Option<String>,
    /// Only records at or after this instant.
    pub since: Option<Timestamp>,
    /// Only these kinds (empty: all).
    pub kinds: Vec<EntryKind>,
    /// Only the newest this many (after the other conditions).
    pub last: Option<usize>,
}

impl AuditFilter {
    /// Does `line` pass every condition but `last`?
    pub fn matches(&self, line: &AuditLine) -> bool {
        let e = &line.entry;
        self.sandbox
            .as_deref()
            .is_none_or(|s| e.sandbox() == Some(s))
            && self
                .profile
                .as_deref()
                .is_none_or(|p| e.profile() == Some(p))
            && self.since.is_none_or(|t| line.recorded >= t)
            && (self.kinds.is_empty() || self.kinds.contains(&e.kind()))
    }
}
