//! Where corral can stand to see a sandbox's network as the sandbox sees
//! it, for the per-sandbox canary.

use serde::{Deserialize, Serialize};

/// Where the canary's probes run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "site")]
pub enum ProbeSite {
    /// The sandbox shares this host's kernel: its network namespace is
    /// entered from the host through a process inside it, so the probes
    /// need nothing from the guest.
    HostNamespace {
        /// A process inside the sandbox (its init), as this host numbers it.
        pid: u32,
    },
    /// The sandbox has its own kernel (a VM) or runs elsewhere: the probes
    /// run inside the guest through the provider's exec path.
    Guest,
}
