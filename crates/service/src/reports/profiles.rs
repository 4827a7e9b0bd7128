//! The configured profiles (`corral profiles --json`, `GET /v1/profiles`).

use corral_sandbox_core::config::{Config, Phase};
use corral_sandbox_core::{BlockAction, DnsPolicy, EgressMode, Profile};
use serde::Serialize;

/// The profiles, schema `corral.profiles.v1`.
#[derive(Debug, Clone, Serialize)]
pub struct ProfilesReport {
    /// `corral.profiles.v1`.
    pub schema: &'static str,
    /// The configuration file, or `built-in defaults`.
    pub source: String,
    /// The profiles, in configuration order.
    pub profiles: Vec<ProfileView>,
}

impl ProfilesReport {
    /// Every profile of `config`, loaded from `source`.
    pub fn new(config: &Config, source: impl Into<String>) -> Self {
        Self {
            schema: "corral.profiles.v1",
            source: source.into(),
            profiles: config
                .profiles
                .iter()
                .map(|p| ProfileView::new(p, config))
                .collect(),
        }
    }
}

/// One profile, with allow and deny entries in their text form.
#[derive(Debug, Clone, Serialize)]
pub struct ProfileView {
    /// Its name.
    pub name: String,
    /// Its bridge.
    pub bridge: String,
    /// Its IPv4 subnet.
    pub subnet: String,
    /// Its IPv6 subnet, if any.
    pub subnet_v6: Option<String>,
    /// The gateway's IPv4 address.
    pub gateway: String,
    /// `none`, `internet` or `allowlist`.
    pub mode: EgressMode,
    /// Allow entries.
    pub allow: Vec<String>,
    /// Deny entries (blocked even where the mode would allow).
    pub deny: Vec<String>,
    /// `reject` or `drop`.
    pub block: BlockAction,
    /// `gateway`, `corral` or `off`.
    pub dns: DnsPolicy,
    /// Names that resolve to nothing are accepted.
    pub allow_unresolved: bool,
    /// The work phases that use it.
    pub phases: Vec<&'static str>,
}

impl ProfileView {
    /// The view of `profile` within `config` (which phases use it).
    pub fn new(profile: &Profile, config: &Config) -> Self {
        Self {
            name: profile.name.to_string(),
            bridge: profile.bridge.to_string(),
            subnet: profile.subnet_v4.to_string(),
            subnet_v6: profile.subnet_v6.map(|n| n.to_string()),
            gateway: profile.gateway_v4().to_string(),
            mode: profile.mode,
            allow: profile.allow.iter().map(ToString::to_string).collect(),
            deny: profile.deny.iter().map(ToString::to_string).collect(),
            block: profile.block,
            dns: profile.dns,
            allow_unresolved: profile.allow_unresolved,
            phases: Phase::ALL
                .into_iter()
                .filter(|p| config.phases.name_for(*p) == Some(&profile.name))
                .map(Phase::key)
                .collect(),
        }
    }
}
