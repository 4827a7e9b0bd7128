//! `corral.toml` and the legacy `networks.conf`: parsed, validated as a
//! whole, and either loaded completely or refused with every problem listed.
//!
//! Callers read the file; this module only sees its text and a name to put
//! in messages.

mod defaults;
mod deny;
mod errors;
mod host;
mod networks_conf;
mod parse;
mod phases;
mod raw;
mod render;
mod source;

#[cfg(test)]
mod parse_tests;

use core::net::{IpAddr, SocketAddr, SocketAddrV6};

use ipnet::IpNet;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

pub use defaults::{DEFAULT_MULTIPASS_BRIDGE, DEFAULT_STATE_DIR};
pub use errors::{ConfigError, ConfigErrors};
pub use phases::{Phase, PhaseError, PhaseProfiles};
pub use source::{ConfigChoice, ConfigFormat, DEFAULT_CONFIG_PATH, choose_config};

use crate::names::{BridgeName, HostName, InterfaceName};
use crate::platform::SandboxKind;
use crate::profile::ProfileSet;
use crate::verify::VerificationOptions;

/// A complete, validated configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Config {
    /// Host-wide settings.
    pub host: HostConfig,
    /// The network profiles.
    pub profiles: ProfileSet,
    /// Which profile each work phase uses.
    pub phases: PhaseProfiles,
}

/// The `[host]` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostConfig {
    /// Where corral keeps its state (applied config, resolution results).
    pub state_dir: PathBuf,
    /// The interface sandboxes' traffic leaves by; `None` lets the route decide.
    pub uplink: Option<InterfaceName>,
    /// Multipass's own control bridge, whose forwarding corral blocks.
    pub multipass_bridge: BridgeName,
    /// Resolvers the gateway forwards to; empty means the host's own.
    pub dns_upstreams: Vec<IpAddr>,
    /// Remote kinds whose executors the operator attests run corral's host
    /// enforcement. Only these count as enforced.
    pub attested_executors: Vec<SandboxKind>,
    /// Destinations no sandbox of any profile reaches (site ranges), on
    /// top of the reserved ranges and the host's own networks.
    pub deny: Vec<IpNet>,
    /// The per-sandbox verification gate.
    pub verification: VerificationConfig,
    /// The kernel watch (`corral host watch`, corrald).
    pub watch: WatchConfig,
}

/// What the kernel watch does when corral's enforcement drifted behind
/// its back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchReaction {
    /// Re-apply the recorded plan, then re-verify the affected sandboxes;
    /// cut when the heal fails or the read-back still differs.
    #[default]
    Heal,
    /// Cut the affected profiles' sandbox ports at once and stop the
    /// sandboxes; never re-apply.
    Cut,
}

impl std::fmt::Display for WatchReaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WatchReaction::Heal => "heal",
            WatchReaction::Cut => "cut",
        })
    }
}

/// The `[host.watch]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct WatchConfig {
    /// What to do on drift (`reaction`, default `heal`).
    pub reaction: WatchReaction,
    /// How long a burst of kernel events may go on before the read-back
    /// (`settle_ms`, default 10 ms): one read-back per burst.
    pub settle: Duration,
    /// The read-back that runs even when the kernel reports nothing
    /// (`interval_secs`, default 30 s): a safety net for changes no
    /// notification names.
    pub interval: Duration,
}

impl Default for WatchConfig {
    fn default() -> Self {
        Self {
            reaction: WatchReaction::Heal,
            settle: Duration::from_millis(10),
            interval: Duration::from_secs(30),
        }
    }
}

/// The `[host.verification]` section: which kinds may be verified per
/// sandbox, what the canary probes, and the gate's bounds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct VerificationConfig {
    /// Kinds the operator opts in to per-sandbox verification (host-owned;
    /// a provider cannot add itself).
    pub kinds: Vec<SandboxKind>,
    /// A public IPv4 or IPv6 address and port that must NOT be reachable
    /// from a profiled sandbox (and that answers when not filtered).
    pub canary: Option<SocketAddr>,
    /// A global IPv6 address and port that must not be reachable.
    pub canary_v6: Option<SocketAddrV6>,
    /// A name that resolves in the world but is on no allowlist: the
    /// gateway resolver must not answer it.
    pub unlisted_name: Option<HostName>,
    /// Timing and size bounds.
    pub options: VerificationOptions,
}

impl Config {
    /// Parse and validate `corral.toml` text. `file` names the file in
    /// messages. Every problem is returned at once; nothing is half-loaded.
    pub fn from_toml_str(text: &str, file: &str) -> Result<Config, ConfigErrors> {
        parse::from_toml_str(text, file)
    }

    /// Parse and validate a legacy `networks.conf` (`name bridge subnet
    /// allowed-hosts` per line). Host settings take their defaults.
    pub fn from_networks_conf(text: &str, file: &str) -> Result<Config, ConfigErrors> {
        networks_conf::parse(text, file)
    }

    /// The configuration as `corral.toml` text; parsing it back yields an
    /// equal `Config` (durations are written in whole seconds, as the file
    /// format holds them).
    pub fn to_toml_string(&self) -> String {
        render::to_toml_string(self)
    }

    /// The built-in configuration used when no file exists: profiles
    /// `isolated`, `internet` and an example `allowlist` whose entries are
    /// documentation addresses (RFC 5737 / RFC 3849), so it reaches no real host.
    pub fn builtin_default() -> Config {
        defaults::builtin_default()
    }
}

impl Default for HostConfig {
    fn default() -> Self {
        defaults::host()
    }
}
