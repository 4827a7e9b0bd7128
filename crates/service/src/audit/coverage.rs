//! When network records were being collected. Blocked packets and DNS
//! decisions reach the trail only while a collector runs (corrald, or a
//! `corral log --follow`): the kernel hands a drop-log message to whoever
//! listens at that moment and keeps none for a later reader, and a
//! collector skips what a gateway logged before it started. A reader of
//! the trail asks [`coverage`] so it can say what it could not see.
//!
//! The running collector rewrites `audit/collected.json` (when it started,
//! when it was last seen) on each refresh; its lock says whether it still
//! runs.

use std::path::Path;

use corral_sandbox_core::verify::Timestamp;
use corral_state_files::StateDir;
use serde::{Deserialize, Serialize};

use super::collector::LOCK;
use super::{AuditError, DIR, rfc3339_millis};

/// The record of the last collector's run, in the audit directory.
pub const FILE: &str = "collected.json";

/// One collector's run: from `since` to at least `seen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Run {
    /// When it started, ms since the Unix epoch.
    pub since_ms: u64,
    /// When it was last seen running.
    pub seen_ms: u64,
}

/// Whether network records are being collected for a state directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coverage {
    /// A collector runs now.
    Running,
    /// None runs; the last one ran over this span.
    Stopped(Run),
    /// No collector ever ran for this state directory.
    Never,
}

impl Coverage {
    /// What a reader of the trail did not see, in words; `None` while a
    /// collector runs.
    pub fn gap(&self) -> Option<String> {
        let why = "blocked packets and DNS decisions are recorded only while corrald or \
                   `corral log --follow` runs (the kernel keeps no blocked packet for a \
                   later reader, and gateway queries from before a collector starts are \
                   skipped; `corral host status` counts the blocked ones); lifecycle, verification and access records are complete";
        match self {
            Coverage::Running => None,
            Coverage::Never => Some(format!(
                "no collector has run for this state directory: {why}"
            )),
            Coverage::Stopped(run) => Some(format!(
                "no collector runs now; the last one ran from {} to about {}: {why}",
                rfc3339_millis(Timestamp(run.since_ms)),
                rfc3339_millis(Timestamp(run.seen_ms))
            )),
        }
    }
}

/// Records that a collector holding the lock runs, since `since`, at `now`.
pub(crate) fn mark(dir: &StateDir, since: Timestamp, now: Timestamp) -> Result<(), AuditError> {
    let run = Run {
        since_ms: since.millis(),
        seen_ms: now.millis(),
    };
    dir.write(FILE, &serde_json::to_vec(&run)?)?;
    Ok(())
}

/// Whether a collector runs for `state_dir` now, and when one last ran.
/// Taking the collectors' lock for a moment is the one sure test of a
/// running one (it holds the lock for its whole life).
pub fn coverage(state_dir: &Path) -> Result<Coverage, AuditError> {
    let Some(dir) = StateDir::open_existing(state_dir)? else {
        return Ok(Coverage::Never);
    };
    let Some(dir) = dir.subdir_existing(DIR)? else {
        return Ok(Coverage::Never);
    };
    if dir.try_lock(LOCK)?.is_none() {
        return Ok(Coverage::Running);
    }
    Ok(match dir.read(FILE)? {
        // An unreadable record says no more than a missing one.
        Some(bytes) => serde_json::from_slice(&bytes).map_or(Coverage::Never, Coverage::Stopped),
        None => Coverage::Never,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_then_running_then_stopped_with_its_span() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(coverage(tmp.path()).unwrap(), Coverage::Never);
        let gap = Coverage::Never.gap().unwrap();
        assert!(gap.contains("corral log --follow"), "{gap}");
        let dir = StateDir::open(tmp.path()).unwrap().subdir(DIR).unwrap();
        // The audit directory alone (lifecycle records only): still never.
        assert_eq!(coverage(tmp.path()).unwrap(), Coverage::Never);
        let lock = dir.try_lock(LOCK).unwrap().unwrap();
        mark(&dir, Timestamp(1_000), Timestamp(6_000)).unwrap();
        assert_eq!(coverage(tmp.path()).unwrap(), Coverage::Running);
        assert_eq!(Coverage::Running.gap(), None);
        drop(lock);
        let c = coverage(tmp.path()).unwrap();
        assert_eq!(
            c,
            Coverage::Stopped(Run {
                since_ms: 1_000,
                seen_ms: 6_000
            })
        );
        let gap = c.gap().unwrap();
        assert!(
            gap.contains("from 1970-01-01T00:00:01.000Z to about 1970-01-01T00:00:06.000Z"),
            "{gap}"
        );
    }
}
