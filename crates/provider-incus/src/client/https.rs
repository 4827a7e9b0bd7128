//! A remote Incus server or cluster member over HTTPS, authenticated both
//! ways: corral presents a client certificate the server trusts, and accepts
//! only the one server certificate it was given (pinned, as `incus remote add`
//! does after its first contact), whatever name or address it is reached by.

use std::sync::Arc;

use async_trait::async_trait;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, SignatureScheme};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::error::ClientError;
use super::transport::{BoxStream, Connector};

/// PEM material for a remote: the server's certificate to pin, and corral's
/// client certificate and key.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteCredentials {
    /// The server certificate (PEM), compared byte for byte at each handshake.
    pub server_cert_pem: String,
    /// corral's client certificate (PEM), in the server's trust store.
    pub client_cert_pem: String,
    /// The client certificate's private key (PEM).
    pub client_key_pem: String,
}

impl std::fmt::Debug for RemoteCredentials {
    // The key never reaches a log line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteCredentials")
            .field("client_key_pem", &"<redacted>")
            .finish_non_exhaustive()
    }
}

/// Connects to `address` (`host:port`) with TLS and a client certificate.
#[derive(Clone)]
pub struct HttpsConnector {
    address: String,
    server_name: ServerName<'static>,
    tls: TlsConnector,
}

impl std::fmt::Debug for HttpsConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpsConnector")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl HttpsConnector {
    /// A connector for `address` (`host:port`) using `credentials`.
    pub fn new(address: &str, credentials: &RemoteCredentials) -> Result<Self, ClientError> {
        let bad = |detail: String| ClientError::Credentials { detail };
        let pinned = CertificateDer::from_pem_slice(credentials.server_cert_pem.as_bytes())
            .map_err(|e| bad(format!("server certificate: {e}")))?;
        let chain = CertificateDer::pem_slice_iter(credentials.client_cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| bad(format!("client certificate: {e}")))?;
        if chain.is_empty() {
            return Err(bad("client certificate: no PEM certificate found".into()));
        }
        let key = PrivateKeyDer::from_pem_slice(credentials.client_key_pem.as_bytes())
            .map_err(|e| bad(format!("client key: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = Arc::new(PinnedServer {
            pinned,
            algorithms: provider.signature_verification_algorithms,
        });
        let config = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(format!("TLS versions: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(chain, key)
            .map_err(|e| bad(format!("client certificate and key do not match: {e}")))?;
        let host = host_of(address);
        let server_name = ServerName::try_from(host.to_owned())
            .map_err(|e| bad(format!("address `{address}`: {e}")))?;
        Ok(Self {
            address: address.to_owned(),
            server_name,
            tls: TlsConnector::from(Arc::new(config)),
        })
    }
}

/// The host part of `host:port` or `[v6]:port`.
fn host_of(address: &str) -> &str {
    if let Some(rest) = address.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    address.rsplit_once(':').map_or(address, |(host, _)| host)
}

#[async_trait]
impl Connector for HttpsConnector {
    async fn connect(&self) -> Result<BoxStream, ClientError> {
        let tcp =
            TcpStream::connect(&self.address)
                .await
                .map_err(|source| ClientError::Connect {
                    endpoint: self.endpoint(),
                    source,
                })?;
        // Requests are small and latency-bound.
        let _ = tcp.set_nodelay(true);
        let tls = self
            .tls
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|source| ClientError::Tls {
                endpoint: self.endpoint(),
                source,
            })?;
        Ok(Box::pin(tls))
    }

    fn authority(&self) -> &str {
        &self.address
    }

    fn endpoint(&self) -> String {
        format!("https://{}", self.address)
    }
}

/// Accepts exactly one server certificate, still checking the handshake
/// signatures made with it.
#[derive(Debug)]
struct PinnedServer {
    pinned: CertificateDer<'static>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedServer {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if end_entity.as_ref() == self.pinned.as_ref() {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_of_handles_names_v4_and_v6() {
        assert_eq!(host_of("incus.example:8443"), "incus.example");
        assert_eq!(host_of("127.0.0.1:8443"), "127.0.0.1");
        assert_eq!(host_of("[::1]:8443"), "::1");
    }

    #[test]
    fn garbage_credentials_are_refused_with_the_part_named() {
        let creds = RemoteCredentials {
            server_cert_pem: "not pem".into(),
            client_cert_pem: String::new(),
            client_key_pem: String::new(),
        };
        let err = HttpsConnector::new("127.0.0.1:8443", &creds).err();
        let Some(ClientError::Credentials { detail }) = err else {
            panic!("expected a credentials error, got {err:?}");
        };
        assert!(detail.starts_with("server certificate"), "{detail}");
    }

    #[test]
    fn debug_never_prints_the_key() {
        let creds = RemoteCredentials {
            server_cert_pem: String::new(),
            client_cert_pem: String::new(),
            client_key_pem: "SECRET".into(),
        };
        assert!(!format!("{creds:?}").contains("SECRET"));
    }
}
