//! Defaults: host settings and the built-in configuration.

use std::path::PathBuf;

use super::{Config, HostConfig, VerificationConfig};
use crate::names::BridgeName;

/// Default `host.state_dir`.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/corral";

/// Default `host.multipass_bridge` (the bridge Multipass's QEMU backend makes).
pub const DEFAULT_MULTIPASS_BRIDGE: &str = "mpqemubr0";

/// Host settings with every default.
pub(crate) fn host() -> HostConfig {
    HostConfig {
        state_dir: PathBuf::from(DEFAULT_STATE_DIR),
        uplink: None,
        // Invariant: the constant is a valid bridge name (tested below).
        multipass_bridge: BridgeName::new(DEFAULT_MULTIPASS_BRIDGE)
            .unwrap_or_else(|_| unreachable!("default multipass bridge name is valid")),
        dns_upstreams: Vec::new(),
        attested_executors: Vec::new(),
        deny: Vec::new(),
        verification: VerificationConfig::default(),
        watch: super::WatchConfig::default(),
    }
}

/// The built-in profiles, as `corral.toml` text. Parsing it is the single
/// source of the built-in configuration, so it obeys every rule a file does.
pub(crate) const BUILTIN_TOML: &str = r#"
[[profile]]
name = "isolated"
bridge = "corral-iso"
subnet = "10.231.1.0/24"
mode = "none"

[[profile]]
name = "internet"
bridge = "corral-net"
subnet = "10.231.2.0/24"
subnet_v6 = "fd00:c0a1:2::/64"
mode = "internet"

# Documentation addresses only (RFC 5737, RFC 3849): an example that reaches
# no real host. Copy it and put your own destinations in.
[[profile]]
name = "allowlist"
bridge = "corral-allow"
subnet = "10.231.3.0/24"
mode = "allowlist"
allow = [
    "203.0.113.10:443/tcp",
    "203.0.113.0/28:8000-8100/tcp",
    "[2001:db8:100::10]:443/tcp",
]

[phases]
work = "internet"
audit_agent = "internet"
audit_tool = "isolated"
merge = "isolated"
"#;

/// The built-in configuration, parsed from [`BUILTIN_TOML`].
pub(crate) fn builtin_default() -> Config {
    // Invariant: BUILTIN_TOML is valid; the tests below parse it.
    super::parse::from_toml_str(BUILTIN_TOML, "built-in defaults")
        .unwrap_or_else(|e| unreachable!("the built-in configuration is invalid: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_parses() {
        let cfg = Config::from_toml_str(BUILTIN_TOML, "builtin").unwrap();
        assert_eq!(cfg.phases.audit_tool.unwrap().as_str(), "isolated");
        assert_eq!(cfg.host, host());
    }

    #[test]
    fn builtin_is_valid_and_round_trips() {
        let cfg = builtin_default();
        assert_eq!(cfg.profiles.names(), ["isolated", "internet", "allowlist"]);
        let text = cfg.to_toml_string();
        assert_eq!(Config::from_toml_str(&text, "rt").unwrap(), cfg, "{text}");
    }
}
