//! The TLS both directions of a cluster link use: every member presents its
//! own certificate (server and client alike), every certificate must chain
//! to the cluster's CA, and a name decides who is who — a server must be
//! named for the member asked, a client for one of the listener's peers
//! (or the member itself, for a self-check). No token travels.

use std::fmt;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::verify_server_name;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ParsedCertificate, WebPkiClientVerifier};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, DistinguishedName, RootCertStore,
    ServerConfig, SignatureScheme,
};

use super::ClusterSettings;

/// Why a member's TLS material was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read the cluster {what} {}: {source}", path.display())]
    Read {
        /// `CA`, `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file holds no usable PEM.
    #[error("cluster {what} {}: {detail}", path.display())]
    Pem {
        /// `CA`, `certificate` or `key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The private key is readable by others than its owner, or owned by
    /// someone else than this process's user.
    #[error("cluster key {}: {problem}; fix: {fix}", path.display())]
    KeyExposed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
        /// The command that fixes it.
        fix: String,
    },
    /// The material does not make a TLS configuration (a key that does not
    /// match the certificate, a name that is not a DNS name…).
    #[error("cluster TLS: {0}")]
    Config(String),
}

/// A member's TLS material: the cluster CA, its certificate chain and key.
pub struct Identity {
    roots: Arc<RootCertStore>,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
}

impl fmt::Debug for Identity {
    // The key never reaches a log line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("roots", &self.roots.len())
            .field("chain", &self.chain.len())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// Read `settings`' CA, certificate and key; refuse a key others can
    /// read or that this process's user does not own.
    pub fn load(settings: &ClusterSettings) -> Result<Self, TlsError> {
        let read = |what: &'static str, path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                what,
                path: path.to_owned(),
                source,
            })
        };
        let pem = |what: &'static str, path: &Path, detail: String| TlsError::Pem {
            what,
            path: path.to_owned(),
            detail,
        };
        let certs = |what: &'static str, path: &Path| {
            let bytes = read(what, path)?;
            let certs = CertificateDer::pem_slice_iter(&bytes)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| pem(what, path, e.to_string()))?;
            if certs.is_empty() {
                return Err(pem(what, path, "no PEM certificate found".into()));
            }
            Ok(certs)
        };
        let mut roots = RootCertStore::empty();
        for ca in certs("CA", &settings.ca)? {
            roots
                .add(ca)
                .map_err(|e| pem("CA", &settings.ca, format!("not a CA certificate: {e}")))?;
        }
        let chain = certs("certificate", &settings.cert)?;
        check_private(&settings.key)?;
        let key = PrivateKeyDer::from_pem_slice(&read("key", &settings.key)?)
            .map_err(|e| pem("key", &settings.key, e.to_string()))?;
        Ok(Self {
            roots: Arc::new(roots),
            chain,
            key,
        })
    }

    /// The listener's configuration: present this member's certificate,
    /// require a client certificate that chains to the CA and names one of
    /// `allowed` (the peers and the member itself).
    pub fn server_config(&self, allowed: &[String]) -> Result<Arc<ServerConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chained = WebPkiClientVerifier::builder_with_provider(
            Arc::clone(&self.roots),
            Arc::clone(&provider),
        )
        .build()
        .map_err(|e| TlsError::Config(format!("client verifier: {e}")))?;
        let allowed = allowed
            .iter()
            .map(|n| server_name(n))
            .collect::<Result<Vec<_>, _>>()?;
        let verifier = Arc::new(NamedPeers { chained, allowed });
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(format!("TLS versions: {e}")))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| TlsError::Config(format!("certificate and key do not match: {e}")))?;
        Ok(Arc::new(config))
    }

    /// The asking side's configuration: present this member's certificate,
    /// accept a server whose certificate chains to the CA (its name is
    /// checked per connection against the member asked).
    pub fn client_config(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(format!("TLS versions: {e}")))?
            .with_root_certificates(Arc::clone(&self.roots))
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| TlsError::Config(format!("certificate and key do not match: {e}")))?;
        Ok(Arc::new(config))
    }
}

/// `name` as the DNS name a member's certificate carries.
pub fn server_name(name: &str) -> Result<ServerName<'static>, TlsError> {
    ServerName::try_from(name.to_owned())
        .map_err(|e| TlsError::Config(format!("member name `{name}` is not a DNS name: {e}")))
}

/// The key must be this process's user's and nobody else's to read: a key
/// others can read lets them speak as this member.
fn check_private(path: &Path) -> Result<(), TlsError> {
    let meta = std::fs::metadata(path).map_err(|source| TlsError::Read {
        what: "key",
        path: path.to_owned(),
        source,
    })?;
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        let user = nix::unistd::User::from_uid(me.into())
            .ok()
            .flatten()
            .map_or_else(|| me.to_string(), |u| u.name);
        return Err(TlsError::KeyExposed {
            path: path.to_owned(),
            problem: format!(
                "owned by uid {}, not by corrald's user ({user})",
                meta.uid()
            ),
            fix: format!("chown {user} {}", path.display()),
        });
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(TlsError::KeyExposed {
            path: path.to_owned(),
            problem: format!("mode {mode:04o} lets its group or others at it"),
            fix: format!("chmod 600 {}", path.display()),
        });
    }
    Ok(())
}

/// A client certificate must chain to the CA (`chained`) AND name one of
/// `allowed`; either failing refuses the handshake.
#[derive(Debug)]
struct NamedPeers {
    chained: Arc<dyn ClientCertVerifier>,
    allowed: Vec<ServerName<'static>>,
}

impl ClientCertVerifier for NamedPeers {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        true
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.chained.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.chained
            .verify_client_cert(end_entity, intermediates, now)?;
        let parsed = ParsedCertificate::try_from(end_entity)?;
        if self
            .allowed
            .iter()
            .any(|name| verify_server_name(&parsed, name).is_ok())
        {
            Ok(ClientCertVerified::assertion())
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.chained.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.chained.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn a_key_others_can_read_is_refused_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("m1.key");
        std::fs::write(&key, "not read before the mode is checked").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o640)).unwrap();
        let e = check_private(&key).unwrap_err().to_string();
        assert!(e.contains("mode 0640") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        check_private(&key).unwrap();
        if nix::unistd::geteuid().is_root() {
            std::os::unix::fs::chown(&key, Some(65534), None).unwrap();
            let e = check_private(&key).unwrap_err().to_string();
            assert!(
                e.contains("owned by uid 65534") && e.contains("chown"),
                "{e}"
            );
        }
    }
}
