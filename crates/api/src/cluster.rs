//! corrald's cluster listener (`corrald --cluster cluster.toml`): where
//! other members ask this one for its attestation, over mutually
//! authenticated TLS. It presents this member's certificate, requires a
//! client certificate that chains to the cluster CA and names one of the
//! peers (or this member, for a self-check), and serves only `GET
//! /v1/cluster/attestation`, taken fresh per request in corrald's own
//! namespace against what it applied, and `POST
//! /v1/cluster/verify/{sandbox}`: the canary of a sandbox located on this
//! member, run here (where its host side is), a failing one stopped, the
//! verdict answered, and `POST /v1/cluster/admit/{sandbox}`: a create,
//! start or delete of profiled work placed on this member that a peer's
//! corrald was asked for, run here exactly as a local one (the start gate on this
//! member's rules, the port binding and DHCP reservation in its kernel,
//! the canary where the sandbox's host side is), its answer returned.
//! Everything else is 404; no token.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use corral_service::callers::Tier;
use corral_service::cluster::Admit;
use corral_service::cluster::remote::{ADMIT_ROUTE, ATTESTATION_PATH, VERIFY_ROUTE};
use corral_service::cluster::settings::{self, ClusterSettingsError};
use corral_service::cluster::tls::{Identity, TlsError};
use corral_service::cluster::{AttestationDoc, ClusterSettings};
use corral_service::cluster::{Reverified, reverify};
use corral_service::{Caller, CreateOptions};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::error::ApiError;
use crate::routes::sandboxes::{
    CreateRequest, create_here, delete_here, detached, new_sandbox, start_here,
};
use crate::setup_error::{IoContext as _, SetupError};
use crate::state::AppState;

/// A client gets this long to finish its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// A connection lives at most this long (an attestation takes well under a
/// second; a client that holds one open gains nothing).
const CONNECTION: Duration = Duration::from_secs(30);

/// Connections served at once; more wait in the kernel's backlog.
const CONNECTIONS: usize = 64;

/// Why the cluster listener cannot start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterSetupError {
    /// cluster.toml is unreadable or invalid (file, line and field named).
    #[error(transparent)]
    Settings(#[from] ClusterSettingsError),
    /// The CA, certificate or key are unusable or the key is exposed.
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// The cluster settings and this member's TLS server configuration, loaded
/// and checked before corrald serves anything.
#[derive(Debug, Clone)]
pub struct ClusterListener {
    settings: Arc<ClusterSettings>,
    tls: Arc<rustls::ServerConfig>,
}

impl ClusterListener {
    /// Read `path` (cluster.toml) and the material it names.
    pub fn load(path: &Path) -> Result<Self, ClusterSetupError> {
        let settings = settings::load(path)?;
        let identity = Identity::load(&settings)?;
        let mut allowed: Vec<String> = settings.peers.iter().map(|p| p.name.clone()).collect();
        allowed.push(settings.member.clone());
        let tls = identity.server_config(&allowed)?;
        Ok(Self {
            settings: Arc::new(settings),
            tls,
        })
    }

    /// The settings (the rotation's controller runs on the same ones).
    pub fn settings(&self) -> &Arc<ClusterSettings> {
        &self.settings
    }

    /// Bind `settings.listen` and serve attestations of `state`'s host in
    /// the background (on the current runtime) until the runtime stops.
    /// The bound address.
    pub async fn start(self, state: AppState) -> Result<SocketAddr, SetupError> {
        let listen = self.settings.listen;
        let listener = TcpListener::bind(listen)
            .await
            .ctx(|| format!("cannot listen for cluster members on {listen}"))?;
        let addr = listener
            .local_addr()
            .ctx(|| "cannot read the cluster listener's address".to_owned())?;
        let router = router(Served {
            member: self.settings.member.clone(),
            state,
        });
        tokio::spawn(accept(listener, TlsAcceptor::from(self.tls), router));
        tracing::info!(%addr, member = %self.settings.member, "cluster: serving attestations to peers over mutual TLS");
        Ok(addr)
    }
}

#[derive(Clone)]
struct Served {
    member: String,
    state: AppState,
}

fn router(served: Served) -> Router {
    Router::new()
        .route(
            ATTESTATION_PATH,
            get(attestation).fallback(|| async { StatusCode::NOT_FOUND }),
        )
        .route(
            VERIFY_ROUTE,
            post(verify).fallback(|| async { StatusCode::NOT_FOUND }),
        )
        .route(
            ADMIT_ROUTE,
            post(admit).fallback(|| async { StatusCode::NOT_FOUND }),
        )
        .fallback(|| async { StatusCode::NOT_FOUND })
        .with_state(Arc::new(served))
}

async fn accept(listener: TcpListener, tls: TlsAcceptor, router: Router) {
    let slots = Arc::new(tokio::sync::Semaphore::new(CONNECTIONS));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let (tcp, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cluster: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let tls = tls.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let stream = match tokio::time::timeout(HANDSHAKE, tls.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::warn!(%peer, error = %e, "cluster: refused a client at the TLS handshake");
                    return;
                }
                Err(_) => {
                    tracing::warn!(%peer, "cluster: no TLS handshake within {HANDSHAKE:?}");
                    return;
                }
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(router));
            match tokio::time::timeout(CONNECTION, conn).await {
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "cluster: connection ended"),
                Ok(Ok(())) => {}
                Err(_) => tracing::debug!(%peer, "cluster: connection closed after {CONNECTION:?}"),
            }
        });
    }
}

/// `GET /v1/cluster/attestation`: this member's read-back now, against
/// what it applied (else its configuration), with the hash of that
/// configuration.
async fn attestation(State(served): State<Arc<Served>>) -> Response {
    let taken = tokio::task::spawn_blocking(move || {
        let host = served.state.host().map_err(|e| e.to_string())?;
        // A port bound between reading the plan and reading the kernel
        // back would read as drift and drain this member: both happen
        // under the host lock every bind, apply and heal holds.
        let _lock = host.store().lock().map_err(|e| e.to_string())?;
        let planned = served.state.plan_to_check().map_err(|e| e.to_string())?;
        AttestationDoc::take(&served.member, &planned, &host)
    })
    .await;
    match taken {
        Ok(Ok(doc)) => Json(doc).into_response(),
        Ok(Err(e)) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "attestation_failed", e)
            .into_response(),
        Err(e) => ApiError::internal(e).into_response(),
    }
}

/// `POST /v1/cluster/verify/{sandbox}`: the canary of `sandbox`, which must
/// be located on this member, run through this corrald's verifier (kept
/// running when it passes, stopped when it fails or cannot run, as a
/// drain's re-verification does); the verdict.
async fn verify(State(served): State<Arc<Served>>, UrlPath(name): UrlPath<String>) -> Response {
    let service = served.state.sandboxes();
    let sandbox = match service.open(&name).await {
        Ok(s) => s,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let info = match sandbox.info().await {
        Ok(i) => i,
        Err(e) => return ApiError::from(corral_service::ServiceError::from(e)).into_response(),
    };
    if info.location.as_deref() != Some(served.member.as_str()) {
        return ApiError::new(
            StatusCode::CONFLICT,
            "invalid_state",
            anyhow::anyhow!(
                "sandbox `{name}` is located on {}, not on {}: ask that member's corrald",
                info.location.as_deref().unwrap_or("no member"),
                served.member
            ),
        )
        .into_response();
    }
    let verdict = reverify(
        served.state.verifier(),
        &served.member,
        &name,
        sandbox.as_ref(),
    )
    .await
    .unwrap_or_else(|| Reverified {
        sandbox: name.clone(),
        member: served.member.clone(),
        passed: false,
        action: "not running".to_owned(),
        detail: format!("sandbox `{name}` is not running: nothing to verify"),
    });
    tracing::info!(sandbox = %name, passed = verdict.passed, action = %verdict.action, "cluster: verified a sandbox for a peer");
    Json(verdict).into_response()
}

/// `POST /v1/cluster/admit/{sandbox}`: a peer's corrald was asked to
/// create or start `sandbox`, profiled work placed on this member; done
/// here as this member's own API does it (the name lock and a turn held),
/// answered as that route answers.
async fn admit(
    State(served): State<Arc<Served>>,
    UrlPath(name): UrlPath<String>,
    body: axum::body::Bytes,
) -> Response {
    let admit: Admit = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            return ApiError::bad_request(anyhow::anyhow!("bad admission JSON: {e}"))
                .into_response();
        }
    };
    let state = served.state.clone();
    let done = match admit {
        Admit::Create {
            request,
            uid,
            gid,
            admin,
        } => {
            let req: CreateRequest = match serde_json::from_value(request) {
                Ok(r) => r,
                Err(e) => {
                    return ApiError::bad_request(anyhow::anyhow!("bad create request: {e}"))
                        .into_response();
                }
            };
            if req.name != name || req.from.is_some() {
                return ApiError::bad_request(anyhow::anyhow!(
                    "an admission creates the sandbox its path names (`{name}`), not a clone"
                ))
                .into_response();
            }
            if req.target.as_deref() != Some(served.member.as_str()) {
                return ApiError::new(
                    StatusCode::CONFLICT,
                    "on_another_member",
                    anyhow::anyhow!(
                        "sandbox `{name}` is asked for on {}, and this is {}: ask that member's corrald",
                        req.target.as_deref().unwrap_or("no member"),
                        served.member
                    ),
                )
                .into_response();
            }
            let caller = Caller {
                uid,
                gid,
                tier: if admin { Tier::Admin } else { Tier::Restricted },
            };
            let options = CreateOptions {
                start: false,
                owner: Some(uid),
                ..CreateOptions::default()
            };
            let req = new_sandbox(req);
            tracing::info!(sandbox = %name, "cluster: admitting a create for a peer");
            detached(async move {
                let _name = state.lock_name(&req.name).await;
                let _turn = state.turn().await?;
                Ok(create_here(&state, &caller, &req, options)
                    .await?
                    .into_response())
            })
            .await
        }
        Admit::Delete {} => {
            tracing::info!(sandbox = %name, "cluster: deleting a sandbox for a peer");
            detached(async move {
                let _name = state.lock_name(&name).await;
                let _turn = state.turn().await?;
                Ok(delete_here(&state, &name).await?.into_response())
            })
            .await
        }
        Admit::Start {} => {
            tracing::info!(sandbox = %name, "cluster: admitting a start for a peer");
            detached(async move {
                let _name = state.lock_name(&name).await;
                let _turn = state.turn().await?;
                Ok(start_here(&state, &name).await?.into_response())
            })
            .await
        }
    };
    done.unwrap_or_else(IntoResponse::into_response)
}
