//! A member's cluster settings (`cluster.toml`): who it is, where its
//! corrald answers other members, the certificates that authenticate both
//! directions, its peers and the attestation interval.
//!
//! They live apart from corral.toml on purpose: every member enforces the
//! same corral.toml (its hash is part of the attestation), while these
//! differ per member.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The shortest and longest attestation interval accepted.
const INTERVAL_SECS: std::ops::RangeInclusive<u64> = 1..=3600;

/// One member's cluster settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSettings {
    /// This member's name, as Incus names it (`incus cluster list`); its
    /// certificate names it too.
    pub member: String,
    /// Where this corrald answers other members (mutually authenticated TLS).
    pub listen: SocketAddr,
    /// The cluster's certificate authority (PEM): every member's
    /// certificate, server and client, must chain to it.
    pub ca: PathBuf,
    /// This member's certificate chain (PEM).
    pub cert: PathBuf,
    /// This member's private key (PEM; only its owner may read it).
    pub key: PathBuf,
    /// An attestation older than this counts as none.
    pub interval: Duration,
    /// The other members' corrald endpoints.
    pub peers: Vec<Peer>,
}

/// Another member's corrald.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its Incus member name (its certificate must name it).
    pub name: String,
    /// `https://HOST:PORT` of its cluster listener.
    pub url: String,
}

impl ClusterSettings {
    /// The peer named `member`, if any.
    pub fn peer(&self, member: &str) -> Option<&Peer> {
        self.peers.iter().find(|p| p.name == member)
    }
}

/// Why `cluster.toml` was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum ClusterSettingsError {
    /// The file could not be read.
    #[error("cannot read cluster settings {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A field is missing, misspelt, of the wrong type or out of range.
    #[error("{file}:{line}: `{field}`: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// 1-based line (1 when the whole file is at fault).
        line: usize,
        /// The field (`toml` for a syntax error).
        field: String,
        /// What was expected.
        message: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    member: toml::Spanned<String>,
    listen: toml::Spanned<String>,
    ca: toml::Spanned<PathBuf>,
    cert: toml::Spanned<PathBuf>,
    key: toml::Spanned<PathBuf>,
    #[serde(default)]
    interval_secs: Option<toml::Spanned<u64>>,
    #[serde(default)]
    peers: Vec<RawPeer>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPeer {
    name: toml::Spanned<String>,
    url: toml::Spanned<String>,
}

/// The default attestation interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// Read and check `path`.
pub fn load(path: &Path) -> Result<ClusterSettings, ClusterSettingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| ClusterSettingsError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse(&path.display().to_string(), &text)
}

/// Check `text` (the contents of `file`).
pub fn parse(file: &str, text: &str) -> Result<ClusterSettings, ClusterSettingsError> {
    let invalid = |offset: Option<usize>, field: &str, message: String| {
        let line = offset.map_or(1, |o| {
            text.get(..o).unwrap_or(text).matches('\n').count() + 1
        });
        ClusterSettingsError::Invalid {
            file: file.to_owned(),
            line,
            field: field.to_owned(),
            message,
        }
    };
    let raw: Raw = toml::from_str(text)
        .map_err(|e| invalid(e.span().map(|s| s.start), "toml", e.message().to_owned()))?;
    let name_ok = |n: &str| {
        !n.is_empty()
            && n.len() <= 63
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    };
    if !name_ok(raw.member.get_ref()) {
        return Err(invalid(
            Some(raw.member.span().start),
            "member",
            "expected the Incus member name (letters, digits, `-`, `.`; at most 63)".into(),
        ));
    }
    let listen: SocketAddr = raw.listen.get_ref().parse().map_err(|_| {
        invalid(
            Some(raw.listen.span().start),
            "listen",
            "expected ADDRESS:PORT, e.g. 10.0.0.1:8444".into(),
        )
    })?;
    for (field, path) in [("ca", &raw.ca), ("cert", &raw.cert), ("key", &raw.key)] {
        if !path.get_ref().is_absolute() {
            return Err(invalid(
                Some(path.span().start),
                field,
                "expected an absolute path".into(),
            ));
        }
    }
    let interval = match &raw.interval_secs {
        None => DEFAULT_INTERVAL,
        Some(s) if INTERVAL_SECS.contains(s.get_ref()) => Duration::from_secs(*s.get_ref()),
        Some(s) => {
            return Err(invalid(
                Some(s.span().start),
                "interval_secs",
                format!(
                    "expected {}..={} seconds",
                    INTERVAL_SECS.start(),
                    INTERVAL_SECS.end()
                ),
            ));
        }
    };
    let mut peers: Vec<Peer> = Vec::new();
    for (i, p) in raw.peers.iter().enumerate() {
        let name = p.name.get_ref();
        if !name_ok(name) || name == raw.member.get_ref() || peers.iter().any(|q| &q.name == name) {
            return Err(invalid(
                Some(p.name.span().start),
                &format!("peers[{i}].name"),
                "expected another member's Incus name, each peer once, not this member".into(),
            ));
        }
        let url = p.url.get_ref();
        let host_port = url.strip_prefix("https://").unwrap_or("");
        if host_port.is_empty() || host_port.contains('/') || !host_port.contains(':') {
            return Err(invalid(
                Some(p.url.span().start),
                &format!("peers[{i}].url"),
                "expected https://HOST:PORT of the peer's cluster listener".into(),
            ));
        }
        peers.push(Peer {
            name: name.clone(),
            url: url.clone(),
        });
    }
    Ok(ClusterSettings {
        member: raw.member.into_inner(),
        listen,
        ca: raw.ca.into_inner(),
        cert: raw.cert.into_inner(),
        key: raw.key.into_inner(),
        interval,
        peers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
member = "m1"
listen = "10.0.0.1:8444"
ca = "/etc/corral/cluster/ca.pem"
cert = "/etc/corral/cluster/m1.pem"
key = "/etc/corral/cluster/m1.key"
interval_secs = 5

[[peers]]
name = "m2"
url = "https://10.0.0.2:8444"
"#;

    #[test]
    fn a_good_file_parses() {
        let s = parse("cluster.toml", GOOD).unwrap();
        assert_eq!(s.member, "m1");
        assert_eq!(s.interval, Duration::from_secs(5));
        assert_eq!(s.peer("m2").unwrap().url, "https://10.0.0.2:8444");
        assert!(s.peer("m3").is_none());
    }

    #[test]
    fn bad_fields_name_file_line_and_field() {
        for (from, to, field, line) in [
            ("interval_secs = 5", "interval_secs = 0", "interval_secs", 7),
            (
                "listen = \"10.0.0.1:8444\"",
                "listen = \"nowhere\"",
                "listen",
                3,
            ),
            ("name = \"m2\"", "name = \"m1\"", "peers[0].name", 10),
            (
                "\"https://10.0.0.2:8444\"",
                "\"http://10.0.0.2:8444\"",
                "peers[0].url",
                11,
            ),
            ("ca = \"/etc", "ca = \"etc", "ca", 4),
            ("interval_secs", "interval", "toml", 7),
        ] {
            let text = GOOD.replace(from, to);
            let e = parse("c.toml", &text).unwrap_err();
            match &e {
                ClusterSettingsError::Invalid {
                    file,
                    line: l,
                    field: f,
                    ..
                } => {
                    assert_eq!(
                        (file.as_str(), f.as_str(), *l),
                        ("c.toml", field, line),
                        "{e}"
                    );
                }
                other => panic!("{other}"),
            }
        }
    }
}
