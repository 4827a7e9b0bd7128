use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The operating system of the host that runs corral (the orchestrator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostOs {
    /// Linux.
    Linux,
    /// macOS.
    Macos,
    /// Windows.
    Windows,
}

impl HostOs {
    /// Every host OS, in display order.
    pub const ALL: [HostOs; 3] = [HostOs::Linux, HostOs::Macos, HostOs::Windows];

    /// The host OS from a `std::env::consts::OS` value, if corral knows it.
    pub fn from_target_os(os: &str) -> Option<Self> {
        match os {
            "linux" => Some(HostOs::Linux),
            "macos" => Some(HostOs::Macos),
            "windows" => Some(HostOs::Windows),
            _ => None,
        }
    }

    /// The lower-case name used in config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            HostOs::Linux => "linux",
            HostOs::Macos => "macos",
            HostOs::Windows => "windows",
        }
    }
}

impl fmt::Display for HostOs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for HostOs {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|os| os.as_str() == s)
            .ok_or_else(|| format!("unknown host OS `{s}`; expected one of linux, macos, windows"))
    }
}
