//! One small file per resource; each handler only translates a request into
//! a library call and its answer into JSON. The route table below is the
//! one source of the router and of the list `docs/openapi.json` is checked
//! against.

mod events;
mod health;
mod host;
mod matrix;
mod profiles;
mod sandboxes;
mod verification;

use axum::Router;
use axum::body::Bytes;
use axum::handler::Handler;
use axum::http::{Method, StatusCode, Uri};
use axum::routing::{MethodFilter, MethodRouter, on};
use serde::de::DeserializeOwned;

use crate::error::ApiError;
use crate::state::AppState;

pub use sandboxes::{CreateRequest, ExecAnswer, ExecBody, StopBody, new_sandbox};

/// One route: its method, its path (in OpenAPI's `{param}` syntax, which is
/// also axum's) and its handler.
#[derive(Debug)]
pub struct Route {
    /// The HTTP method.
    pub method: Method,
    /// The path.
    pub path: &'static str,
    handler: MethodRouter<AppState>,
}

fn route<H, T>(method: Method, path: &'static str, handler: H) -> Route
where
    H: Handler<T, AppState>,
    T: 'static,
{
    // Every method used below (GET, POST, DELETE) has a filter; the
    // fallback only guards a future typo in this table.
    let filter = MethodFilter::try_from(method.clone()).unwrap_or(MethodFilter::GET);
    Route {
        method,
        path,
        handler: on(filter, handler),
    }
}

/// Every route of the API.
pub fn routes() -> Vec<Route> {
    vec![
        route(Method::GET, "/v1/health", health::get),
        route(Method::GET, "/v1/matrix", matrix::get),
        route(Method::GET, "/v1/profiles", profiles::get),
        route(Method::GET, "/v1/host/plan", host::plan),
        route(Method::GET, "/v1/host/status", host::status),
        route(Method::GET, "/v1/host/verify", host::verify),
        route(Method::GET, "/v1/verification", verification::get),
        route(Method::GET, "/v1/events", events::get),
        route(Method::GET, "/v1/sandboxes", sandboxes::list),
        route(Method::POST, "/v1/sandboxes", sandboxes::create),
        route(Method::GET, "/v1/sandboxes/{name}", sandboxes::get),
        route(Method::DELETE, "/v1/sandboxes/{name}", sandboxes::delete),
        route(Method::POST, "/v1/sandboxes/{name}/start", sandboxes::start),
        route(Method::POST, "/v1/sandboxes/{name}/stop", sandboxes::stop),
        route(Method::POST, "/v1/sandboxes/{name}/exec", sandboxes::exec),
        route(
            Method::POST,
            "/v1/sandboxes/{name}/verify",
            sandboxes::verify,
        ),
    ]
}

/// The router serving [`routes`], with the error shape on unknown paths
/// and methods too.
pub fn router(state: AppState) -> Router {
    routes()
        .into_iter()
        // Routes sharing a path merge into one method router.
        .fold(Router::new(), |r, x| r.route(x.path, x.handler))
        // Applies to the routes added above, so it comes after them.
        .method_not_allowed_fallback(wrong_method)
        .fallback(no_route)
        .with_state(state)
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
        assert!(all.iter().all(|r| r.path.starts_with("/v1/")));
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
