//! Sandboxes: the list, one sandbox with its snapshots, one just handed
//! out, and the outcome of a verb on some of them.

use corral_sandbox_core::sandbox::{SandboxInfo, SandboxState, SnapshotInfo};
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{ErrorBody, ErrorDetail};
use crate::store::LifetimeRecord;
use crate::{HandedOut, ServiceError};

/// The list's schema id.
pub const SANDBOX_LIST: &str = "corral.sandbox-list.v1";
/// One sandbox's schema id.
pub const SANDBOX_INFO: &str = "corral.sandbox-info.v1";
/// A sandbox just made.
pub const SANDBOX_NEW: &str = "corral.sandbox-new.v1";
/// A verb's outcome.
pub const SANDBOX_ACTION: &str = "corral.sandbox-action.v1";

/// `corral ls --json`, `GET /v1/sandboxes`.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxList {
    /// [`SANDBOX_LIST`].
    pub schema: &'static str,
    /// Sorted by name.
    pub sandboxes: Vec<SandboxInfo>,
    /// When each listed sandbox with a lifetime ends, by name (absent when
    /// none has one).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub lifetimes: BTreeMap<String, Lifetime>,
}

impl SandboxList {
    /// `sandboxes`, sorted by name.
    pub fn new(mut sandboxes: Vec<SandboxInfo>) -> Self {
        sandboxes.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            schema: SANDBOX_LIST,
            sandboxes,
            lifetimes: BTreeMap::new(),
        }
    }

    /// The same with the lifetimes the store holds for the listed ones.
    #[must_use]
    pub fn with_lifetimes(mut self, store: &[(String, LifetimeRecord)]) -> Self {
        let listed: BTreeSet<&str> = self.sandboxes.iter().map(|i| i.name.as_str()).collect();
        self.lifetimes = store
            .iter()
            .filter(|(n, _)| listed.contains(n.as_str()))
            .map(|(n, l)| (n.clone(), Lifetime::of(l)))
            .collect();
        self
    }
}

/// A sandbox's lifetime as shown: when it is deleted and how long it may
/// sit idle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Lifetime {
    /// When its time to live runs out and corral deletes it (RFC 3339,
    /// UTC); absent: never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The time to live it was given, seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_secs: Option<u64>,
    /// How long it may sit idle while running before corral stops it,
    /// seconds; absent: no idle stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_stop_secs: Option<u64>,
}

impl Lifetime {
    /// The record as shown.
    pub fn of(l: &LifetimeRecord) -> Self {
        Self {
            expires_at: l.expires.map(crate::audit::rfc3339_millis),
            ttl_secs: l.ttl_secs,
            idle_stop_secs: l.idle_stop_secs,
        }
    }
}

/// `corral info NAME --json`, `GET /v1/sandboxes/{name}`.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxDetail {
    /// [`SANDBOX_INFO`].
    pub schema: &'static str,
    /// The sandbox, its fields at the top level.
    #[serde(flatten)]
    pub info: SandboxInfo,
    /// Its snapshots, oldest first.
    pub snapshots: Vec<SnapshotInfo>,
}

impl SandboxDetail {
    /// `info` with its `snapshots`.
    pub fn new(info: SandboxInfo, snapshots: Vec<SnapshotInfo>) -> Self {
        Self {
            schema: SANDBOX_INFO,
            info,
            snapshots,
        }
    }
}

/// `corral new --json`, `POST /v1/sandboxes`: what was handed out. Fields
/// are added here (or to [`HandedOut`]) for both front-ends at once.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxNew {
    /// [`SANDBOX_NEW`].
    pub schema: &'static str,
    /// The sandbox and what its creation checked.
    #[serde(flatten)]
    pub handed_out: HandedOut,
}

impl SandboxNew {
    /// The object for `handed_out`.
    pub fn new(handed_out: HandedOut) -> Self {
        Self {
            schema: SANDBOX_NEW,
            handed_out,
        }
    }
}

/// The outcome of a verb on one sandbox.
#[derive(Debug, Clone, Serialize)]
pub struct ActionResult {
    /// The sandbox.
    pub name: String,
    /// It worked.
    pub ok: bool,
    /// Its state afterwards, when known.
    pub state: Option<SandboxState>,
    /// Why it did not: the `error` of the [`ErrorBody`] corrald answers,
    /// and `corral` prints, when this sandbox alone was asked for.
    pub error: Option<ErrorDetail>,
}

impl ActionResult {
    /// `name`, left in `state`.
    pub fn done(name: &str, state: Option<SandboxState>) -> Self {
        Self {
            name: name.to_owned(),
            ok: true,
            state,
            error: None,
        }
    }

    /// `name`, which failed with `e`.
    pub fn failed(name: &str, e: &ServiceError) -> Self {
        Self {
            name: name.to_owned(),
            ok: false,
            state: None,
            error: Some(ErrorBody::failure(e).error),
        }
    }
}

/// `corral start|stop|restart|rm --json` and the same routes of corrald.
#[derive(Debug, Clone, Serialize)]
pub struct ActionReport {
    /// [`SANDBOX_ACTION`].
    pub schema: &'static str,
    /// `start`, `stop`, `restart` or `rm`.
    pub action: String,
    /// One per sandbox acted on.
    pub results: Vec<ActionResult>,
}

impl ActionReport {
    /// `action`'s `results`.
    pub fn new(action: &str, results: Vec<ActionResult>) -> Self {
        Self {
            schema: SANDBOX_ACTION,
            action: action.to_owned(),
            results,
        }
    }

    /// One sandbox that `action` left in `state`.
    pub fn done(action: &str, name: &str, state: Option<SandboxState>) -> Self {
        Self::new(action, vec![ActionResult::done(name, state)])
    }
}

/// A snapshot just taken's schema id.
pub const SANDBOX_SNAPSHOT: &str = "corral.sandbox-snapshot.v1";
/// A restore's schema id.
pub const SANDBOX_RESTORE: &str = "corral.sandbox-restore.v1";
/// A rename's schema id.
pub const SANDBOX_RENAME: &str = "corral.sandbox-rename.v1";

/// `corral snapshot --json`, `POST /v1/sandboxes/{name}/snapshots`.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxSnapshot {
    /// [`SANDBOX_SNAPSHOT`].
    pub schema: &'static str,
    /// The sandbox it is of.
    pub sandbox: String,
    /// The snapshot, its fields at the top level.
    #[serde(flatten)]
    pub snapshot: SnapshotInfo,
}

impl SandboxSnapshot {
    /// `snapshot`, of `sandbox`.
    pub fn new(sandbox: &str, snapshot: SnapshotInfo) -> Self {
        Self {
            schema: SANDBOX_SNAPSHOT,
            sandbox: sandbox.to_owned(),
            snapshot,
        }
    }
}

/// `corral restore --json`, `POST /v1/sandboxes/{name}/restore`.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxRestore {
    /// [`SANDBOX_RESTORE`].
    pub schema: &'static str,
    /// The snapshot it was put back to.
    pub snapshot: String,
    /// The sandbox afterwards (a running one re-checked as at hand-out).
    #[serde(flatten)]
    pub handed_out: HandedOut,
}

impl SandboxRestore {
    /// `handed_out`, put back to `snapshot`.
    pub fn new(snapshot: &str, handed_out: HandedOut) -> Self {
        Self {
            schema: SANDBOX_RESTORE,
            snapshot: snapshot.to_owned(),
            handed_out,
        }
    }
}

/// `corral rename --json`, `POST /v1/sandboxes/{name}/rename`.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxRename {
    /// [`SANDBOX_RENAME`].
    pub schema: &'static str,
    /// Its old name.
    pub from: String,
    /// The sandbox under its new name, its fields at the top level.
    #[serde(flatten)]
    pub info: SandboxInfo,
}

impl SandboxRename {
    /// `info`, formerly `from`.
    pub fn new(from: &str, info: SandboxInfo) -> Self {
        Self {
            schema: SANDBOX_RENAME,
            from: from.to_owned(),
            info,
        }
    }
}
