//! The OpenAPI document, generated from the handlers' annotations and the
//! types they take and answer (utoipa). `docs/openapi.json` is this
//! document as `corrald --openapi` prints it; a test fails when they differ
//! and when its operations and the router's route table differ.

use utoipa::openapi::response::ResponseBuilder;
use utoipa::openapi::{Content, HttpMethod, OpenApi as Document, Ref};
use utoipa::{Modify, OpenApi};

use crate::error::{ErrorBody, ErrorDetail};
use crate::routes::{
    CreateRequest, Ending, ExecAnswer, ExecBody, RenameBody, RestoreBody, SnapshotBody, StopBody,
    TtyBody, audit, backup, cluster, events, exec_stream, explain, files, health, host, matrix,
    metrics, profiles, rename, sandboxes, snapshots, templates, verification,
};
use crate::schema::{
    ActionReportDoc, ActionResultDoc, BoundNicDoc, ClusterDoc, ExplainAnswerDoc, ExplanationDoc,
    HostPlanDoc, HostStatusDoc, HostStatusReportDoc, HostVerifyDoc, InstanceTypeDoc, KindStatusDoc,
    LifetimeDoc, MatrixEntryDoc, ProfilesDoc, ReportDoc, ResourcesDoc, SandboxDetailDoc,
    SandboxInfoDoc, SandboxListDoc, SandboxNewDoc, SandboxRecordDoc, SandboxRenameDoc,
    SandboxRestoreDoc, SandboxSnapshotDoc, SandboxStateDoc, SelectionDoc, SnapshotInfoDoc,
    StoredEventDoc, TemplateDoc, TemplateListDoc,
};

/// The document's source.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "corrald",
        description = "corral's HTTP API. On the unix socket the caller is identified by its peer credentials (admin: root or --admin-group; restricted: its own sandboxes); on loopback TCP every request carries `Authorization: Bearer <token>` and a `Host` naming the listen address. Request bodies are `application/json`. Every error answers ErrorBody. docs/api.md has examples."
    ),
    paths(
        health::get,
        matrix::get,
        profiles::get,
        cluster::get,
        host::plan,
        host::status,
        host::verify,
        explain::get,
        verification::get,
        events::get,
        metrics::get,
        audit::list,
        audit::stream,
        sandboxes::list,
        sandboxes::create,
        sandboxes::get,
        sandboxes::delete,
        sandboxes::start,
        sandboxes::stop,
        sandboxes::restart,
        sandboxes::exec,
        sandboxes::verify,
        exec_stream::stream,
        templates::get,
        snapshots::list,
        snapshots::take,
        snapshots::restore,
        rename::rename,
        backup::export,
        backup::import,
        files::pull,
        files::push,
    ),
    components(schemas(
        ErrorBody,
        ErrorDetail,
        CreateRequest,
        StopBody,
        SnapshotBody,
        RestoreBody,
        RenameBody,
        ExecBody,
        TtyBody,
        ExecAnswer,
        Ending,
        SandboxInfoDoc,
        SandboxListDoc,
        LifetimeDoc,
        SandboxDetailDoc,
        SandboxNewDoc,
        ActionReportDoc,
        ActionResultDoc,
        SandboxSnapshotDoc,
        SandboxRestoreDoc,
        SandboxRenameDoc,
        TemplateListDoc,
        BoundNicDoc,
        SandboxStateDoc,
        InstanceTypeDoc,
        ResourcesDoc,
        MatrixEntryDoc,
        SelectionDoc,
        KindStatusDoc,
        HostStatusDoc,
        ProfilesDoc,
        ClusterDoc,
        HostPlanDoc,
        HostVerifyDoc,
        HostStatusReportDoc,
        SandboxRecordDoc,
        StoredEventDoc,
        audit::AuditAnswer,
        audit::AuditFormat,
        ReportDoc,
        TemplateDoc,
        SnapshotInfoDoc,
        ExplanationDoc,
        ExplainAnswerDoc,
    )),
    tags(
        (name = "server", description = "What corrald serves: health, the platform matrix, profiles."),
        (name = "host", description = "The host's egress enforcement (admins only; `explain`: restricted callers for their own sandboxes)."),
        (name = "verification", description = "The verification gate, the event log and each sandbox's verdicts (admins only)."),
        (name = "sandboxes", description = "Sandboxes through the selected provider (restricted callers: their own)."),
    ),
    modifiers(&Refusals)
)]
pub struct ApiDoc;

/// The refusals every route can answer before its handler runs (the guard,
/// `crate::guard`), added to every operation so each one lists them.
struct Refusals;

impl Modify for Refusals {
    fn modify(&self, doc: &mut Document) {
        let error = || {
            Content::builder()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build()
        };
        let refusal = |text: &str| {
            ResponseBuilder::new()
                .description(text)
                .content("application/json", error())
                .build()
        };
        for item in doc.paths.paths.values_mut() {
            for (method, op) in [
                (HttpMethod::Get, item.get.as_mut()),
                (HttpMethod::Post, item.post.as_mut()),
                (HttpMethod::Put, item.put.as_mut()),
                (HttpMethod::Delete, item.delete.as_mut()),
            ] {
                let Some(op) = op else { continue };
                let responses = &mut op.responses.responses;
                responses.entry("401".into()).or_insert_with(|| {
                    refusal("`unauthorized`: TCP without the bearer token.").into()
                });
                // A route's own 403 text already names `forbidden` when it
                // has more to say; the others get the guard's.
                responses.entry("403".into()).or_insert_with(|| {
                    refusal("`forbidden`: the caller may not use this route; `bad_host` or `bad_origin`: a TCP request naming another server.").into()
                });
                if matches!(method, HttpMethod::Post | HttpMethod::Put) {
                    responses
                        .entry("413".into())
                        .or_insert_with(|| refusal("`body_too_large`: over `--max-body`.").into());
                    responses.entry("415".into()).or_insert_with(|| {
                        refusal("`unsupported_media_type`: a body that is not `application/json`.")
                            .into()
                    });
                }
            }
        }
    }
}

/// The document.
pub fn document() -> Document {
    ApiDoc::openapi()
}

/// The document as `docs/openapi.json` holds it: pretty JSON and a newline.
pub fn json() -> String {
    // Serializing the document's own types cannot fail.
    let mut text = document().to_pretty_json().unwrap_or_default();
    text.push('\n');
    text
}
