use std::fmt;

use serde::{Deserialize, Serialize};

/// Lifecycle state of a sandbox, and the transitions each state permits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxState {
    /// Running.
    Running,
    /// Stopped (exists, not running).
    Stopped,
    /// Frozen / suspended.
    Frozen,
    /// Starting, stopping or otherwise between states.
    Transitioning,
    /// The backend reports an error state.
    Error,
    /// The backend reported something corral does not know.
    Unknown,
}

impl SandboxState {
    /// Whether `start` is allowed from this state.
    pub fn can_start(self) -> bool {
        matches!(self, SandboxState::Stopped | SandboxState::Frozen)
    }

    /// Whether `stop` is allowed from this state.
    pub fn can_stop(self) -> bool {
        matches!(
            self,
            SandboxState::Running | SandboxState::Frozen | SandboxState::Error
        )
    }

    /// Whether `exec` is allowed from this state.
    pub fn can_exec(self) -> bool {
        self == SandboxState::Running
    }

    /// Whether `rename` is allowed (backends rename stopped instances only).
    pub fn can_rename(self) -> bool {
        self == SandboxState::Stopped
    }

    /// Whether `restore` is allowed without a stop first.
    pub fn can_restore(self) -> bool {
        matches!(self, SandboxState::Stopped | SandboxState::Running)
    }
}

impl fmt::Display for SandboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SandboxState::Running => "running",
            SandboxState::Stopped => "stopped",
            SandboxState::Frozen => "frozen",
            SandboxState::Transitioning => "transitioning",
            SandboxState::Error => "error",
            SandboxState::Unknown => "unknown",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [SandboxState; 6] = [
        SandboxState::Running,
        SandboxState::Stopped,
        SandboxState::Frozen,
        SandboxState::Transitioning,
        SandboxState::Error,
        SandboxState::Unknown,
    ];

    /// The whole table, row by row: start, stop, exec, rename, restore.
    #[test]
    fn transition_table() {
        let table = [
            (SandboxState::Running, [false, true, true, false, true]),
            (SandboxState::Stopped, [true, false, false, true, true]),
            (SandboxState::Frozen, [true, true, false, false, false]),
            (
                SandboxState::Transitioning,
                [false, false, false, false, false],
            ),
            (SandboxState::Error, [false, true, false, false, false]),
            (SandboxState::Unknown, [false, false, false, false, false]),
        ];
        for (state, row) in table {
            let got = [
                state.can_start(),
                state.can_stop(),
                state.can_exec(),
                state.can_rename(),
                state.can_restore(),
            ];
            assert_eq!(got, row, "{state}");
        }
    }

    #[test]
    fn no_state_both_starts_and_execs() {
        // A state that accepts start is not running, so exec must wait.
        for s in ALL {
            assert!(!(s.can_start() && s.can_exec()), "{s}");
        }
    }

    #[test]
    fn display_matches_serde() {
        for s in ALL {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{s}\""));
        }
    }
}
