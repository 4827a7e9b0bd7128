//! One small file per resource; each handler only translates a request into
//! a library call and its answer into JSON. The route table below is the
//! one source of the router and of the list `docs/openapi.json` is checked
//! against.

pub(crate) mod audit;
pub(crate) mod backup;
pub(crate) mod cluster;
pub(crate) mod events;
pub(crate) mod exec_stream;
pub(crate) mod explain;
pub(crate) mod files;
pub(crate) mod health;
pub(crate) mod host;
pub(crate) mod matrix;
pub(crate) mod metrics;
pub(crate) mod profiles;
pub(crate) mod rename;
pub(crate) mod sandboxes;
pub(crate) mod snapshots;
pub(crate) mod templates;
mod transfer;
pub(crate) mod verification;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, Request};
use axum::handler::Handler;
use axum::http::{Method, StatusCode, Uri};
use axum::routing::{MethodFilter, MethodRouter, on};
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::guard;
use crate::state::AppState;

pub use backup::WARNING_HEADER;
pub use exec_stream::{Ending, STDERR, STDOUT};
pub use rename::RenameBody;
pub use sandboxes::{CreateRequest, ExecAnswer, ExecBody, StopBody, TtyBody, new_sandbox};
pub use snapshots::{RestoreBody, SnapshotBody};

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Admins and restricted callers (sandbox routes check ownership).
    Callers,
    /// Admins only.
    Admin,
}

/// One route: its method, its path (in OpenAPI's `{param}` syntax, which is
/// also axum's), who may call it, and its handler.
#[derive(Debug)]
pub struct Route {
    /// The HTTP method.
    pub method: Method,
    /// The path.
    pub path: &'static str,
    /// Who may call it.
    pub access: Access,
    handler: MethodRouter<AppState>,
}

fn route<H, T>(method: Method, path: &'static str, access: Access, handler: H) -> Route
where
    H: Handler<T, AppState>,
    T: 'static,
{
    // Every method used below (GET, POST, PUT, DELETE) has a filter; the
    // fallback only guards a future typo in this table.
    let filter = MethodFilter::try_from(method.clone()).unwrap_or(MethodFilter::GET);
    let handler = on(filter, handler);
    let handler = match access {
        Access::Callers => handler,
        Access::Admin => handler.route_layer(axum::middleware::from_fn(guard::admin_only)),
    };
    Route {
        method,
        path,
        access,
        handler,
    }
}

/// Every route of the API.
pub fn routes() -> Vec<Route> {
    use Access::{Admin, Callers};
    vec![
        route(Method::GET, "/v1/health", Callers, health::get),
        route(Method::GET, "/v1/matrix", Callers, matrix::get),
        route(Method::GET, "/v1/profiles", Callers, profiles::get),
        route(Method::GET, "/v1/cluster", Admin, cluster::get),
        route(Method::GET, "/v1/host/plan", Admin, host::plan),
        route(Method::GET, "/v1/host/status", Admin, host::status),
        route(Method::GET, "/v1/host/verify", Admin, host::verify),
        route(Method::GET, "/v1/explain", Callers, explain::get),
        route(Method::GET, "/v1/verification", Admin, verification::get),
        route(Method::GET, "/v1/events", Admin, events::get),
        route(Method::GET, "/metrics", Admin, metrics::get),
        route(Method::GET, "/v1/events/stream", Admin, audit::stream),
        route(Method::GET, "/v1/audit", Admin, audit::list),
        route(Method::GET, "/v1/sandboxes", Callers, sandboxes::list),
        route(Method::POST, "/v1/sandboxes", Callers, sandboxes::create),
        route(Method::GET, "/v1/sandboxes/{name}", Callers, sandboxes::get),
        route(
            Method::DELETE,
            "/v1/sandboxes/{name}",
            Callers,
            sandboxes::delete,
        ),
        route(
            Method::POST,
            "/v1/sandboxes/{name}/start",
            Callers,
            sandboxes::start,
        ),
        route(
            Method::POST,
            "/v1/sandboxes/{name}/stop",
            Callers,
            sandboxes::stop,
        ),
        route(
            Method::POST,
            "/v1/sandboxes/{name}/restart",
            Callers,
            sandboxes::restart,
        ),
        route(
            Method::POST,
            "/v1/sandboxes/{name}/exec",
            Callers,
            sandboxes::exec,
        ),
        route(
            Method::POST,
            "/v1/sandboxes/{name}/verify",
            Callers,
            sandboxes::verify,
        ),
        route(
            Method::GET,
            "/v1/sandboxes/{name}/exec/stream",
            Callers,
            exec_stream::stream,
        ),
        route(Method::GET, "/v1/templates", Callers, templates::get),
        route(
            Method::GET,
            "/v1/sandboxes/{name}/snapshots",
            Callers,
            snapshots::list,
        ),
        route(
            Method::POST,
            "/v1/sandboxes/{name}/snapshots",
            Callers,
            snapshots::take,
        ),
        route(
            Method::POST,
            "/v1/sandboxes/{name}/restore",
            Callers,
            snapshots::restore,
        ),
        route(
            Method::POST,
            "/v1/sandboxes/{name}/rename",
            Callers,
            rename::rename,
        ),
        route(
            Method::GET,
            "/v1/sandboxes/{name}/backup",
            Callers,
            backup::export,
        ),
        route(
            Method::PUT,
            "/v1/sandboxes/{name}/backup",
            Callers,
            backup::import,
        ),
        route(
            Method::GET,
            "/v1/sandboxes/{name}/files",
            Callers,
            files::pull,
        ),
        route(
            Method::PUT,
            "/v1/sandboxes/{name}/files",
            Callers,
            files::push,
        ),
    ]
}

/// The routes whose body is bytes (`application/octet-stream`, up to the
/// upload cap) rather than JSON.
pub const RAW_BODY: &[(Method, &str)] = &[
    (Method::PUT, "/v1/sandboxes/{name}/backup"),
    (Method::PUT, "/v1/sandboxes/{name}/files"),
];

/// Does `path` match the route pattern `pattern` (`{…}` is one segment)?
fn matches(pattern: &str, path: &str) -> bool {
    let (mut p, mut q) = (pattern.split('/'), path.split('/'));
    loop {
        match (p.next(), q.next()) {
            (None, None) => return true,
            (Some(a), Some(b)) if a.starts_with('{') || a == b => {
                if a.starts_with('{') && b.is_empty() {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// True when `method path` is a route that takes bytes ([`RAW_BODY`]).
pub fn takes_raw_body(method: &Method, path: &str) -> bool {
    RAW_BODY
        .iter()
        .any(|(m, pattern)| m == method && matches(pattern, path))
}

/// The router serving [`routes`], with the error shape on unknown paths
/// and methods and on bodies over the limit too. The guard
/// ([`crate::guard::check`]) is layered on by [`crate::serve`], which knows
/// the listener.
pub fn router(state: AppState) -> Router {
    let max_body = state.limits().max_body;
    routes()
        .into_iter()
        // Routes sharing a path merge into one method router.
        .fold(Router::new(), |r, x| r.route(x.path, x.handler))
        // Applies to the routes added above, so it comes after them.
        .method_not_allowed_fallback(wrong_method)
        .fallback(no_route)
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(state)
}

/// A request body, read whole up to the body limit; over it, 413 in the
/// JSON error shape (axum's own rejection is plain text).
#[derive(Debug)]
pub struct Body(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        Bytes::from_request(req, state)
            .await
            .map(Body)
            .map_err(|r| {
                if r.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "body_too_large",
                        anyhow::anyhow!(
                            "the request body is larger than corrald takes (--max-body)"
                        ),
                    )
                } else {
                    ApiError::bad_request(anyhow::anyhow!(
                        "the request body could not be read: {}",
                        r.body_text()
                    ))
                }
            })
    }
}

async fn wrong_method(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        anyhow::anyhow!("{uri} does not take {method}; the Allow header lists what it takes"),
    )
}

async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "no_route",
        anyhow::anyhow!("no route {method} {uri}; see docs/api.md for the routes corrald serves"),
    )
}

/// Parse a JSON request body.
fn json<T: DeserializeOwned>(body: &Bytes) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(anyhow::Error::new(e).context("the request body is not valid"))
    })
}

/// Parse an optional JSON request body: empty means the defaults.
fn json_or_default<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        Ok(T::default())
    } else {
        json(body)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn table_has_no_duplicates_and_every_path_is_versioned() {
        let all = routes();
        let set: BTreeSet<_> = all.iter().map(|r| (r.method.as_str(), r.path)).collect();
        assert_eq!(set.len(), all.len());
        // `/metrics` is where Prometheus looks by convention; every other
        // path carries the API's version.
        assert!(
            all.iter()
                .all(|r| r.path.starts_with("/v1/") || r.path == "/metrics"),
            "{:?}",
            all.iter().map(|r| r.path).collect::<Vec<_>>()
        );
    }

    #[test]
    fn byte_routes_are_routes_and_only_they_take_bytes() {
        let all = routes();
        for (m, p) in RAW_BODY {
            assert!(
                all.iter().any(|r| r.method == *m && r.path == *p),
                "{m} {p} is not a route"
            );
        }
        assert!(takes_raw_body(&Method::PUT, "/v1/sandboxes/a1/backup"));
        assert!(takes_raw_body(&Method::PUT, "/v1/sandboxes/a1/files"));
        assert!(!takes_raw_body(&Method::GET, "/v1/sandboxes/a1/files"));
        assert!(!takes_raw_body(&Method::PUT, "/v1/sandboxes//files"));
        assert!(!takes_raw_body(&Method::PUT, "/v1/sandboxes/a1/files/x"));
        assert!(!takes_raw_body(&Method::POST, "/v1/sandboxes"));
    }

    #[test]
    fn empty_body_is_default_and_bad_json_is_400() {
        let d: StopBody = json_or_default(&Bytes::from_static(b" \n")).unwrap();
        assert!(!d.force);
        let e = json::<StopBody>(&Bytes::from_static(b"{")).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(
            e.body()
                .error
                .message
                .starts_with("the request body is not valid: "),
            "{}",
            e.body().error.message
        );
    }
}
