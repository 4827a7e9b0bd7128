//! Asking another member's corrald for its attestation over mutually
//! authenticated TLS: this member's certificate as the client's, the
//! server's certificate checked against the cluster CA and the name of the
//! member asked, one `GET /v1/cluster/attestation` within a timeout, and
//! the answer judged against this member's configuration. The same client
//! asks a drained member's corrald to run the canary of a sandbox located
//! there (`POST /v1/cluster/verify/{sandbox}`).

use std::time::Duration;

use super::drain::{MemberCanary, Reverified};
use corral_sandbox_core::Config;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::attestation::{AttestationDoc, SCHEMA, config_sha256};
use super::tls::{Identity, TlsError, server_name};
use super::{Attestation, Attester, ClusterSettings};

/// The path a member's corrald serves its attestation on.
pub const ATTESTATION_PATH: &str = "/v1/cluster/attestation";

/// The route a member's corrald runs a sandbox's canary on (`{sandbox}`:
/// its name).
pub const VERIFY_ROUTE: &str = "/v1/cluster/verify/{sandbox}";

/// The route a member's corrald admits profiled work placed on it for
/// another member's corrald on (`{sandbox}`: its name): the create, start
/// or delete that member was asked for, run here, where the sandbox's
/// host side is ([`Admit`]).
pub const ADMIT_ROUTE: &str = "/v1/cluster/admit/{sandbox}";

/// The longest an admission may take: a create, a start's wait for the
/// lease and exec (60 s at most) and the canary.
pub const ADMIT_TIMEOUT: Duration = Duration::from_secs(150);

/// What a member's corrald is asked to do for a peer at [`ADMIT_ROUTE`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Admit {
    /// `POST /v1/sandboxes` as the asking corrald received it (its
    /// `target` this member), for a caller it authenticated.
    Create {
        /// The request body, as the caller sent it.
        request: serde_json::Value,
        /// The caller's uid (recorded as the owner).
        uid: u32,
        /// The caller's primary gid.
        gid: u32,
        /// The caller is an admin there.
        admin: bool,
    },
    /// `POST /v1/sandboxes/{sandbox}/start`.
    Start {},
    /// `DELETE /v1/sandboxes/{sandbox}` (its port unbound on this member).
    Delete {},
}

/// The longest a member's canary may take: a canary probes several
/// destinations, each bounded by seconds; this runs off the tick.
pub const CANARY_TIMEOUT: Duration = Duration::from_secs(60);

/// The longest an attestation may take, whatever the interval.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest answer read: an attestation is a few kilobytes even with
/// every rule drifted.
const MAX_ANSWER: usize = 1 << 20;

/// Asks members' corrald for attestations (see the module docs).
#[derive(Clone)]
pub struct RemoteAttester {
    /// Member name → `host:port` of its listener.
    endpoints: Vec<(String, String)>,
    tls: TlsConnector,
    expected_sha256: String,
    timeout: Duration,
}

impl std::fmt::Debug for RemoteAttester {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteAttester")
            .field("endpoints", &self.endpoints)
            .field("expected_sha256", &self.expected_sha256)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RemoteAttester {
    /// An attester for `settings`' peers (and the member itself, at its own
    /// listener), judging answers against `expected` (this member's
    /// configuration). Each attestation gets min(interval / 2, 5 s).
    pub fn new(settings: &ClusterSettings, expected: &Config) -> Result<Self, TlsError> {
        let identity = Identity::load(settings)?;
        let mut endpoints: Vec<(String, String)> = settings
            .peers
            .iter()
            .map(|p| {
                let address = p.url.strip_prefix("https://").unwrap_or(&p.url);
                (p.name.clone(), address.to_owned())
            })
            .collect();
        endpoints.push((settings.member.clone(), settings.listen.to_string()));
        Ok(Self {
            endpoints,
            tls: TlsConnector::from(identity.client_config()?),
            expected_sha256: config_sha256(expected),
            timeout: (settings.interval / 2).min(MAX_TIMEOUT),
        })
    }

    /// How long one attestation may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The same attester with another timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `member`'s answer, unjudged.
    pub async fn fetch(&self, member: &str) -> Result<AttestationDoc, String> {
        let (address, at) = self.endpoint(member)?;
        let doc = tokio::time::timeout(self.timeout, self.get(member, address, &at))
            .await
            .map_err(|_| format!("no answer from {at} within {} ms", self.timeout.as_millis()))??;
        answered_for(&at, member, doc)
    }

    async fn get(&self, member: &str, address: &str, at: &str) -> Result<AttestationDoc, String> {
        let (status, body) = self
            .request(
                member,
                address,
                at,
                http::Method::GET,
                ATTESTATION_PATH,
                None,
            )
            .await?;
        parse_answer(at, status, &body)
    }

    /// `member`'s endpoint, and how errors name it.
    fn endpoint(&self, member: &str) -> Result<(&str, String), String> {
        let Some((_, address)) = self.endpoints.iter().find(|(m, _)| m == member) else {
            return Err(format!(
                "`{member}` is not a peer in this member's cluster settings"
            ));
        };
        Ok((address, format!("{member} (https://{address})")))
    }

    /// Ask `member`'s corrald to do `admit` for `sandbox` there, within
    /// [`ADMIT_TIMEOUT`]: its answer's status and body as it gave them
    /// (what its start gate and canary found, or why it refused), else why
    /// there was no answer (nothing is known of what it did).
    pub async fn admit(
        &self,
        member: &str,
        sandbox: &str,
        admit: &Admit,
    ) -> Result<(http::StatusCode, Bytes), String> {
        let (address, at) = self.endpoint(member)?;
        let path = ADMIT_ROUTE.replace("{sandbox}", sandbox);
        let body = serde_json::to_vec(admit).map_err(|e| format!("{at}: {e}"))?;
        tokio::time::timeout(
            ADMIT_TIMEOUT,
            self.request(
                member,
                address,
                &at,
                http::Method::POST,
                &path,
                Some(body.into()),
            ),
        )
        .await
        .map_err(|_| format!("no answer from {at} within {} s", ADMIT_TIMEOUT.as_secs()))?
    }

    /// One request (a JSON `body`, or none) to `member` over mutual TLS:
    /// the status and the answer's body (at most [`MAX_ANSWER`] bytes).
    async fn request(
        &self,
        member: &str,
        address: &str,
        at: &str,
        method: http::Method,
        path: &str,
        body: Option<Bytes>,
    ) -> Result<(http::StatusCode, Bytes), String> {
        let name = server_name(member).map_err(|e| format!("{at}: {e}"))?;
        let tcp = TcpStream::connect(address)
            .await
            .map_err(|e| format!("no answer from {at}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let tls = self
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| refused(at, &e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| refused(at, &e))?;
        // Aborted when this future is dropped (timeout): a server that
        // stalls after the handshake holds no task and no socket.
        let _conn = AbortOnDrop(tokio::spawn(conn));
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, member);
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(body.unwrap_or_default()))
            .map_err(|e| format!("{at}: cannot build the request: {e}"))?;
        let answer = sender
            .send_request(request)
            .await
            .map_err(|e| refused(at, &e))?;
        let status = answer.status();
        let body = Limited::new(answer.into_body(), MAX_ANSWER)
            .collect()
            .await
            .map_err(|e| format!("{at}: reading the answer: {e}"))?
            .to_bytes();
        Ok((status, body))
    }
}

#[async_trait::async_trait]
impl MemberCanary for RemoteAttester {
    async fn verify(&self, member: &str, sandbox: &str) -> Result<Reverified, String> {
        let (address, at) = self.endpoint(member)?;
        let path = VERIFY_ROUTE.replace("{sandbox}", sandbox);
        let (status, body) = tokio::time::timeout(
            CANARY_TIMEOUT,
            self.request(member, address, &at, http::Method::POST, &path, None),
        )
        .await
        .map_err(|_| format!("no verdict from {at} within {} s", CANARY_TIMEOUT.as_secs()))??;
        parse_verdict(&at, member, sandbox, status, &body)
    }
}

/// The verdict of the member at `at` on `sandbox`: a 2xx with what its
/// canary found, for that sandbox on that member, else why not.
fn parse_verdict(
    at: &str,
    member: &str,
    sandbox: &str,
    status: http::StatusCode,
    body: &[u8],
) -> Result<Reverified, String> {
    if !status.is_success() {
        return Err(format!(
            "{at} answered HTTP {status}: {}",
            String::from_utf8_lossy(body).trim()
        ));
    }
    let verdict: Reverified =
        serde_json::from_slice(body).map_err(|e| format!("{at}: bad verdict JSON: {e}"))?;
    if verdict.member != member || verdict.sandbox != sandbox {
        return Err(format!(
            "{at} answered for sandbox `{}` on `{}`, not for `{sandbox}` on `{member}`",
            verdict.sandbox, verdict.member
        ));
    }
    Ok(verdict)
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The answer of the member at `at`: a 2xx with a `corral.attestation.v1`
/// document, else why not.
fn parse_answer(at: &str, status: http::StatusCode, body: &[u8]) -> Result<AttestationDoc, String> {
    if !status.is_success() {
        return Err(format!(
            "{at} answered HTTP {status}: {}",
            String::from_utf8_lossy(body).trim()
        ));
    }
    let doc: AttestationDoc =
        serde_json::from_slice(body).map_err(|e| format!("{at}: bad attestation JSON: {e}"))?;
    if doc.schema != SCHEMA {
        return Err(format!(
            "{at}: bad attestation JSON: schema `{}`, expected `{SCHEMA}`",
            doc.schema
        ));
    }
    if doc.config_sha256.len() != 64 || !doc.config_sha256.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "{at}: bad attestation JSON: config_sha256 `{}` is not a SHA-256 in hex",
            doc.config_sha256
        ));
    }
    Ok(doc)
}

/// `doc` when it is `member`'s: an answer for another member (a
/// misconfigured server holding `member`'s certificate) is no attestation
/// of `member`.
fn answered_for(at: &str, member: &str, doc: AttestationDoc) -> Result<AttestationDoc, String> {
    if doc.member != member {
        return Err(format!(
            "{at} answered for member `{}`, not for `{member}`",
            doc.member
        ));
    }
    Ok(doc)
}

#[async_trait::async_trait]
impl Attester for RemoteAttester {
    async fn attest(&self, member: &str) -> Result<Attestation, String> {
        Ok(self.fetch(member).await?.judge(&self.expected_sha256))
    }
}

/// What the TLS layer refused, in words, else the error as it is. With TLS
/// 1.3 a server's refusal of the client certificate arrives after the
/// client finished its handshake, so the request's error is read too.
fn refused(at: &str, e: &(dyn std::error::Error + 'static)) -> String {
    let Some(tls) = rustls_cause(e) else {
        return format!("no answer from {at}: {e}");
    };
    let why = match tls {
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
            "its certificate is not signed by the cluster CA (unknown CA)".to_owned()
        }
        // Issued by a CA of the same name as the cluster's, but not by it.
        rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature) => {
            "its certificate is not signed by the cluster CA (bad signature)".to_owned()
        }
        rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName
            | rustls::CertificateError::NotValidForNameContext { .. },
        ) => "its certificate does not name the member asked (wrong name)".to_owned(),
        rustls::Error::AlertReceived(alert) => {
            format!("it refused this member's certificate (TLS alert {alert:?})")
        }
        other => other.to_string(),
    };
    format!("{at}: TLS handshake refused: {why}")
}

/// The rustls error somewhere in `e`'s chain (io errors hide theirs behind
/// `get_ref`, not `source`).
fn rustls_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        if let Some(inner) = err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            if let Some(tls) = inner.downcast_ref::<rustls::Error>() {
                return Some(tls);
            }
            next = inner.source();
            continue;
        }
        next = err.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: &str = "m2 (https://10.0.0.2:8444)";

    fn body(member: &str, schema: &str, sha: &str) -> Vec<u8> {
        serde_json::json!({
            "schema": schema, "member": member, "taken_at": 1,
            "config_sha256": sha, "drift": [], "gateways_down": [],
            "added_later": "a reader ignores fields it does not know",
        })
        .to_string()
        .into_bytes()
    }

    #[test]
    fn every_bad_answer_says_what_is_wrong() {
        let ok = http::StatusCode::OK;
        let sha = "0f".repeat(32);
        let doc = parse_answer(AT, ok, &body("m2", SCHEMA, &sha)).unwrap();
        assert_eq!(answered_for(AT, "m2", doc).unwrap().config_sha256, sha);
        for (status, answer, expected) in [
            (
                http::StatusCode::INTERNAL_SERVER_ERROR,
                b"{\"error\":{\"code\":\"attestation_failed\"}}".to_vec(),
                "answered HTTP 500 Internal Server Error: {\"error\"",
            ),
            (
                ok,
                b"<html>".to_vec(),
                "bad attestation JSON: expected value",
            ),
            (ok, b"{}".to_vec(), "bad attestation JSON: missing field"),
            (
                ok,
                body("m2", "corral.attestation.v2", &sha),
                "schema `corral.attestation.v2`, expected `corral.attestation.v1`",
            ),
            (
                ok,
                body("m2", SCHEMA, "abc"),
                "config_sha256 `abc` is not a SHA-256",
            ),
        ] {
            let e = parse_answer(AT, status, &answer).unwrap_err();
            assert!(e.starts_with(AT) && e.contains(expected), "{e}");
        }
        let doc = parse_answer(AT, ok, &body("m1", SCHEMA, &sha)).unwrap();
        let e = answered_for(AT, "m2", doc).unwrap_err();
        assert!(e.contains("answered for member `m1`, not for `m2`"), "{e}");
    }

    #[test]
    fn a_verdict_for_another_sandbox_or_member_is_no_verdict() {
        let ok = http::StatusCode::OK;
        let answer = |sandbox: &str, member: &str| {
            serde_json::json!({
                "sandbox": sandbox, "member": member, "passed": false,
                "action": "stopped", "detail": "reached 198.51.100.7:443",
            })
            .to_string()
            .into_bytes()
        };
        let v = parse_verdict(AT, "m2", "s1", ok, &answer("s1", "m2")).unwrap();
        assert_eq!((v.passed, v.action.as_str()), (false, "stopped"));
        for (status, body, expected) in [
            (
                ok,
                answer("s2", "m2"),
                "answered for sandbox `s2` on `m2`, not for `s1` on `m2`",
            ),
            (ok, answer("s1", "m1"), "answered for sandbox `s1` on `m1`"),
            (ok, b"{}".to_vec(), "bad verdict JSON: missing field"),
            (
                http::StatusCode::NOT_FOUND,
                b"{\"error\":{\"code\":\"not_found\"}}".to_vec(),
                "answered HTTP 404 Not Found",
            ),
        ] {
            let e = parse_verdict(AT, "m2", "s1", status, &body).unwrap_err();
            assert!(e.starts_with(AT) && e.contains(expected), "{e}");
        }
    }

    #[test]
    fn an_admission_is_one_tagged_object_and_nothing_else_parses() {
        let create = Admit::Create {
            request: serde_json::json!({"name": "s1", "profile": "allowlist", "target": "m2"}),
            uid: 1000,
            gid: 1000,
            admin: false,
        };
        let text = serde_json::to_value(&create).unwrap();
        assert_eq!(text["op"], "create", "{text}");
        assert_eq!(serde_json::from_value::<Admit>(text).unwrap(), create);
        assert_eq!(
            serde_json::from_str::<Admit>(r#"{"op":"start"}"#).unwrap(),
            Admit::Start {}
        );
        assert_eq!(
            serde_json::from_str::<Admit>(r#"{"op":"delete"}"#).unwrap(),
            Admit::Delete {}
        );
        for bad in [
            r#"{"op":"stop"}"#,
            r#"{"op":"start","uid":0}"#,
            r#"{"op":"create","request":{}}"#,
            "{}",
        ] {
            assert!(serde_json::from_str::<Admit>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_rustls_error_is_found_inside_an_io_error() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let why = refused("m2 (https://x:1)", &io);
        assert!(
            why.contains("TLS handshake refused") && why.contains("unknown CA"),
            "{why}"
        );
        let plain = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let why = refused("m2 (https://x:1)", &plain);
        assert!(why.starts_with("no answer from m2"), "{why}");
    }
}
