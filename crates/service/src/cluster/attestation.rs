//! A member's attestation: what its corral proves about its own
//! enforcement at one moment, and the seam through which the placing side
//! asks for one.

use std::time::SystemTime;

use corral_gateway::GatewayStatus;
use corral_sandbox_core::Config;
use serde::Serialize;

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

/// Take `member`'s attestation: its enforcement (`host`, which applied
/// `planned` in the member's namespace) read back against `planned` (with
/// the member's own networks, as apply completes it), its
/// configuration compared with `expected` (the placing side's), its
/// gateways' processes checked.
pub fn attest(
    member: &str,
    expected: &Config,
    planned: &Planned,
    host: &HostService,
) -> Result<Attestation, String> {
    // With the member's own networks, as its apply enforced them.
    let complete = host
        .complete(planned)
        .map_err(|e| format!("{member}: cannot read its own networks: {e}"))?;
    let drift = host
        .plan_diff(&complete)
        .map_err(|e| format!("{member}: read-back failed: {e}"))?;
    let gateways_down = corral_gateway::status_recorded(host.state_dir())
        .into_iter()
        .filter(|g| !matches!(g.status, GatewayStatus::Running { .. }))
        .map(|g| g.bridge)
        .collect();
    Ok(Attestation {
        member: member.to_owned(),
        taken_at: SystemTime::now(),
        config_matches: expected.to_toml_string() == planned.config.to_toml_string(),
        drift: drift.iter().map(ToString::to_string).collect(),
        gateways_down,
    })
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
