//! What every service call needs, fixed for one front-end run: the
//! configuration, the namespace acted on, and the state directory the one
//! rule ([`crate::state_dir::state_dir`]) picks for them.

use std::path::{Path, PathBuf};

use corral_sandbox_core::config::Config;

use crate::config::{LoadedConfig, Origin};
use crate::state_dir::state_dir;

/// The configuration and where host state lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The configuration.
    pub config: Config,
    /// Where it came from.
    pub origin: Origin,
    /// Act inside this network namespace (name or path) instead of the host's.
    pub netns: Option<String>,
    /// Where applied inputs, gateway files and the verification gate live.
    pub state_dir: PathBuf,
}

impl Settings {
    /// Settings for `loaded` on `netns`, with `explicit_state_dir`
    /// (`--state-dir`) overriding the rule.
    pub fn new(
        loaded: LoadedConfig,
        netns: Option<String>,
        explicit_state_dir: Option<&Path>,
    ) -> Self {
        let dir = state_dir(
            explicit_state_dir,
            &loaded.config.host.state_dir,
            netns.as_deref(),
        );
        Self {
            config: loaded.config,
            origin: loaded.origin,
            netns,
            state_dir: dir,
        }
    }

    /// For messages: `this host` or `network namespace NAME`.
    pub fn describe_target(&self) -> String {
        crate::target::describe(self.netns.as_deref())
    }
}
