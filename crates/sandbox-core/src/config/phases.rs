//! Per-phase profile choice: which network profile a sandbox gets for each
//! phase of a work item.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::names::ProfileName;
use crate::profile::{Profile, ProfileSet};

/// A phase of a work item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The agent does the work.
    Work,
    /// The agent reworks after review (falls back to `work`).
    Rework,
    /// An agent audits the result.
    AuditAgent,
    /// Tools audit the result.
    AuditTool,
    /// The result is merged (and the project's tests run).
    Merge,
}

impl Phase {
    /// Every phase, in order.
    pub const ALL: [Phase; 5] = [
        Phase::Work,
        Phase::Rework,
        Phase::AuditAgent,
        Phase::AuditTool,
        Phase::Merge,
    ];

    /// The key under `[phases]` in `corral.toml`.
    pub fn key(self) -> &'static str {
        match self {
            Phase::Work => "work",
            Phase::Rework => "rework",
            Phase::AuditAgent => "audit_agent",
            Phase::AuditTool => "audit_tool",
            Phase::Merge => "merge",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// The `[phases]` section: a profile name per phase.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PhaseProfiles {
    /// Profile for `work`.
    pub work: Option<ProfileName>,
    /// Profile for `rework`; unset means the `work` profile.
    pub rework: Option<ProfileName>,
    /// Profile for `audit_agent`.
    pub audit_agent: Option<ProfileName>,
    /// Profile for `audit_tool`.
    pub audit_tool: Option<ProfileName>,
    /// Profile for `merge`.
    pub merge: Option<ProfileName>,
}

/// A phase could not be given a profile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PhaseError {
    /// Nothing is configured for the phase.
    #[error(
        "phase {phase} has no profile; set `{phase} = \"<profile>\"` under \
            [phases] (configured profiles: {})",
        configured.join(", ")
    )]
    Unset {
        /// The phase.
        phase: Phase,
        /// The profiles that exist.
        configured: Vec<String>,
    },
    /// The phase names a profile that does not exist.
    #[error(
        "phase {phase} names profile \"{profile}\", which is not configured; \
            configured profiles: {}",
        configured.join(", ")
    )]
    UnknownProfile {
        /// The phase.
        phase: Phase,
        /// The missing profile.
        profile: String,
        /// The profiles that exist.
        configured: Vec<String>,
    },
}

impl PhaseProfiles {
    /// The name configured for `phase` itself (no fallback).
    pub fn get(&self, phase: Phase) -> Option<&ProfileName> {
        match phase {
            Phase::Work => self.work.as_ref(),
            Phase::Rework => self.rework.as_ref(),
            Phase::AuditAgent => self.audit_agent.as_ref(),
            Phase::AuditTool => self.audit_tool.as_ref(),
            Phase::Merge => self.merge.as_ref(),
        }
    }

    /// The profile name `phase` uses, after `rework` falls back to `work`.
    pub fn name_for(&self, phase: Phase) -> Option<&ProfileName> {
        match phase {
            Phase::Rework => self.rework.as_ref().or(self.work.as_ref()),
            other => self.get(other),
        }
    }

    /// The profile `phase` uses, looked up in `profiles`.
    pub fn resolve<'a>(
        &self,
        phase: Phase,
        profiles: &'a ProfileSet,
    ) -> Result<&'a Profile, PhaseError> {
        let name = self.name_for(phase).ok_or_else(|| PhaseError::Unset {
            phase,
            configured: profiles.names(),
        })?;
        profiles
            .get(name.as_str())
            .ok_or_else(|| PhaseError::UnknownProfile {
                phase,
                profile: name.to_string(),
                configured: profiles.names(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn rework_falls_back_to_work() {
        let cfg = Config::builtin_default();
        let phases = PhaseProfiles {
            work: Some("internet".parse().unwrap()),
            ..PhaseProfiles::default()
        };
        let p = phases.resolve(Phase::Rework, &cfg.profiles).unwrap();
        assert_eq!(p.name.as_str(), "internet");
        let own = PhaseProfiles {
            rework: Some("isolated".parse().unwrap()),
            ..phases
        };
        let p = own.resolve(Phase::Rework, &cfg.profiles).unwrap();
        assert_eq!(p.name.as_str(), "isolated");
    }

    #[test]
    fn unknown_and_unset_list_the_profiles() {
        let cfg = Config::builtin_default();
        let phases = PhaseProfiles {
            merge: Some("nope".parse().unwrap()),
            ..PhaseProfiles::default()
        };
        let err = phases.resolve(Phase::Merge, &cfg.profiles).unwrap_err();
        assert_eq!(
            err.to_string(),
            "phase merge names profile \"nope\", which is not configured; configured \
                profiles: isolated, internet, allowlist"
        );
        let err = phases.resolve(Phase::Work, &cfg.profiles).unwrap_err();
        assert_eq!(
            err.to_string(),
            "phase work has no profile; set `work = \"<profile>\"` under [phases] \
                (configured profiles: isolated, internet, allowlist)"
        );
    }
}
