//! What every request passes before a handler sees it.
//!
//! - **Who is calling.** On the unix socket, the kernel's peer credentials
//!   (`SO_PEERCRED`) sorted into tiers by [`AccessPolicy`]; callers of tier
//!   `none` are refused (403). On TCP, a bearer token compared in constant
//!   time (401 without it); its holder is an admin.
//! - **Where the request was meant to go (TCP).** `Host` must name the
//!   listen address and an `Origin`, when a browser sends one, must be that
//!   address too (403 otherwise): a web page cannot reach corrald through
//!   DNS rebinding or a cross-site form.
//! - **What it carries.** A body must be `application/json` (415) and no
//!   bigger than the configured cap (413), in the JSON error shape. The
//!   routes that take bytes (a backup to import, a file to push;
//!   [`crate::routes::takes_raw_body`]) take `application/octet-stream`
//!   instead, up to the upload cap — a type a browser cannot send across
//!   sites without asking first, like JSON.
//!
//! The identified [`Caller`] travels to the handlers as a request extension;
//! routes for admins only check its tier ([`admin_only`]).

use std::fmt;
use std::net::SocketAddr;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::sync::Arc;

use crate::setup_error::{IoContext as _, SetupError};
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use axum::serve::IncomingStream;
use corral_service::{AccessPolicy, Caller, Tier};
use subtle::ConstantTimeEq as _;
use tokio::net::{TcpListener, UnixListener};

use crate::error::ApiError;

/// The fewest bytes a token may have.
pub const MIN_TOKEN_BYTES: usize = 16;

/// A bearer token (never printed).
#[derive(Clone)]
pub struct Token(Arc<Vec<u8>>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// Read the token from `path`: one line, at least [`MIN_TOKEN_BYTES`]
    /// bytes, in a regular file that only its owner can read, owned by the
    /// user corrald runs as (or root).
    pub fn read(path: &Path) -> Result<Self, SetupError> {
        let meta = std::fs::symlink_metadata(path)
            .ctx(|| format!("cannot read the token file {}", path.display()))?;
        if !meta.file_type().is_file() {
            return Err(SetupError::Refused(format!(
                "the token file {} is not a regular file (symlinks are refused)",
                path.display()
            )));
        }
        let me = nix::unistd::geteuid().as_raw();
        if meta.uid() != me && meta.uid() != 0 {
            return Err(SetupError::Refused(format!(
                "the token file {} is owned by uid {}, not by corrald's user (uid {me}) or root",
                path.display(),
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(SetupError::Refused(format!(
                "the token file {} is readable by others (mode {:o}); chmod 600 it",
                path.display(),
                meta.mode() & 0o7777
            )));
        }
        let text = std::fs::read_to_string(path)
            .ctx(|| format!("cannot read the token file {}", path.display()))?;
        let token = text.trim();
        if token.len() < MIN_TOKEN_BYTES || token.contains(char::is_whitespace) {
            return Err(SetupError::Refused(format!(
                "the token in {} must be one word of at least {MIN_TOKEN_BYTES} characters (e.g. `openssl rand -hex 32`)",
                path.display()
            )));
        }
        Ok(Self(Arc::new(token.as_bytes().to_vec())))
    }

    /// A token from its bytes (tests, embedders).
    pub fn from_bytes(bytes: &[u8]) -> Self {
        Self(Arc::new(bytes.to_vec()))
    }

    /// True when `offered` is this token; the comparison takes the same
    /// time wherever the first difference is.
    pub fn matches(&self, offered: &[u8]) -> bool {
        bool::from(self.0.as_slice().ct_eq(offered))
    }
}

/// The peer of a connection: its credentials on the unix socket, nothing
/// on TCP (the token identifies the caller there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// uid and gid of the connecting process, when the kernel told.
    pub cred: Option<(u32, u32)>,
}

impl Connected<IncomingStream<'_, UnixListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, UnixListener>) -> Self {
        Self {
            cred: stream.io().peer_cred().ok().map(|c| (c.uid(), c.gid())),
        }
    }
}

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(_stream: IncomingStream<'_, TcpListener>) -> Self {
        Self { cred: None }
    }
}

/// How a listener identifies its callers.
#[derive(Debug, Clone)]
pub enum Identify {
    /// Peer credentials sorted by the policy.
    Unix(AccessPolicy),
    /// A bearer token; requests must name `addr` as their Host.
    Tcp {
        /// The token.
        token: Token,
        /// The bound address.
        addr: SocketAddr,
    },
}

/// The guard's configuration.
#[derive(Debug, Clone)]
pub struct Guard {
    /// How callers are identified.
    pub identify: Identify,
    /// The largest request body, in bytes.
    pub max_body: usize,
    /// The largest raw upload (a backup, a pushed file), in bytes.
    pub max_upload: u64,
}

fn refuse(status: StatusCode, code: &'static str, message: String) -> ApiError {
    ApiError::new(status, code, anyhow::anyhow!(message))
}

/// The answer to a refused request; a 401 names the scheme it wants.
fn answer(e: ApiError) -> Response {
    let bearer = e.status == StatusCode::UNAUTHORIZED;
    let mut r = e.into_response();
    if bearer {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
    }
    r
}

/// The Host values a request to `addr` may carry: the address itself and
/// `localhost` with its port.
fn allowed_hosts(addr: SocketAddr) -> [String; 2] {
    [addr.to_string(), format!("localhost:{}", addr.port())]
}

fn check_tcp(headers: &HeaderMap, token: &Token, addr: SocketAddr) -> Result<(), ApiError> {
    let hosts = allowed_hosts(addr);
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    if !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
        return Err(refuse(
            StatusCode::FORBIDDEN,
            "bad_host",
            format!(
                "Host `{}` is not this server; send `Host: {}` (a request naming another host is refused, so a web page cannot reach corrald by DNS rebinding)",
                corral_sandbox_core::text::Shown(host),
                hosts[0]
            ),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        let ok = hosts
            .iter()
            .any(|h| origin.eq_ignore_ascii_case(&format!("http://{h}")));
        if !ok {
            return Err(refuse(
                StatusCode::FORBIDDEN,
                "bad_origin",
                format!(
                    "Origin `{}` is not this server; corrald takes no cross-site requests",
                    corral_sandbox_core::text::Shown(origin)
                ),
            ));
        }
    }
    let offered = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer);
    match offered {
        Some(t) if token.matches(t.as_bytes()) => Ok(()),
        _ => Err(refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this listener needs `Authorization: Bearer <token>` with the token of corrald's --token-file".into(),
        )),
    }
}

/// The credentials of a `Bearer` authorization: the scheme is matched
/// without regard to case (RFC 9110, section 11.1), `bearer x` as
/// `Bearer x`; any other scheme is none.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, credentials) = value.trim_start().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| credentials.trim())
}

/// A body must be JSON and fit the cap, or for a route that takes bytes
/// (`raw`: its cap) `application/octet-stream`. A request without a body
/// (no `Content-Length`, or 0, and no chunked body) needs no type.
fn check_body(headers: &HeaderMap, max_body: usize, raw: Option<u64>) -> Result<(), ApiError> {
    let length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let chunked = headers.contains_key(header::TRANSFER_ENCODING);
    let ctype = headers.get(header::CONTENT_TYPE);
    let has_body = chunked || length.is_some_and(|n| n > 0);
    let wanted = if raw.is_some() {
        "application/octet-stream"
    } else {
        "application/json"
    };
    if has_body || ctype.is_some() {
        let matches = ctype
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|t| t.trim().eq_ignore_ascii_case(wanted));
        if !matches {
            return Err(refuse(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                if raw.is_some() {
                    "this route takes the bytes themselves, sent with `Content-Type: application/octet-stream`".into()
                } else {
                    "request bodies must be JSON, sent with `Content-Type: application/json`".into()
                },
            ));
        }
    }
    match (length, raw) {
        (Some(n), None) if n > max_body as u64 => Err(too_large(max_body)),
        (Some(n), Some(cap)) if n > cap => Err(upload_too_large(cap)),
        _ => Ok(()),
    }
}

/// The 413 refusal of an upload over `cap` bytes.
pub fn upload_too_large(cap: u64) -> ApiError {
    refuse(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the upload is larger than corrald takes ({cap} bytes, --max-upload)"),
    )
}

/// The 413 refusal (over `max_body` bytes).
pub fn too_large(max_body: usize) -> ApiError {
    refuse(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        format!("the request body is larger than corrald takes ({max_body} bytes, --max-body)"),
    )
}

/// The middleware: identify, check, and pass the [`Caller`] on.
pub async fn check(
    State(guard): State<Arc<Guard>>,
    ConnectInfo(peer): ConnectInfo<Peer>,
    mut req: Request,
    next: Next,
) -> Response {
    let caller = match &guard.identify {
        Identify::Tcp { token, addr } => {
            if let Err(e) = check_tcp(req.headers(), token, *addr) {
                return answer(e);
            }
            let me = nix::unistd::getuid().as_raw();
            Caller::admin(me, nix::unistd::getgid().as_raw())
        }
        Identify::Unix(policy) => {
            let Some((uid, gid)) = peer.cred else {
                return answer(refuse(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    "the kernel gave no credentials for this connection".into(),
                ));
            };
            let lookup = policy.clone();
            // The user database may be remote (NSS): off the async threads.
            let classified = tokio::task::spawn_blocking(move || lookup.classify(uid, gid)).await;
            match classified {
                Ok(Ok(c)) if c.tier != Tier::None => c,
                Ok(Ok(_)) => {
                    return answer(refuse(
                        StatusCode::FORBIDDEN,
                        "forbidden",
                        format!("uid {uid} may not use corrald: {}", policy.describe()),
                    ));
                }
                Ok(Err(e)) => return ApiError::internal(e).into_response(),
                Err(e) => {
                    return ApiError::internal(anyhow::anyhow!("the caller lookup failed: {e}"))
                        .into_response();
                }
            }
        }
    };
    let raw =
        crate::routes::takes_raw_body(req.method(), req.uri().path()).then_some(guard.max_upload);
    if let Err(e) = check_body(req.headers(), guard.max_body, raw) {
        return answer(e);
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// Route middleware: admins only (403 for restricted callers).
pub async fn admin_only(req: Request, next: Next) -> Response {
    match req.extensions().get::<Caller>() {
        Some(c) if c.is_admin() => next.run(req).await,
        Some(c) => answer(refuse(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{} is for admins; uid {} may act on its own sandboxes only",
                req.uri().path(),
                c.uid
            ),
        )),
        None => answer(refuse(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the caller was not identified".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn tokens_compare_whole_and_files_must_be_private() {
        let t = Token::from_bytes(b"0123456789abcdef");
        assert!(t.matches(b"0123456789abcdef"));
        assert!(!t.matches(b"0123456789abcdeX"));
        assert!(!t.matches(b"0123456789abcde"));
        assert!(!t.matches(b""));
        assert_eq!(format!("{t:?}"), "Token(..)");

        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("token");
        std::fs::write(&f, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Token::read(&f).unwrap_err();
        assert!(e.to_string().contains("chmod 600"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(Token::read(&f).unwrap().matches(b"0123456789abcdef0123"));
        std::fs::write(&f, "short\n").unwrap();
        assert!(Token::read(&f).is_err());
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&f, &link).unwrap();
        assert!(Token::read(&link).is_err());
    }

    #[test]
    fn tcp_requests_must_name_this_server_and_carry_the_token() {
        let token = Token::from_bytes(b"0123456789abcdef");
        let addr: SocketAddr = "127.0.0.1:7979".parse().unwrap();
        let auth = (header::AUTHORIZATION, "Bearer 0123456789abcdef");
        let status = |h: &HeaderMap| check_tcp(h, &token, addr).map_err(|e| e.status);
        assert_eq!(
            status(&headers(&[(header::HOST, "127.0.0.1:7979"), auth.clone()])),
            Ok(())
        );
        assert_eq!(
            status(&headers(&[(header::HOST, "localhost:7979"), auth.clone()])),
            Ok(())
        );
        assert_eq!(
            status(&headers(&[
                (header::HOST, "evil.example:7979"),
                auth.clone()
            ])),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            status(&headers(std::slice::from_ref(&auth))),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            status(&headers(&[
                (header::HOST, "127.0.0.1:7979"),
                (header::ORIGIN, "http://evil.example"),
                auth.clone()
            ])),
            Err(StatusCode::FORBIDDEN)
        );
        assert_eq!(
            status(&headers(&[
                (header::HOST, "127.0.0.1:7979"),
                (header::ORIGIN, "http://127.0.0.1:7979"),
                auth.clone()
            ])),
            Ok(())
        );
        assert_eq!(
            status(&headers(&[(header::HOST, "127.0.0.1:7979")])),
            Err(StatusCode::UNAUTHORIZED)
        );
        // The scheme's case does not matter; another scheme is no token.
        for scheme in ["bearer", "BEARER", "bEaReR"] {
            let value = format!("{scheme} 0123456789abcdef");
            let h = headers(&[
                (header::HOST, "127.0.0.1:7979"),
                (header::AUTHORIZATION, value.as_str()),
            ]);
            assert_eq!(status(&h), Ok(()), "{scheme}");
        }
        assert_eq!(
            status(&headers(&[
                (header::HOST, "127.0.0.1:7979"),
                (header::AUTHORIZATION, "Basic 0123456789abcdef")
            ])),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            status(&headers(&[
                (header::HOST, "127.0.0.1:7979"),
                (header::AUTHORIZATION, "Bearer wrong-token-wrong-token")
            ])),
            Err(StatusCode::UNAUTHORIZED)
        );
    }

    #[test]
    fn bodies_must_be_json_and_fit() {
        let status = |h: &HeaderMap| check_body(h, 100, None).map_err(|e| e.status);
        assert_eq!(status(&HeaderMap::new()), Ok(()));
        assert_eq!(status(&headers(&[(header::CONTENT_LENGTH, "0")])), Ok(()));
        assert_eq!(
            status(&headers(&[
                (header::CONTENT_LENGTH, "5"),
                (header::CONTENT_TYPE, "application/json; charset=utf-8")
            ])),
            Ok(())
        );
        assert_eq!(
            status(&headers(&[
                (header::CONTENT_LENGTH, "5"),
                (header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            ])),
            Err(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(
            status(&headers(&[(header::CONTENT_LENGTH, "5")])),
            Err(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(
            status(&headers(&[(header::CONTENT_TYPE, "text/plain")])),
            Err(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        assert_eq!(
            status(&headers(&[
                (header::CONTENT_LENGTH, "101"),
                (header::CONTENT_TYPE, "application/json")
            ])),
            Err(StatusCode::PAYLOAD_TOO_LARGE)
        );
    }

    #[test]
    fn byte_routes_take_octet_streams_up_to_the_upload_cap() {
        let status = |h: &HeaderMap| check_body(h, 100, Some(1000)).map_err(|e| e.status);
        let bytes = |n: &'static str| {
            headers(&[
                (header::CONTENT_LENGTH, n),
                (header::CONTENT_TYPE, "application/octet-stream"),
            ])
        };
        assert_eq!(status(&bytes("500")), Ok(()));
        assert_eq!(status(&bytes("1001")), Err(StatusCode::PAYLOAD_TOO_LARGE));
        // JSON (or a form) is not what these routes take.
        assert_eq!(
            status(&headers(&[
                (header::CONTENT_LENGTH, "5"),
                (header::CONTENT_TYPE, "application/json")
            ])),
            Err(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
        // And other routes still refuse bytes.
        assert_eq!(
            check_body(&bytes("5"), 100, None).map_err(|e| e.status),
            Err(StatusCode::UNSUPPORTED_MEDIA_TYPE)
        );
    }
}
