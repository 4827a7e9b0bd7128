//! `/v1/sandboxes…`: create, list, inspect, start, stop, exec and delete
//! sandboxes through the lifecycle service (start gate and ownership checks
//! included). Every refusal is mapped to a status in `error.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse as _, Response};
use axum::{Extension, Json};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use corral_sandbox_core::sandbox::{
    ExecOutput, ExecRequest, InstanceType, ProviderError, Resources, StopOptions, TerminalSize,
};
use corral_service::shapes::{ActionReport, SandboxDetail, SandboxList, SandboxNew};
use corral_service::{Caller, CreateOptions, NewSandbox};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Body, json, json_or_default};
use crate::error::{ApiError, ErrorBody};
use crate::state::{AppState, Limits};

/// `POST /v1/sandboxes`: a new sandbox from a template, or (with `from`)
/// a clone of an existing one.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    /// The sandbox's name.
    pub name: String,
    /// The template (`GET /v1/templates`; default `blank`).
    #[serde(default)]
    pub template: Option<String>,
    /// The image (an alias or fingerprint the backend knows; default: the
    /// template's).
    #[serde(default)]
    pub image: Option<String>,
    /// The network profile; none means no network at all.
    #[serde(default)]
    pub profile: Option<String>,
    /// Resource limits (each one absent is the template's).
    #[serde(default)]
    #[schema(value_type = crate::schema::ResourcesDoc)]
    pub resources: Resources,
    /// Clone this sandbox (`SRC`) or one of its snapshots (`SRC/SNAP`)
    /// instead: a fresh identity on the source's profile; `template`,
    /// `image`, `profile` and `resources` must then be absent.
    #[serde(default)]
    pub from: Option<String>,
    /// The Incus cluster member to place it on. With a profile, it must be
    /// in rotation with a fresh attestation (else 409 `not_in_rotation`
    /// with the reason); without one, this member when it is in rotation,
    /// else another that is. Work placed on another member is admitted by
    /// that member's corrald (docs/cluster.md). Off a cluster, a target is
    /// refused (400).
    #[serde(default)]
    pub target: Option<String>,
    /// Its time to live in seconds (1 to 31536000): corrald deletes it that
    /// long after it is created (an `expired` event); absent: the
    /// template's, else none.
    #[serde(default)]
    pub ttl_secs: Option<u64>,
    /// How long it may sit idle while running, in seconds (1 to
    /// 31536000): no exec session and no packet from it through its port
    /// for that long, and corrald stops it (an `idle_stopped` event);
    /// absent: the template's, else none.
    #[serde(default)]
    pub idle_stop_secs: Option<u64>,
}

/// `POST /v1/sandboxes/{name}/stop` (the body may be empty).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct StopBody {
    /// Kill instead of a clean shutdown.
    #[serde(default)]
    pub force: bool,
    /// Wait at most this many seconds for a clean shutdown.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// `POST /v1/sandboxes/{name}/exec`, and the first message of a streamed exec.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecBody {
    /// Program and arguments, passed as a vector (never through a shell).
    pub argv: Vec<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory inside the sandbox.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Give up after this many seconds (504 `timeout`) and kill the
    /// command and everything it started; default: corrald's
    /// `--exec-timeout`, at most its `--exec-timeout-max`.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// Streamed exec only: run the command on a terminal of this size (an
    /// interactive shell); its output then comes on stream 1 alone.
    #[serde(default)]
    pub tty: Option<TtyBody>,
}

/// A terminal's size, in characters.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TtyBody {
    /// Columns (1 to 1000).
    pub width: u16,
    /// Rows (1 to 1000).
    pub height: u16,
}

/// What a finished command produced: text for reading, base64 for bytes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ExecAnswer {
    /// Exit status (a signal-killed command reports 128 + signal).
    pub exit_code: i32,
    /// True when a stream was longer than the output cap and holds only
    /// its first bytes.
    pub truncated: bool,
    /// Standard output as UTF-8, invalid sequences replaced.
    pub stdout: String,
    /// Standard error as UTF-8, invalid sequences replaced.
    pub stderr: String,
    /// Standard output, exact, in base64.
    pub stdout_base64: String,
    /// Standard error, exact, in base64.
    pub stderr_base64: String,
}

impl From<ExecOutput> for ExecAnswer {
    fn from(out: ExecOutput) -> Self {
        Self {
            exit_code: out.exit_code,
            truncated: out.truncated,
            stdout: out.stdout_text(),
            stderr: out.stderr_text(),
            stdout_base64: STANDARD.encode(&out.stdout),
            stderr_base64: STANDARD.encode(&out.stderr),
        }
    }
}

/// How long a start waits for the sandbox to be ready (lease and exec).
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The service's request for a create request (one without `from`).
pub fn new_sandbox(req: CreateRequest) -> NewSandbox {
    NewSandbox {
        name: req.name,
        image: req.image,
        template: req.template,
        profile: req.profile,
        resources: req.resources,
        instance_type: InstanceType::Container,
        target: req.target,
        ttl_secs: req.ttl_secs,
        idle_stop_secs: req.idle_stop_secs,
    }
}

/// A clone request names nothing a clone takes from its source.
fn clone_only(req: &CreateRequest) -> Result<(), ApiError> {
    let given: Vec<&str> = [
        ("template", req.template.is_some()),
        ("image", req.image.is_some()),
        ("profile", req.profile.is_some()),
        ("resources", req.resources != Resources::default()),
        ("target", req.target.is_some()),
        ("ttl_secs", req.ttl_secs.is_some()),
        ("idle_stop_secs", req.idle_stop_secs.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, set)| set.then_some(f))
    .collect();
    if given.is_empty() {
        Ok(())
    } else {
        Err(ProviderError::InvalidSpec {
            field: "from",
            reason: format!(
                "a clone takes its source's image, profile and resources; leave out {}",
                given.join(", ")
            ),
        }
        .into())
    }
}

/// Run `work` to its end even when the client goes away meanwhile: a
/// closed connection cancels the handler, and a lifecycle step cut off
/// half-way would leave a sandbox started but not handed out (its checks
/// not run), created but not recorded, or an exec whose timeout never
/// fires and whose command is never killed. The turn and the name lock go
/// with the work.
pub(crate) async fn detached<T: Send + 'static>(
    work: impl Future<Output = Result<T, ApiError>> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::spawn(work)
        .await
        .map_err(|e| ApiError::internal(anyhow::anyhow!("the request's worker failed: {e}")))?
}

/// May `caller` see and act on sandbox `name`? Admins may; a restricted
/// caller only when the owner records name it (403 `not_owner` otherwise,
/// whether or not such a sandbox exists, so names do not leak).
pub(crate) async fn authorize(
    state: &AppState,
    caller: &Caller,
    name: &str,
) -> Result<(), ApiError> {
    if caller.is_admin() {
        return Ok(());
    }
    let owner = state.owners().owner(name).map_err(ApiError::internal)?;
    if caller.may_act_on(owner) {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "not_owner",
            anyhow::anyhow!(
                "sandbox `{}` is not one of uid {}'s sandboxes; a restricted caller acts on the sandboxes it created only",
                corral_sandbox_core::text::Shown(name),
                caller.uid
            ),
        ))
    }
}

/// Every sandbox corral owns on the backend (a restricted caller: its own).
#[utoipa::path(
    get,
    path = "/v1/sandboxes",
    tag = "sandboxes",
    operation_id = "listSandboxes",
    responses(
        (status = 200, description = "The sandboxes (`corral.sandbox-list.v1`, as `corral ls --json`).", body = crate::schema::SandboxListDoc),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`: the backend refused, answered nonsense, or could not be reached.", body = ErrorBody),
    )
)]
pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> Result<Json<SandboxList>, ApiError> {
    let _turn = state.turn().await?;
    let all = state.sandboxes().list().await?;
    let lifetimes = state.db().lifetimes().unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot read the lifetimes; the list shows none");
        Vec::new()
    });
    if caller.is_admin() {
        return Ok(Json(SandboxList::new(all).with_lifetimes(&lifetimes)));
    }
    let mut mine = Vec::new();
    for info in all {
        if authorize(&state, &caller, info.name.as_str()).await.is_ok() {
            mine.push(info);
        }
    }
    Ok(Json(SandboxList::new(mine).with_lifetimes(&lifetimes)))
}

/// Create (but do not start) a sandbox from a template, or clone one
/// (`from`); 201 with its information. A profiled sandbox passes the
/// start gate first (409 `not_enforced`); its first start waits for its
/// lease and runs the canary. The caller is recorded as its owner (and
/// must be allowed to act on a clone's source).
#[utoipa::path(
    post,
    path = "/v1/sandboxes",
    tag = "sandboxes",
    operation_id = "createSandbox",
    request_body = CreateRequest,
    responses(
        (status = 201, description = "Created (stopped): `corral.sandbox-new.v1`, as `corral new --json` (`ready` and `template` null until it is started).", body = crate::schema::SandboxNewDoc),
        (status = 400, description = "`bad_request` (body), `invalid_spec` (name, image, resources beyond this host, `from` with fields a clone takes from its source), `unknown_profile` (the message lists the configured profiles) or `unknown_template` (it lists the templates).", body = ErrorBody),
        (status = 403, description = "`not_owned`: a clone's source carries no corral stamp; `not_owner`: a restricted caller's clone of a sandbox it did not create.", body = ErrorBody),
        (status = 404, description = "`not_found`: e.g. the image, a clone's source or its snapshot does not exist.", body = ErrorBody),
        (status = 409, description = "`already_exists`; `not_enforced`: the profile's enforcement is incomplete (the message names what is missing; `corral host apply` restores it); `not_in_rotation`: on an Incus cluster, the `target` (or every member) is drained or has no fresh attestation, or no cluster controller runs (the message says why, per member); `on_another_member`: placed on another member and this corrald has no `--cluster` peers to ask.", body = ErrorBody),
        (status = 500, description = "`invalid_template`: a template file of the operator's is invalid (the message names the file, line and field).", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`; `member_unreachable`: the member it is placed on gave no answer when asked to admit it (an instance it made is deleted; the message says what was left).", body = ErrorBody),
    )
)]
pub async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Body(body): Body,
) -> Result<Response, ApiError> {
    let req: CreateRequest = json(&body)?;
    let options = CreateOptions {
        start: false,
        owner: Some(caller.uid),
        ..CreateOptions::default()
    };
    if let Some(from) = req.from.clone() {
        clone_only(&req)?;
        let (source, _) = corral_service::sandboxes::copies::split_from(&from)?;
        authorize(&state, &caller, source).await?;
        return detached(async move {
            let _name = state.lock_name(&req.name).await;
            let _turn = state.turn().await?;
            let made = state
                .sandboxes_for(&caller)?
                .clone_sandbox(&req.name, &from, options)
                .await?;
            Ok((StatusCode::CREATED, Json(SandboxNew::new(made))).into_response())
        })
        .await;
    }
    let req = new_sandbox(req);
    detached(async move {
        let _name = state.lock_name(&req.name).await;
        let _turn = state.turn().await?;
        // Placed on another cluster member: admitted there, on its kernel.
        if let Some(answer) = crate::admit::create_elsewhere(&state, &caller, &req, &body).await? {
            return Ok(answer);
        }
        Ok(create_here(&state, &caller, &req, options)
            .await?
            .into_response())
    })
    .await
}

/// A create on this member (the caller's name lock and turn held).
pub(crate) async fn create_here(
    state: &AppState,
    caller: &Caller,
    req: &NewSandbox,
    options: CreateOptions,
) -> Result<(StatusCode, Json<SandboxNew>), ApiError> {
    // A granted user's sandbox goes in their own Incus project.
    let made = state.sandboxes_for(caller)?.create(req, options).await?;
    Ok((StatusCode::CREATED, Json(SandboxNew::new(made))))
}

/// One sandbox's information.
#[utoipa::path(
    get,
    path = "/v1/sandboxes/{name}",
    tag = "sandboxes",
    operation_id = "getSandbox",
    params(("name" = String, Path, description = "The sandbox's name.")),
    responses(
        (status = 200, description = "The sandbox and its snapshots (`corral.sandbox-info.v1`, as `corral info --json`).", body = crate::schema::SandboxDetailDoc),
        (status = 400, description = "`invalid_spec`: not a valid name.", body = ErrorBody),
        (status = 403, description = "`not_owned`: the instance carries no corral stamp; `not_owner`: a restricted caller's request for a sandbox it did not create.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: too many provider operations in flight; retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`: the backend refused, answered nonsense, or could not be reached.", body = ErrorBody),
    )
)]
pub async fn get(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Json<SandboxDetail>, ApiError> {
    authorize(&state, &caller, &name).await?;
    let _turn = state.turn().await?;
    let info = state.sandboxes().info(&name).await?;
    let snapshots = state.sandboxes().snapshots(&name).await?;
    Ok(Json(SandboxDetail::new(info, snapshots)))
}

/// Start a sandbox through the start gate (409 `not_enforced` when its
/// profile's enforcement is incomplete); answers its information once it
/// is ready.
#[utoipa::path(
    post,
    path = "/v1/sandboxes/{name}/start",
    tag = "sandboxes",
    operation_id = "startSandbox",
    params(("name" = String, Path, description = "The sandbox's name.")),
    responses(
        (status = 200, description = "Started and ready: `corral.sandbox-action.v1`, as `corral start --json`.", body = crate::schema::ActionReportDoc),
        (status = 409, description = "`not_enforced`: the enforcement of the sandbox's profile is incomplete (the message names what is missing; `corral host apply` restores it); `invalid_state`; `refused_by_check`; `not_in_rotation`; `on_another_member`: located on another member and this corrald has no `--cluster` peers to ask (with peers, that member's corrald starts it and its answer is passed on).", body = ErrorBody),
        (status = 500, description = "`topology`: its devices differ from what corral built.", body = ErrorBody),
        (status = 504, description = "`not_ready`: started, but no DHCP lease from the profile's gateway or no exec answer in time.", body = ErrorBody),
        (status = 403, description = "`not_owned`: the instance carries no corral stamp; `not_owner`: a restricted caller's request for a sandbox it did not create.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: too many provider operations in flight; retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`: the backend refused, answered nonsense, or could not be reached; `member_unreachable`: the member it is located on gave no answer when asked to start it (a start it may have begun is stopped).", body = ErrorBody),
    )
)]
pub async fn start(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    authorize(&state, &caller, &name).await?;
    detached(async move {
        let _name = state.lock_name(&name).await;
        let _turn = state.turn().await?;
        // On another cluster member: started there, its canary on its kernel.
        if let Some(answer) = crate::admit::start_elsewhere(&state, &name).await? {
            return Ok(answer);
        }
        Ok(start_here(&state, &name).await?.into_response())
    })
    .await
}

/// A start on this member (the name lock and turn held).
pub(crate) async fn start_here(
    state: &AppState,
    name: &str,
) -> Result<Json<ActionReport>, ApiError> {
    let made = state.sandboxes().start(name, READY_TIMEOUT).await?;
    Ok(Json(ActionReport::done(
        "start",
        name,
        Some(made.info.state),
    )))
}

/// Stop a sandbox; answers its information afterwards.
#[utoipa::path(
    post,
    path = "/v1/sandboxes/{name}/stop",
    tag = "sandboxes",
    operation_id = "stopSandbox",
    params(("name" = String, Path, description = "The sandbox's name.")),
    request_body(content = Option<StopBody>, description = "May be empty: a clean shutdown with the backend's default wait."),
    responses(
        (status = 200, description = "Stopped: `corral.sandbox-action.v1`, as `corral stop --json`.", body = crate::schema::ActionReportDoc),
        (status = 400, description = "`bad_request`.", body = ErrorBody),
        (status = 409, description = "`invalid_state`: not running.", body = ErrorBody),
        (status = 504, description = "`timeout`: a clean shutdown did not finish within `timeout_secs` (the message says how long the stop took; stop with `force`).", body = ErrorBody),
        (status = 403, description = "`not_owned`: the instance carries no corral stamp; `not_owner`: a restricted caller's request for a sandbox it did not create.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: too many provider operations in flight; retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`: the backend refused, answered nonsense, or could not be reached.", body = ErrorBody),
    )
)]
pub async fn stop(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Body(body): Body,
) -> Result<Json<ActionReport>, ApiError> {
    let options = stop_options(&body)?;
    authorize(&state, &caller, &name).await?;
    detached(async move {
        let _name = state.lock_name(&name).await;
        let _turn = state.turn().await?;
        let info = state.sandboxes().stop(&name, options).await?;
        Ok(Json(ActionReport::done("stop", &name, Some(info.state))))
    })
    .await
}

/// Stop a running sandbox and start it again through the start gate,
/// which is checked before the stop: a refused restart leaves it running
/// as it was. Answers once it is ready again.
#[utoipa::path(
    post,
    path = "/v1/sandboxes/{name}/restart",
    tag = "sandboxes",
    operation_id = "restartSandbox",
    params(("name" = String, Path, description = "The sandbox's name.")),
    request_body(content = Option<StopBody>, description = "May be empty: a clean shutdown with the backend's default wait; `force` kills instead."),
    responses(
        (status = 200, description = "Restarted and ready: `corral.sandbox-action.v1`, as `corral restart --json`.", body = crate::schema::ActionReportDoc),
        (status = 400, description = "`bad_request`.", body = ErrorBody),
        (status = 409, description = "`not_enforced`, `refused_by_check`, `not_in_rotation`, `on_another_member` (the sandbox is left as it was); `invalid_state`.", body = ErrorBody),
        (status = 500, description = "`topology`: its devices differ from what corral built.", body = ErrorBody),
        (status = 504, description = "`timeout`: the clean shutdown did not finish in time; `not_ready`: started again, but not ready in time.", body = ErrorBody),
        (status = 403, description = "`not_owned`: the instance carries no corral stamp; `not_owner`: a restricted caller's request for a sandbox it did not create.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: too many provider operations in flight; retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`: the backend refused, answered nonsense, or could not be reached.", body = ErrorBody),
    )
)]
pub async fn restart(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Body(body): Body,
) -> Result<Json<ActionReport>, ApiError> {
    let options = stop_options(&body)?;
    authorize(&state, &caller, &name).await?;
    detached(async move {
        let _name = state.lock_name(&name).await;
        let _turn = state.turn().await?;
        let made = state
            .sandboxes()
            .restart(&name, options, READY_TIMEOUT)
            .await?;
        Ok(Json(ActionReport::done(
            "restart",
            &name,
            Some(made.info.state),
        )))
    })
    .await
}

/// What a stop (or a restart's stop) was asked for; an empty body is a
/// clean shutdown with the backend's default wait.
fn stop_options(body: &axum::body::Bytes) -> Result<StopOptions, ApiError> {
    let req: StopBody = json_or_default(body)?;
    Ok(StopOptions {
        force: req.force,
        timeout: req.timeout_secs.map(Duration::from_secs),
    })
}

/// The service's request for an exec body: argv checked, the timeout
/// defaulted and bounded by the limits.
pub fn exec_request(req: ExecBody, limits: &Limits) -> Result<ExecRequest, ApiError> {
    if req.argv.first().is_none_or(String::is_empty) {
        return Err(ProviderError::InvalidSpec {
            field: "argv",
            reason: "empty; expected the program and its arguments".into(),
        }
        .into());
    }
    let timeout = match req.timeout_secs {
        None => limits.exec_timeout,
        Some(0) => {
            return Err(ProviderError::InvalidSpec {
                field: "timeout_secs",
                reason: "0; give at least 1 second, or leave it out for the default".into(),
            }
            .into());
        }
        Some(secs) if Duration::from_secs(secs) > limits.exec_timeout_max => {
            return Err(ProviderError::InvalidSpec {
                field: "timeout_secs",
                reason: format!(
                    "{secs} is longer than corrald allows ({} s, --exec-timeout-max)",
                    limits.exec_timeout_max.as_secs()
                ),
            }
            .into());
        }
        Some(secs) => Duration::from_secs(secs),
    };
    let tty = match req.tty {
        None => None,
        Some(t) if (1..=1000).contains(&t.width) && (1..=1000).contains(&t.height) => {
            Some(TerminalSize {
                width: t.width,
                height: t.height,
            })
        }
        Some(t) => {
            return Err(ProviderError::InvalidSpec {
                field: "tty",
                reason: format!(
                    "{}x{}; expected a width and a height from 1 to 1000",
                    t.width, t.height
                ),
            }
            .into());
        }
    };
    Ok(ExecRequest {
        env: req.env,
        cwd: req.cwd,
        timeout: Some(timeout),
        tty,
        ..ExecRequest::new(req.argv)
    })
}

/// Run a command inside a sandbox and answer what it produced (each stream
/// cut at the output cap, with `truncated` set). Without a timeout it gets
/// the default one; when it runs out, the command and everything it started
/// are killed.
#[utoipa::path(
    post,
    path = "/v1/sandboxes/{name}/exec",
    tag = "sandboxes",
    operation_id = "execSandbox",
    params(("name" = String, Path, description = "The sandbox's name.")),
    request_body = ExecBody,
    responses(
        (status = 200, description = "The command finished (any exit code).", body = ExecAnswer),
        (status = 400, description = "`bad_request`, or `invalid_spec`: empty argv, a timeout out of bounds, or the program does not exist in the guest (\"command not found\").", body = ErrorBody),
        (status = 409, description = "`invalid_state`: not running.", body = ErrorBody),
        (status = 504, description = "`timeout`: the timeout passed; the command and everything it started were killed.", body = ErrorBody),
        (status = 403, description = "`not_owned`: the instance carries no corral stamp; `not_owner`: a restricted caller's request for a sandbox it did not create.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: too many provider operations in flight; retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`: the backend refused, answered nonsense, or could not be reached.", body = ErrorBody),
    )
)]
pub async fn exec(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    Body(body): Body,
) -> Result<Json<ExecAnswer>, ApiError> {
    let request = exec_request(json(&body)?, state.limits())?;
    authorize(&state, &caller, &name).await?;
    detached(async move {
        let _turn = state.turn().await?;
        Ok(Json(state.sandboxes().exec(&name, &request).await?.into()))
    })
    .await
}

/// Run the canary in a running profiled sandbox now: 200 with the report
/// when every check passed; 409 with the same body when one failed, in
/// which case the sandbox has been stopped (fail closed).
#[utoipa::path(
    post,
    path = "/v1/sandboxes/{name}/verify",
    tag = "sandboxes",
    operation_id = "verifySandbox",
    params(("name" = String, Path, description = "The sandbox's name.")),
    responses(
        (status = 200, description = "Every check passed.", body = crate::schema::ReportDoc),
        (status = 409, description = "A check failed: the same body; the sandbox has been stopped.", body = crate::schema::ReportDoc),
        (status = 403, description = "`not_owned`, or `not_owner`: a restricted caller's request for a sandbox it did not create.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: retry after `Retry-After` seconds.", body = ErrorBody),
    )
)]
pub async fn verify(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<(StatusCode, Json<corral_service::Report>), ApiError> {
    authorize(&state, &caller, &name).await?;
    let _name = state.lock_name(&name).await;
    let _turn = state.turn().await?;
    let report = state
        .verifier()
        .verify_named(state.sandboxes(), &name)
        .await?;
    let status = if report.passed {
        StatusCode::OK
    } else {
        StatusCode::CONFLICT
    };
    Ok((status, Json(report)))
}

/// Delete a sandbox and its snapshots; 200 with what was done (as
/// `corral rm --json`). Deletes of one sandbox run one
/// at a time, so all but the first of several answer 404.
#[utoipa::path(
    delete,
    path = "/v1/sandboxes/{name}",
    tag = "sandboxes",
    operation_id = "deleteSandbox",
    params(("name" = String, Path, description = "The sandbox's name.")),
    responses(
        (status = 200, description = "Deleted: `corral.sandbox-action.v1`, as `corral rm --json` (its `state` null).", body = crate::schema::ActionReportDoc),
        (status = 400, description = "`invalid_spec`: not a valid name.", body = ErrorBody),
        (status = 403, description = "`not_owned`: the instance carries no corral stamp; `not_owner`: a restricted caller's request for a sandbox it did not create.", body = ErrorBody),
        (status = 404, description = "`not_found`: no such sandbox.", body = ErrorBody),
        (status = 429, description = "`busy`: too many provider operations in flight; retry after `Retry-After` seconds.", body = ErrorBody),
        (status = 502, description = "`backend`, `malformed` or `io`: the backend refused, answered nonsense, or could not be reached; `member_unreachable`: the member it is located on gave no answer when asked to delete it (nothing was deleted).", body = ErrorBody),
    )
)]
pub async fn delete(
    State(state): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    authorize(&state, &caller, &name).await?;
    detached(async move {
        let _name = state.lock_name(&name).await;
        let _turn = state.turn().await?;
        // On another cluster member: deleted there, its port unbound there.
        if let Some(answer) = crate::admit::delete_elsewhere(&state, &name).await? {
            return Ok(answer);
        }
        Ok(delete_here(&state, &name).await?.into_response())
    })
    .await
}

/// A delete on this member (the name lock and turn held).
pub(crate) async fn delete_here(
    state: &AppState,
    name: &str,
) -> Result<Json<ActionReport>, ApiError> {
    state.sandboxes().delete(name).await?;
    Ok(Json(ActionReport::done("rm", name, None)))
}

#[cfg(test)]
#[path = "sandboxes_tests.rs"]
mod tests;
