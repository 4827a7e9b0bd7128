//! Every allowlisted name that resolves to nothing, not just the first:
//! planning stops at the first one (nothing half-resolved is ever applied),
//! but an operator fixing a configuration wants the whole list at once.

use std::collections::BTreeSet;
use std::fmt;

use corral_egress::resolve::Resolver;
use corral_sandbox_core::{AllowTarget, EgressMode, ProfileSet};
use serde::Serialize;

/// One allowlisted name with no address, in a profile that does not allow
/// unresolved names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnresolvedName {
    /// The profile.
    pub profile: String,
    /// The name.
    pub host: String,
    /// What the resolver said.
    pub reason: String,
}

impl fmt::Display for UnresolvedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` of profile `{}` ({})",
            self.host, self.profile, self.reason
        )
    }
}

/// Every allowlisted host name of `profiles` that `resolver` answers with
/// no address, skipping profiles that set `allow_unresolved`; each name is
/// looked up once and listed once per profile.
pub fn unresolved_names(profiles: &ProfileSet, resolver: &dyn Resolver) -> Vec<UnresolvedName> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    for profile in profiles {
        if profile.mode != EgressMode::Allowlist || profile.allow_unresolved {
            continue;
        }
        for entry in &profile.allow {
            let AllowTarget::Host(host) = &entry.target else {
                continue;
            };
            if !seen.insert((profile.name.to_string(), host.normalized())) {
                continue;
            }
            let reason = match resolver.lookup(host) {
                Ok(addrs) if !addrs.is_empty() => continue,
                Ok(_) => "empty answer".to_owned(),
                Err(e) => e.to_string(),
            };
            out.push(UnresolvedName {
                profile: profile.name.to_string(),
                host: host.to_string(),
                reason,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use corral_egress::resolve::StaticResolver;
    use corral_sandbox_core::config::Config;

    use super::*;

    fn config(text: &str) -> Config {
        Config::from_toml_str(text, "t.toml").unwrap()
    }

    #[test]
    fn every_unresolved_name_is_listed_once_and_tolerant_profiles_are_skipped() {
        let c = config(
            r#"
[[profile]]
name = "a"
bridge = "corral-a"
subnet = "10.81.0.0/24"
mode = "allowlist"
allow = ["one.example", "two.example", "ok.example", "one.example:443"]

[[profile]]
name = "b"
bridge = "corral-b"
subnet = "10.82.0.0/24"
mode = "allowlist"
allow_unresolved = true
allow = ["three.example"]
"#,
        );
        let resolver = StaticResolver::new().with("ok.example", ["192.0.2.1".parse().unwrap()]);
        let names = unresolved_names(&c.profiles, &resolver);
        let hosts: Vec<_> = names.iter().map(|n| n.host.as_str()).collect();
        assert_eq!(hosts, ["one.example", "two.example"]);
        assert_eq!(names[0].profile, "a");
        assert!(
            names[1].to_string().contains("no static answer"),
            "{}",
            names[1]
        );
        // The built-in allowlist names addresses only.
        assert!(unresolved_names(&Config::builtin_default().profiles, &resolver).is_empty());
    }
}
