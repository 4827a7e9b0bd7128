//! `/v1/sandboxes…`: create, list, inspect, start, stop, exec and delete
//! sandboxes through the provider selected at start-up. Every refusal is
//! the provider's `ProviderError`, mapped to a status in `error.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use corral_sandbox_core::SandboxName;
use corral_sandbox_core::config::Config;
use corral_sandbox_core::sandbox::{
    ExecOutput, ExecRequest, NetworkAttachment, ProviderError, Resources, Sandbox, SandboxInfo,
    SandboxSpec, StopOptions,
};
use serde::{Deserialize, Serialize};

use super::{json, json_or_default};
use crate::encode::base64;
use crate::error::ApiError;
use crate::state::AppState;

/// `POST /v1/sandboxes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateRequest {
    /// The sandbox's name.
    pub name: String,
    /// The image (an alias or fingerprint the backend knows).
    pub image: String,
    /// The network profile; none means no network at all.
    #[serde(default)]
    pub profile: Option<String>,
    /// Resource limits.
    #[serde(default)]
    pub resources: Resources,
}

/// `POST /v1/sandboxes/{name}/stop` (the body may be empty).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StopBody {
    /// Kill instead of a clean shutdown.
    #[serde(default)]
    pub force: bool,
    /// Wait at most this many seconds for a clean shutdown.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// `POST /v1/sandboxes/{name}/exec`.
#[derive(Debug, Clone, Deserialize)]
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
    /// Give up after this many seconds (504 `timeout`).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// What a finished command produced: text for reading, base64 for bytes.
#[derive(Debug, Clone, Serialize)]
pub struct ExecAnswer {
    /// Exit status (a signal-killed command reports 128 + signal).
    pub exit_code: i32,
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
            stdout: out.stdout_text(),
            stderr: out.stderr_text(),
            stdout_base64: base64(&out.stdout),
            stderr_base64: base64(&out.stderr),
        }
    }
}

fn name(raw: String) -> Result<SandboxName, ProviderError> {
    SandboxName::new(raw).map_err(|e| ProviderError::InvalidSpec {
        field: "name",
        reason: e.to_string(),
    })
}

/// The spec a create request asks for under `config`: the name checked, the
/// profile looked up and turned into the sandbox's one network attachment.
pub fn spec_for(config: &Config, req: CreateRequest) -> Result<SandboxSpec, ProviderError> {
    let name = name(req.name)?;
    if req.image.trim().is_empty() {
        return Err(ProviderError::InvalidSpec {
            field: "image",
            reason: "empty; expected an image alias or fingerprint the backend knows".into(),
        });
    }
    let network = match req.profile {
        None => None,
        Some(p) => {
            let profile = config
                .profiles
                .get(&p)
                .ok_or_else(|| ProviderError::UnknownProfile {
                    profile: p.clone(),
                    configured: config.profiles.names(),
                })?;
            // The allowlist is enforced in the host kernel, not by the
            // provider, so no resolved addresses travel with the attachment.
            Some(NetworkAttachment::for_profile(profile, Vec::new()))
        }
    };
    Ok(SandboxSpec {
        network,
        resources: req.resources,
        ..SandboxSpec::new(name, req.image)
    })
}

async fn open(state: &AppState, raw: String) -> Result<Box<dyn Sandbox>, ApiError> {
    let name = name(raw)?;
    Ok(state.backend().provider().await?.open(&name).await?)
}

/// Every sandbox corral owns on the backend.
pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<SandboxInfo>>, ApiError> {
    Ok(Json(state.backend().provider().await?.list().await?))
}

/// Create (but do not start) a sandbox; 201 with its information.
pub async fn create(
    State(state): State<AppState>,
    body: Bytes,
) -> Result<(StatusCode, Json<SandboxInfo>), ApiError> {
    let spec = spec_for(&state.settings().config, json(&body)?)?;
    let sandbox = state.backend().provider().await?.create(&spec).await?;
    Ok((StatusCode::CREATED, Json(sandbox.info().await?)))
}

/// One sandbox's information.
pub async fn get(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<SandboxInfo>, ApiError> {
    Ok(Json(open(&state, name).await?.info().await?))
}

/// Start a sandbox; answers its information afterwards.
pub async fn start(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<SandboxInfo>, ApiError> {
    let sandbox = open(&state, name).await?;
    sandbox.start().await?;
    Ok(Json(sandbox.info().await?))
}

/// Stop a sandbox; answers its information afterwards.
pub async fn stop(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<SandboxInfo>, ApiError> {
    let req: StopBody = json_or_default(&body)?;
    let sandbox = open(&state, name).await?;
    sandbox
        .stop(StopOptions {
            force: req.force,
            timeout: req.timeout_secs.map(Duration::from_secs),
        })
        .await?;
    Ok(Json(sandbox.info().await?))
}

/// Run a command inside a sandbox and answer what it produced.
pub async fn exec(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: Bytes,
) -> Result<Json<ExecAnswer>, ApiError> {
    let req: ExecBody = json(&body)?;
    if req.argv.first().is_none_or(String::is_empty) {
        return Err(ProviderError::InvalidSpec {
            field: "argv",
            reason: "empty; expected the program and its arguments".into(),
        }
        .into());
    }
    let sandbox = open(&state, name).await?;
    let request = ExecRequest {
        env: req.env,
        cwd: req.cwd,
        timeout: req.timeout_secs.map(Duration::from_secs),
        ..ExecRequest::new(req.argv)
    };
    Ok(Json(sandbox.exec(&request).await?.into()))
}

/// Delete a sandbox and its snapshots; 204.
pub async fn delete(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    open(&state, name).await?.delete().await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(name: &str, profile: Option<&str>) -> CreateRequest {
        CreateRequest {
            name: name.into(),
            image: "corral-test".into(),
            profile: profile.map(Into::into),
            resources: Resources::default(),
        }
    }

    #[test]
    fn profile_becomes_the_attachment_of_that_profile() {
        let config = Config::builtin_default();
        let spec = spec_for(&config, req("a1", Some("allowlist"))).unwrap();
        let profile = config.profiles.get("allowlist").unwrap();
        let net = spec.network.unwrap();
        assert_eq!(net.bridge, profile.bridge);
        assert_eq!(net.subnet_v4, profile.subnet_v4);
        assert_eq!(net.gateway_v4, profile.gateway_v4());
        assert!(
            spec_for(&config, req("a1", None))
                .unwrap()
                .network
                .is_none()
        );
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let config = Config::builtin_default();
        let e = spec_for(&config, req("a1", Some("nope"))).unwrap_err();
        assert!(
            matches!(&e, ProviderError::UnknownProfile { configured, .. } if configured.len() == 3)
        );
        assert!(
            e.to_string().contains("isolated, internet, allowlist"),
            "{e}"
        );
        let e = spec_for(&config, req("bad name!", None)).unwrap_err();
        assert!(matches!(
            e,
            ProviderError::InvalidSpec { field: "name", .. }
        ));
        let mut r = req("a1", None);
        r.image = " ".into();
        assert!(matches!(
            spec_for(&config, r).unwrap_err(),
            ProviderError::InvalidSpec { field: "image", .. }
        ));
    }

    #[test]
    fn exec_answer_keeps_bytes_exact() {
        let a = ExecAnswer::from(ExecOutput {
            exit_code: 3,
            stdout: b"hi\xff".to_vec(),
            stderr: Vec::new(),
            truncated: false,
        });
        assert_eq!(a.stdout, "hi\u{fffd}");
        assert_eq!(a.stdout_base64, "aGn/");
        assert_eq!(a.stderr_base64, "");
    }
}
