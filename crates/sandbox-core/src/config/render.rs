//! [`Config`] → `corral.toml` text, in the same shape the parser reads, so
//! that a rendered config parses back to an equal one.

use serde::Serialize;

use super::{Config, PhaseProfiles};
use crate::profile::{BlockAction, DnsPolicy, EgressMode, Profile};

#[derive(Serialize)]
struct Out {
    host: OutHost,
    profile: Vec<OutProfile>,
    phases: OutPhases,
}

#[derive(Serialize)]
struct OutHost {
    state_dir: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    uplink: Option<String>,
    multipass_bridge: String,
    dns_upstreams: Vec<String>,
    attested_executors: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deny: Vec<String>,
    verification: OutVerification,
    #[serde(skip_serializing_if = "Option::is_none")]
    watch: Option<OutWatch>,
}

#[derive(Serialize)]
struct OutWatch {
    reaction: String,
    settle_ms: u64,
    interval_secs: u64,
}

#[derive(Serialize)]
struct OutVerification {
    kinds: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    canary: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    canary_v6: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unlisted_name: Option<String>,
    check_timeout_secs: u64,
    cool_down_secs: u64,
    reverify_interval_secs: u64,
    max_probe_output_bytes: u64,
}

#[derive(Serialize)]
struct OutProfile {
    name: String,
    bridge: String,
    subnet: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    subnet_v6: Option<String>,
    mode: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    allow: Vec<String>,
    block: &'static str,
    dns: &'static str,
    allow_unresolved: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deny: Vec<String>,
    max_flows_per_source: u32,
    new_flows_per_second: u32,
    #[serde(skip_serializing_if = "is_default_learned_max")]
    learned_max: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    approvals: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_timeout: Option<u32>,
}

fn is_default_learned_max(n: &u32) -> bool {
    *n == crate::profile::DEFAULT_LEARNED_MAX
}

#[derive(Serialize)]
struct OutPhases {
    #[serde(skip_serializing_if = "Option::is_none")]
    work: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rework: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit_agent: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audit_tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    merge: Option<String>,
}

fn profile(p: &Profile) -> OutProfile {
    OutProfile {
        name: p.name.to_string(),
        bridge: p.bridge.to_string(),
        subnet: p.subnet_v4.to_string(),
        subnet_v6: p.subnet_v6.map(|n| n.to_string()),
        mode: match p.mode {
            EgressMode::None => "none",
            EgressMode::Internet => "internet",
            EgressMode::Allowlist => "allowlist",
        },
        allow: p.allow.iter().map(ToString::to_string).collect(),
        block: match p.block {
            BlockAction::Reject => "reject",
            BlockAction::Drop => "drop",
        },
        dns: match p.dns {
            DnsPolicy::Gateway => "gateway",
            DnsPolicy::Off => "off",
            DnsPolicy::Corral => "corral",
        },
        allow_unresolved: p.allow_unresolved,
        deny: p.deny.iter().map(ToString::to_string).collect(),
        max_flows_per_source: p.flows.max_per_source,
        new_flows_per_second: p.flows.new_per_second,
        learned_max: p.learned_max,
        approvals: match p.approvals {
            crate::profile::Approvals::Off => None,
            crate::profile::Approvals::Ask { .. } => Some("ask"),
        },
        approval_timeout: match p.approvals {
            crate::profile::Approvals::Ask { timeout_secs }
                if timeout_secs != crate::profile::DEFAULT_APPROVAL_TIMEOUT_SECS =>
            {
                Some(timeout_secs)
            }
            _ => None,
        },
    }
}

fn phases(p: &PhaseProfiles) -> OutPhases {
    let s = |n: &Option<crate::names::ProfileName>| n.as_ref().map(ToString::to_string);
    OutPhases {
        work: s(&p.work),
        rework: s(&p.rework),
        audit_agent: s(&p.audit_agent),
        audit_tool: s(&p.audit_tool),
        merge: s(&p.merge),
    }
}

pub(crate) fn to_toml_string(cfg: &Config) -> String {
    let h = &cfg.host;
    let v = &h.verification;
    let out = Out {
        host: OutHost {
            state_dir: h.state_dir.to_string_lossy().into_owned(),
            uplink: h.uplink.as_ref().map(ToString::to_string),
            multipass_bridge: h.multipass_bridge.to_string(),
            dns_upstreams: h.dns_upstreams.iter().map(ToString::to_string).collect(),
            attested_executors: h
                .attested_executors
                .iter()
                .map(ToString::to_string)
                .collect(),
            deny: h.deny.iter().map(ToString::to_string).collect(),
            verification: OutVerification {
                kinds: v.kinds.iter().map(ToString::to_string).collect(),
                canary: v.canary.map(|a| a.to_string()),
                canary_v6: v.canary_v6.map(|a| a.to_string()),
                unlisted_name: v.unlisted_name.as_ref().map(ToString::to_string),
                check_timeout_secs: v.options.check_timeout.as_secs(),
                cool_down_secs: v.options.cool_down.as_secs(),
                reverify_interval_secs: v.options.reverify_interval.as_secs(),
                max_probe_output_bytes: u64::try_from(v.options.max_probe_output)
                    .unwrap_or(u64::MAX),
            },
            // Written only when set, so a default configuration renders
            // as it did before the section existed.
            watch: (h.watch != super::WatchConfig::default()).then(|| OutWatch {
                reaction: h.watch.reaction.to_string(),
                settle_ms: u64::try_from(h.watch.settle.as_millis()).unwrap_or(u64::MAX),
                interval_secs: h.watch.interval.as_secs(),
            }),
        },
        profile: cfg.profiles.iter().map(profile).collect(),
        phases: phases(&cfg.phases),
    };
    // Invariant: `Out` holds only strings, integers, booleans, arrays and
    // tables, all of which TOML can express.
    toml::to_string_pretty(&out)
        .unwrap_or_else(|e| unreachable!("config always renders as TOML: {e}"))
}
