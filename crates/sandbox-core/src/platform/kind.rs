use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A kind of sandbox backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxKind {
    /// Incus on this host (containers and VMs).
    Incus,
    /// An Incus server or cluster reached over HTTPS.
    IncusRemote,
    /// Multipass VMs on this host.
    Multipass,
    /// Multipass on a Linux executor reached over SSH.
    MultipassRemote,
    /// Tart VMs (macOS, Apple Silicon).
    Tart,
    /// Hosted sprites executors.
    Sprites,
    /// bubblewrap: shared kernel, no egress enforcement.
    Bubblewrap,
    /// A plain process: no isolation at all, development only.
    Process,
}

impl SandboxKind {
    /// Every kind, in display order.
    pub const ALL: [SandboxKind; 8] = [
        SandboxKind::Incus,
        SandboxKind::IncusRemote,
        SandboxKind::Multipass,
        SandboxKind::MultipassRemote,
        SandboxKind::Tart,
        SandboxKind::Sprites,
        SandboxKind::Bubblewrap,
        SandboxKind::Process,
    ];

    /// The kebab-case name used in config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxKind::Incus => "incus",
            SandboxKind::IncusRemote => "incus-remote",
            SandboxKind::Multipass => "multipass",
            SandboxKind::MultipassRemote => "multipass-remote",
            SandboxKind::Tart => "tart",
            SandboxKind::Sprites => "sprites",
            SandboxKind::Bubblewrap => "bubblewrap",
            SandboxKind::Process => "process",
        }
    }

    /// True for kinds whose sandboxes run on another machine (an executor).
    pub fn is_remote(self) -> bool {
        matches!(
            self,
            SandboxKind::IncusRemote | SandboxKind::MultipassRemote | SandboxKind::Sprites
        )
    }
}

impl fmt::Display for SandboxKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<_> = Self::ALL.iter().map(|k| k.as_str()).collect();
                format!(
                    "unknown sandbox kind `{s}`; expected one of {}",
                    known.join(", ")
                )
            })
    }
}
