//! Profiled work that placement puts on another cluster member is
//! admitted by that member's corrald (`POST /v1/cluster/admit/{sandbox}`
//! over the cluster's mutual TLS): the start gate reads back that
//! member's rules, the port binding and the DHCP reservation go into its
//! kernel and gateway, and the canary runs where the sandbox's host side
//! is. This corrald passes the member's answer on as it came (its
//! verdicts, or its refusal). No answer is a refusal that leaves nothing
//! unverified behind: an instance the member made is deleted, a start it
//! may have begun is undone by a stop. A delete goes there too: the
//! port binding is released in the kernel that holds it.

use axum::http::{StatusCode, header};
use axum::response::Response;
use corral_sandbox_core::sandbox::{Sandbox, SandboxInfo, SandboxState, StopOptions};
use corral_service::cluster::{Admit, RemoteAttester};
use corral_service::{Caller, NewSandbox, ServiceError};

use crate::error::ApiError;
use crate::state::AppState;

/// A create of `req` (whose body was `body`) for `caller` when placement
/// puts it on another member and this corrald has peers: that member's
/// answer. `None`: it goes here (or there are no peers, and the service
/// refuses it itself).
pub(crate) async fn create_elsewhere(
    state: &AppState,
    caller: &Caller,
    req: &NewSandbox,
    body: &[u8],
) -> Result<Option<Response>, ApiError> {
    let Some(peers) = state.peers() else {
        return Ok(None);
    };
    let service = state.sandboxes_for(caller)?;
    let Some(placed) = service.placement(req).await? else {
        return Ok(None);
    };
    if placed.member == placed.local {
        return Ok(None);
    }
    let mut request: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(anyhow::Error::new(e).context("the request body is not valid"))
    })?;
    // The member placement chose (checked again there, by its standings).
    request["target"] = serde_json::Value::from(placed.member.clone());
    let admit = Admit::Create {
        request,
        uid: caller.uid,
        gid: caller.gid,
        admin: caller.is_admin(),
    };
    let member = &placed.member;
    match ask(peers, member, &req.name, &admit, "create admitted").await {
        Ok(answer) => Ok(Some(answer)),
        Err(why) => {
            // It may have made the instance before it went silent; its
            // gate and canary are unknown, so nothing of it stays.
            let left = match service.open(&req.name).await {
                Ok(sandbox) => match sandbox.info().await {
                    Ok(info) if info.location.as_deref() == Some(member.as_str()) => {
                        match sandbox.delete().await {
                            Ok(()) => "the instance it had made was deleted".to_owned(),
                            Err(e) => format!(
                                "the instance it had made could NOT be deleted ({e}): delete it with `corral rm {}`",
                                req.name
                            ),
                        }
                    }
                    _ => "nothing was created".to_owned(),
                },
                Err(_) => "nothing was created".to_owned(),
            };
            tracing::warn!(sandbox = %req.name, %member, error = %why, "cluster: no admission from the member's corrald");
            let left = format!("{left} (or name another member as the target)");
            Err(unreachable(&req.name, member, &why, &left))
        }
    }
}

/// A profiled sandbox of this corrald's that is located on another
/// member, and the peers that reach that member's corrald.
struct Elsewhere<'a> {
    peers: &'a RemoteAttester,
    sandbox: Box<dyn Sandbox>,
    info: SandboxInfo,
    member: String,
}

impl Elsewhere<'_> {
    /// `admit` sent to the member (see [`ask`]).
    async fn ask(&self, name: &str, admit: &Admit, done: &str) -> Result<Response, String> {
        ask(self.peers, &self.member, name, admit, done).await
    }
}

/// `admit` of sandbox `name` sent to `member`'s corrald: its answer as it
/// gave it, or why none came. `done` names what the member did, for the log.
async fn ask(
    peers: &RemoteAttester,
    member: &str,
    name: &str,
    admit: &Admit,
    done: &str,
) -> Result<Response, String> {
    let (status, answer) = peers.admit(member, name, admit).await?;
    tracing::info!(sandbox = %name, %member, %status, "cluster: {done} by the member's corrald");
    Ok(passed_on(status, answer))
}

/// `name`, when this corrald has peers and the sandbox is profiled and
/// located on another member: what is needed to have that member's
/// corrald act on it. `None`: it is acted on here.
async fn elsewhere<'a>(state: &'a AppState, name: &str) -> Result<Option<Elsewhere<'a>>, ApiError> {
    let Some(peers) = state.peers() else {
        return Ok(None);
    };
    let service = state.sandboxes();
    let sandbox = service.open(name).await?;
    let info = sandbox.info().await.map_err(ServiceError::from)?;
    let Some(placed) = service.located_elsewhere(&info).await? else {
        return Ok(None);
    };
    Ok(Some(Elsewhere {
        peers,
        sandbox,
        info,
        member: placed.member,
    }))
}

/// A start of `name` when it is a profiled sandbox on another member and
/// this corrald has peers: that member's answer. `None`: it starts here.
pub(crate) async fn start_elsewhere(
    state: &AppState,
    name: &str,
) -> Result<Option<Response>, ApiError> {
    let Some(there) = elsewhere(state, name).await? else {
        return Ok(None);
    };
    match there.ask(name, &Admit::Start {}, "start admitted").await {
        Ok(answer) => Ok(Some(answer)),
        Err(why) => {
            let member = &there.member;
            tracing::warn!(sandbox = %name, %member, error = %why, "cluster: no admission from the member's corrald");
            // Started there and then silent: its canary is unknown.
            let left = if there.info.state == SandboxState::Running {
                "it keeps running as it was".to_owned()
            } else {
                match there
                    .sandbox
                    .stop(StopOptions {
                        force: true,
                        timeout: None,
                    })
                    .await
                {
                    Ok(()) => "it is stopped".to_owned(),
                    Err(e) => format!("it could NOT be stopped ({e})"),
                }
            };
            Err(unreachable(name, member, &why, &left))
        }
    }
}

/// A delete of `name` when it is a profiled sandbox on another member and
/// this corrald has peers: that member's answer (its port is unbound in
/// that member's kernel and gateway). `None`: it is deleted here. No
/// answer deletes nothing.
pub(crate) async fn delete_elsewhere(
    state: &AppState,
    name: &str,
) -> Result<Option<Response>, ApiError> {
    let Some(there) = elsewhere(state, name).await? else {
        return Ok(None);
    };
    match there.ask(name, &Admit::Delete {}, "delete done").await {
        Ok(answer) => Ok(Some(answer)),
        Err(why) => Err(unreachable(
            name,
            &there.member,
            &why,
            "nothing was deleted (its binding is there)",
        )),
    }
}

/// The member's answer, status and body as it gave them.
fn passed_on(status: StatusCode, answer: axum::body::Bytes) -> Response {
    let mut out = Response::new(axum::body::Body::from(answer));
    *out.status_mut() = status;
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    out
}

fn unreachable(name: &str, member: &str, why: &str, left: &str) -> ApiError {
    ApiError::new(
        StatusCode::BAD_GATEWAY,
        "member_unreachable",
        anyhow::anyhow!(
            "sandbox `{name}` is placed on cluster member {member}, whose corrald must do this there (its start gate, port binding, DHCP reservation and canary are on that member's kernel), and it gave no answer ({why}); {left}. Retry once {member}'s corrald answers"
        ),
    )
}
