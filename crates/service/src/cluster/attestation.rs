//! A member's attestation: what its corral proves about its own
//! enforcement at one moment, and the seam through which the placing side
//! asks for one.

use std::time::{Duration, SystemTime};

use corral_sandbox_core::Config;
use serde::{Deserialize, Serialize};

use crate::host::{HostService, Planned};

/// What a member's corral proves about its enforcement at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attestation {
    /// The member.
    pub member: String,
    /// When the read-back was taken.
    #[serde(skip)]
    pub taken_at: SystemTime,
    /// The member enforces exactly the placing side's configuration (its
    /// canonical rendering is equal).
    pub config_matches: bool,
    /// Every difference between the member's plan and its kernel (empty:
    /// read-back in sync).
    pub drift: Vec<String>,
    /// Profile bridges whose gateway is not running.
    pub gateways_down: Vec<String>,
}

impl Attestation {
    /// Why it does not pass; empty when it does.
    pub fn failures(&self) -> Vec<String> {
        let mut why = Vec::new();
        if !self.config_matches {
            why.push("enforces a different configuration".to_owned());
        }
        if !self.drift.is_empty() {
            why.push(format!("read-back differs: {}", self.drift.join("; ")));
        }
        if !self.gateways_down.is_empty() {
            why.push(format!(
                "gateway not running for {}",
                self.gateways_down.join(", ")
            ));
        }
        why
    }
}

/// The schema id of an attestation on the wire (docs/json-schema.md).
pub const SCHEMA: &str = "corral.attestation.v1";

/// The SHA-256 of `config`'s canonical rendering
/// ([`Config::to_toml_string`]), in lower-case hex: what a member's
/// attestation carries and the placing side compares with its own.
pub fn config_sha256(config: &Config) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, config.to_toml_string().as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// An attestation as a member's corrald sends it (`corral.attestation.v1`):
/// the member's own facts, no verdict. The placing side judges it
/// ([`AttestationDoc::judge`]) against its own configuration's hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttestationDoc {
    /// [`SCHEMA`].
    pub schema: String,
    /// The member that took it.
    pub member: String,
    /// When its read-back was taken, in milliseconds since the Unix epoch
    /// (the member's clock).
    pub taken_at: u64,
    /// [`config_sha256`] of the configuration the member applied.
    pub config_sha256: String,
    /// Every difference between the member's plan and its kernel.
    pub drift: Vec<String>,
    /// Profile bridges whose gateway is not running.
    pub gateways_down: Vec<String>,
}

impl AttestationDoc {
    /// Take `member`'s attestation now: its enforcement (`host`, which
    /// applied `planned` in the member's namespace) read back against
    /// `planned` completed with the member's own networks (as its apply
    /// enforced them), its gateways' processes checked, and the hash of the
    /// configuration `planned` carries.
    pub fn take(member: &str, planned: &Planned, host: &HostService) -> Result<Self, String> {
        let complete = host
            .complete(planned)
            .map_err(|e| format!("{member}: cannot read its own networks: {e}"))?;
        let drift = host
            .plan_diff(&complete)
            .map_err(|e| format!("{member}: read-back failed: {e}"))?;
        let gateways_down = corral_gateway::status_recorded(host.state_dir())
            .into_iter()
            .filter(|g| !g.status.is_up())
            .map(|g| g.bridge)
            .collect();
        let taken_at = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Ok(Self {
            schema: SCHEMA.to_owned(),
            member: member.to_owned(),
            taken_at,
            config_sha256: config_sha256(&planned.config),
            drift: drift.iter().map(ToString::to_string).collect(),
            gateways_down,
        })
    }

    /// The placing side's verdict: the member's facts, its configuration
    /// compared with `expected_sha256` (the placer's [`config_sha256`]).
    pub fn judge(self, expected_sha256: &str) -> Attestation {
        Attestation {
            config_matches: self.config_sha256 == expected_sha256,
            member: self.member,
            taken_at: SystemTime::UNIX_EPOCH + Duration::from_millis(self.taken_at),
            drift: self.drift,
            gateways_down: self.gateways_down,
        }
    }
}

/// Take `member`'s attestation in-process and judge it against `expected`
/// (the placing side's configuration): [`AttestationDoc::take`] then
/// [`AttestationDoc::judge`], exactly what a remote member's answer goes
/// through.
pub fn attest(
    member: &str,
    expected: &Config,
    planned: &Planned,
    host: &HostService,
) -> Result<Attestation, String> {
    Ok(AttestationDoc::take(member, planned, host)?.judge(&config_sha256(expected)))
}

/// How the placing side obtains a member's attestation: in-process (the
/// corral that applied the member's enforcement) or from the member's
/// corrald over mutually authenticated TLS. `Err` says why there is none
/// (no answer, refused, read-back error); the rotation drains on it.
#[async_trait::async_trait]
pub trait Attester: Send + Sync {
    /// Ask `member` for its attestation now.
    async fn attest(&self, member: &str) -> Result<Attestation, String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_sha256_of_the_canonical_rendering() {
        let config = Config::builtin_default();
        let hash = config_sha256(&config);
        assert_eq!(hash.len(), 64);
        assert!(
            hash.bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
        // Known answer: SHA-256 of the empty string, through the same code.
        let empty = ring::digest::digest(&ring::digest::SHA256, b"");
        let hex: String = empty.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // Equal renderings, equal hashes; a different one, a different hash.
        let text = config.to_toml_string();
        let again = Config::from_toml_str(&text, "corral.toml").unwrap();
        assert_eq!(config_sha256(&again), hash);
        let widened = text.replacen("\"203.0.113.10:443/tcp\"", "\"203.0.113.11:443/tcp\"", 1);
        assert_ne!(widened, text);
        let other = Config::from_toml_str(&widened, "corral.toml").unwrap();
        assert_ne!(config_sha256(&other), hash);
    }

    fn doc() -> AttestationDoc {
        AttestationDoc {
            schema: SCHEMA.into(),
            member: "m2".into(),
            taken_at: 1_700_000_000_123,
            config_sha256: "ab".repeat(32),
            drift: vec!["table inet corral is missing".into()],
            gateways_down: vec!["corral-allow".into()],
        }
    }

    #[test]
    fn the_placer_judges_the_hash_and_keeps_the_facts() {
        let a = doc().judge(&"ab".repeat(32));
        assert!(a.config_matches);
        assert_eq!(a.member, "m2");
        assert_eq!(
            a.taken_at,
            SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123)
        );
        assert_eq!(a.drift, ["table inet corral is missing"]);
        assert_eq!(a.gateways_down, ["corral-allow"]);
        assert!(!doc().judge(&"cd".repeat(32)).config_matches);
    }

    /// Every field on the wire is documented in docs/json-schema.md, and
    /// every documented field is on the wire.
    #[test]
    fn the_wire_fields_are_the_documented_ones() {
        let text = include_str!("../../../../docs/json-schema.md");
        let section = text
            .split("Schema id: `corral.attestation.v1`")
            .nth(1)
            .expect("docs/json-schema.md documents corral.attestation.v1");
        let section = section.split("\n## ").next().unwrap_or(section);
        let mut documented: Vec<String> = section
            .lines()
            .filter_map(|l| l.strip_prefix("| `"))
            .filter_map(|l| l.split('`').next())
            .map(str::to_owned)
            .collect();
        documented.sort();
        let value = serde_json::to_value(doc()).unwrap();
        let mut sent: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        sent.sort();
        assert_eq!(sent, documented);
        let back: AttestationDoc = serde_json::from_value(value).unwrap();
        assert_eq!(back, doc());
    }
}
