//! The OpenAPI descriptions of the objects both front-ends answer with
//! (`corral_service::shapes`): the same JSON as `corral … --json`.

use utoipa::ToSchema;

use super::{BoundNicDoc, InstanceTypeDoc, SandboxInfoDoc, SandboxStateDoc, SnapshotInfoDoc};

/// Every sandbox corral owns (`corral ls --json`).
#[derive(Debug, ToSchema)]
#[schema(as = SandboxList)]
pub struct SandboxListDoc {
    /// `corral.sandbox-list.v1`.
    schema: String,
    /// Sorted by name.
    sandboxes: Vec<SandboxInfoDoc>,
    /// When each listed sandbox with a lifetime ends, by name; absent when
    /// none has one.
    lifetimes: Option<std::collections::BTreeMap<String, LifetimeDoc>>,
}

/// A sandbox's lifetime (`corral new --ttl`, `--idle-stop`, or its
/// template's).
#[derive(Debug, ToSchema)]
#[schema(as = Lifetime)]
pub struct LifetimeDoc {
    /// When its time to live runs out and corrald deletes it (RFC 3339,
    /// UTC); absent: never.
    expires_at: Option<String>,
    /// The time to live it was given, seconds.
    ttl_secs: Option<u64>,
    /// How long it may sit idle while running before corrald stops it,
    /// seconds; absent: no idle stop.
    idle_stop_secs: Option<u64>,
}

/// One sandbox and its snapshots (`corral info NAME --json`).
#[derive(Debug, ToSchema)]
#[schema(as = SandboxDetail)]
pub struct SandboxDetailDoc {
    /// `corral.sandbox-info.v1`.
    schema: String,
    /// The sandbox's name.
    name: String,
    /// The backend (`incus`…).
    kind: String,
    /// Lifecycle state.
    state: SandboxStateDoc,
    /// Container or VM.
    instance_type: InstanceTypeDoc,
    /// The profile it is attached to, as stamped at creation.
    profile: Option<String>,
    /// The image it was created from, as stamped at creation.
    image: Option<String>,
    /// Creation time as the backend reports it (RFC 3339 when known).
    created: Option<String>,
    /// Addresses the backend reports for it.
    addresses: Vec<String>,
    /// The NIC's MAC and bridge port as corral bound them.
    nic: Option<BoundNicDoc>,
    /// The Incus cluster member it runs on; null off a cluster.
    location: Option<String>,
    /// Its snapshots, oldest first.
    snapshots: Vec<SnapshotInfoDoc>,
}

/// A sandbox just made (`corral new --json`).
#[derive(Debug, ToSchema)]
#[schema(as = SandboxNew)]
pub struct SandboxNewDoc {
    /// `corral.sandbox-new.v1`.
    schema: String,
    /// The sandbox.
    info: SandboxInfoDoc,
    /// What the start gate read back (null without a profile);
    /// docs/json-schema.md lists its fields.
    gate: Option<serde_json::Value>,
    /// What readiness found (null until it is started).
    ready: Option<serde_json::Value>,
    /// What became of its template (null until it is started, and for a
    /// clone).
    template: Option<serde_json::Value>,
    /// A clone's source, `SRC` or `SRC/SNAP`.
    from: Option<String>,
}

/// What a verb did (`corral start|stop|restart|rm --json`).
#[derive(Debug, ToSchema)]
#[schema(as = ActionReport)]
pub struct ActionReportDoc {
    /// `corral.sandbox-action.v1`.
    schema: String,
    /// `start`, `stop`, `restart` or `rm`.
    action: String,
    /// One per sandbox acted on.
    results: Vec<ActionResultDoc>,
}

/// What a verb did to one sandbox.
#[derive(Debug, ToSchema)]
#[schema(as = ActionResult)]
pub struct ActionResultDoc {
    /// The sandbox.
    name: String,
    /// The verb worked on it.
    ok: bool,
    /// Its state afterwards (null after `rm` or on failure).
    state: Option<SandboxStateDoc>,
    /// Why it failed: the `error` of the body corrald answers when this
    /// sandbox alone is asked for (corrald itself never sends a failed
    /// row; `corral` does, for one of several names).
    error: Option<crate::error::ErrorDetail>,
}

/// The templates (`corral templates --json`).
#[derive(Debug, ToSchema)]
#[schema(as = TemplateList)]
pub struct TemplateListDoc {
    /// `corral.templates.v1`.
    schema: String,
    /// Where the operator's template files are read from.
    directory: String,
    /// Every template, by name.
    templates: Vec<super::TemplateDoc>,
}

/// A snapshot just taken (`corral snapshot --json`).
#[derive(Debug, ToSchema)]
#[schema(as = SandboxSnapshot)]
pub struct SandboxSnapshotDoc {
    /// `corral.sandbox-snapshot.v1`.
    schema: String,
    /// The sandbox it is of.
    sandbox: String,
    /// The snapshot's name.
    name: String,
    /// When it was taken, as the backend reports it.
    created: Option<String>,
}

/// A sandbox put back to a snapshot (`corral restore --json`).
#[derive(Debug, ToSchema)]
#[schema(as = SandboxRestore)]
pub struct SandboxRestoreDoc {
    /// `corral.sandbox-restore.v1`.
    schema: String,
    /// The snapshot it was put back to.
    snapshot: String,
    /// The sandbox afterwards.
    info: SandboxInfoDoc,
    /// What the start gate read back (a running profiled sandbox).
    gate: Option<serde_json::Value>,
    /// What readiness found (a running sandbox).
    ready: Option<serde_json::Value>,
    /// Null: a restore applies no template.
    template: Option<serde_json::Value>,
    /// Null.
    from: Option<String>,
}

/// A sandbox under its new name (`corral rename --json`).
#[derive(Debug, ToSchema)]
#[schema(as = SandboxRename)]
pub struct SandboxRenameDoc {
    /// `corral.sandbox-rename.v1`.
    schema: String,
    /// Its old name.
    from: String,
    /// Its new name.
    name: String,
    /// The backend (`incus`…).
    kind: String,
    /// Lifecycle state.
    state: SandboxStateDoc,
    /// Container or VM.
    instance_type: InstanceTypeDoc,
    /// The profile it is attached to, as stamped at creation.
    profile: Option<String>,
    /// The image it was created from, as stamped at creation.
    image: Option<String>,
    /// Creation time as the backend reports it.
    created: Option<String>,
    /// Addresses the backend reports for it.
    addresses: Vec<String>,
    /// The NIC's MAC and bridge port as corral bound them.
    nic: Option<BoundNicDoc>,
    /// The Incus cluster member it runs on; null off a cluster.
    location: Option<String>,
}
