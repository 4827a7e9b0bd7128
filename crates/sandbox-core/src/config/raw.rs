//! The shape of `corral.toml` as written: strings with their spans, so that
//! every semantic check can point at the line it is about. Unknown keys are
//! refused by serde (`deny_unknown_fields`), whose message names the key and
//! lists the valid ones.

use serde::Deserialize;
use toml::Spanned;

/// Top-level keys, for the unknown-key message.
pub(crate) const TOP_KEYS: [&str; 3] = ["host", "profile", "phases"];

/// `[host]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHost {
    pub state_dir: Option<Spanned<String>>,
    pub uplink: Option<Spanned<String>>,
    pub multipass_bridge: Option<Spanned<String>>,
    #[serde(default)]
    pub dns_upstreams: Vec<Spanned<String>>,
    #[serde(default)]
    pub attested_executors: Vec<Spanned<String>>,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    /// Never present here: the parser takes `[host.verification]` out and
    /// reads it on its own. Declared so unknown-key messages list it.
    #[allow(dead_code)]
    pub verification: Option<serde::de::IgnoredAny>,
    /// Likewise for `[host.watch]`.
    #[allow(dead_code)]
    pub watch: Option<serde::de::IgnoredAny>,
}

/// `[host.watch]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWatch {
    pub reaction: Option<Spanned<String>>,
    pub settle_ms: Option<Spanned<u64>>,
    pub interval_secs: Option<Spanned<u64>>,
}

/// `[host.verification]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVerification {
    #[serde(default)]
    pub kinds: Vec<Spanned<String>>,
    pub canary: Option<Spanned<String>>,
    pub canary_v6: Option<Spanned<String>>,
    pub unlisted_name: Option<Spanned<String>>,
    pub check_timeout_secs: Option<Spanned<u64>>,
    pub cool_down_secs: Option<Spanned<u64>>,
    pub reverify_interval_secs: Option<Spanned<u64>>,
    pub max_probe_output_bytes: Option<Spanned<u64>>,
}

/// One `[[profile]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProfile {
    pub name: Spanned<String>,
    pub bridge: Spanned<String>,
    pub subnet: Spanned<String>,
    pub subnet_v6: Option<Spanned<String>>,
    pub mode: Spanned<String>,
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    pub block: Option<Spanned<String>>,
    pub dns: Option<Spanned<String>>,
    #[serde(default)]
    pub allow_unresolved: bool,
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    pub learned_max: Option<Spanned<i64>>,
    pub max_flows_per_source: Option<Spanned<i64>>,
    pub new_flows_per_second: Option<Spanned<i64>>,
    pub approvals: Option<Spanned<String>>,
    pub approval_timeout: Option<Spanned<i64>>,
}

/// `[phases]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPhases {
    pub work: Option<Spanned<String>>,
    pub rework: Option<Spanned<String>>,
    pub audit_agent: Option<Spanned<String>>,
    pub audit_tool: Option<Spanned<String>>,
    pub merge: Option<Spanned<String>>,
}
