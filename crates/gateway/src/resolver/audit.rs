//! The decisions corral's resolver writes itself: one JSON object a line
//! in the bridge's gateway directory (`resolver.jsonl`), for the audit
//! collector to turn into the trail's records (attributed to a sandbox,
//! within each asker's budget). No text is scraped: the name is the one
//! the resolver parsed, as DNS presentation text, so a label holding a
//! control byte is written escaped (`\007`) and is never dropped.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::net::IpAddr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// The file, in each gateway's directory.
pub const AUDIT_FILE: &str = "resolver.jsonl";

/// What the resolver did with one query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Forwarded, and answered with what the upstream gave (possibly no
    /// address: NODATA, NXDOMAIN or SERVFAIL upstream).
    Answered,
    /// Refused by the profile's policy, never forwarded.
    Refused,
    /// Answered upstream, but refused because a learned set was full.
    Full,
}

/// One decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditRecord {
    /// The asker.
    pub src: IpAddr,
    /// The name asked, lower case, without the final dot, in DNS
    /// presentation form (bytes outside printable ASCII as `\DDD`).
    pub name: String,
    /// The query type (`A`, `AAAA`, ...).
    pub qtype: String,
    /// What was done.
    pub outcome: Outcome,
    /// The addresses handed out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<IpAddr>,
    /// The learned set that was full (`Full`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set: Option<String>,
}

/// Where decisions go.
pub trait AuditSink: Send + Sync {
    /// Records one decision; a sink that cannot write says so in its own
    /// way (the resolver's answer never waits on the trail).
    fn record(&self, record: &AuditRecord);
}

/// Appends to `resolver.jsonl` (mode 0600, in corral's private state
/// directory; only the host writes it).
#[derive(Debug)]
pub struct FileSink {
    file: Mutex<File>,
}

impl FileSink {
    /// Opens (creating) the file at `path` for appending.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?;
        Ok(Self {
            file: Mutex::new(file),
        })
    }
}

impl AuditSink for FileSink {
    fn record(&self, record: &AuditRecord) {
        let Ok(mut line) = serde_json::to_vec(record) else {
            return;
        };
        line.push(b'\n');
        let mut f = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // One write per line (O_APPEND): a reader sees whole lines or a
        // partial last one, which it reads next time.
        if let Err(e) = f.write_all(&line) {
            tracing::warn!(error = %e, "corral's resolver: cannot write its audit record");
        }
    }
}
