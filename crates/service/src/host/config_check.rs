//! Is the configuration a long-running front-end loaded what is applied?
//! corrald asks at start: serving a configuration the host does not enforce
//! would report "in sync" against the applied record while creating
//! sandboxes for profiles whose bridges may not exist.

use std::fmt;
use std::path::PathBuf;

use corral_egress::host::StateStore;
use corral_sandbox_core::config::Config;
use serde::Serialize;

use crate::host::{PlanningError, applied};

/// How the configuration compares with what was applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ConfigCheck {
    /// Nothing was ever applied to this target.
    NothingApplied {
        /// The record that does not exist.
        state_file: PathBuf,
    },
    /// The profiles and host settings are what was applied.
    Matches,
    /// They differ.
    Differs {
        /// Profiles configured but not applied.
        added: Vec<String>,
        /// Profiles applied but no longer configured.
        removed: Vec<String>,
        /// Profiles whose definition changed.
        changed: Vec<String>,
        /// The `[host]` settings changed.
        host_changed: bool,
    },
}

impl ConfigCheck {
    /// True when the configuration is what the host enforces.
    pub fn matches(&self) -> bool {
        *self == ConfigCheck::Matches
    }
}

impl fmt::Display for ConfigCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigCheck::NothingApplied { state_file } => write!(
                f,
                "nothing has been applied to this host yet (no {}); run `corral host apply`",
                state_file.display()
            ),
            ConfigCheck::Matches => f.write_str("the configuration is what was applied"),
            ConfigCheck::Differs {
                added,
                removed,
                changed,
                host_changed,
            } => {
                let mut parts = Vec::new();
                for (what, names) in [
                    ("not applied", added),
                    ("applied but no longer configured", removed),
                    ("changed since the apply", changed),
                ] {
                    if !names.is_empty() {
                        parts.push(format!("profile(s) {what}: {}", names.join(", ")));
                    }
                }
                if *host_changed {
                    parts.push("the [host] settings changed since the apply".to_owned());
                }
                write!(
                    f,
                    "the configuration differs from what this host enforces ({}); run `corral host apply` with it",
                    parts.join("; ")
                )
            }
        }
    }
}

/// Compare `config` with what `store` records as applied. The state
/// directory is where the record lives, not a policy: it is not compared.
pub fn compare_with_applied(
    config: &Config,
    store: &StateStore,
) -> Result<ConfigCheck, PlanningError> {
    let Some(applied) = applied(store)? else {
        return Ok(ConfigCheck::NothingApplied {
            state_file: store.path(),
        });
    };
    let was = &applied.config;
    let mut added = Vec::new();
    let mut changed = Vec::new();
    for p in &config.profiles {
        match was.profiles.get(p.name.as_str()) {
            None => added.push(p.name.to_string()),
            Some(old) if old != p => changed.push(p.name.to_string()),
            Some(_) => {}
        }
    }
    let removed: Vec<String> = was
        .profiles
        .iter()
        .filter(|p| config.profiles.get(p.name.as_str()).is_none())
        .map(|p| p.name.to_string())
        .collect();
    let mut now = config.host.clone();
    now.state_dir.clone_from(&was.host.state_dir);
    let host_changed = now != was.host;
    if added.is_empty() && removed.is_empty() && changed.is_empty() && !host_changed {
        Ok(ConfigCheck::Matches)
    } else {
        Ok(ConfigCheck::Differs {
            added,
            removed,
            changed,
            host_changed,
        })
    }
}

#[cfg(test)]
mod tests {
    use corral_egress::host::AppliedInputs;
    use corral_egress::resolve::Resolution;

    use super::*;

    #[test]
    fn nothing_then_a_match_then_every_kind_of_difference() {
        let dir = tempfile::tempdir().unwrap();
        let store = StateStore::new(dir.path());
        let builtin = Config::builtin_default();
        let c = compare_with_applied(&builtin, &store).unwrap();
        assert!(matches!(c, ConfigCheck::NothingApplied { .. }), "{c}");
        assert!(c.to_string().contains("corral host apply"));

        store
            .save(&AppliedInputs::new(&builtin, Resolution::new()))
            .unwrap();
        assert!(compare_with_applied(&builtin, &store).unwrap().matches());
        // Another state directory is not a different policy.
        let mut elsewhere = builtin.clone();
        elsewhere.host.state_dir = "/elsewhere".into();
        assert!(compare_with_applied(&elsewhere, &store).unwrap().matches());

        let text = r#"
[[profile]]
name = "internet"
bridge = "corral-net"
subnet = "10.231.9.0/24"
mode = "internet"

[[profile]]
name = "extra"
bridge = "corral-extra"
subnet = "10.231.8.0/24"
mode = "none"
"#;
        let other = Config::from_toml_str(text, "t.toml").unwrap();
        let c = compare_with_applied(&other, &store).unwrap();
        assert_eq!(
            c,
            ConfigCheck::Differs {
                added: vec!["extra".into()],
                removed: vec!["isolated".into(), "allowlist".into()],
                changed: vec!["internet".into()],
                host_changed: false,
            }
        );
        let msg = c.to_string();
        assert!(msg.contains("not applied: extra"), "{msg}");
        assert!(msg.contains("changed since the apply: internet"), "{msg}");
    }
}
