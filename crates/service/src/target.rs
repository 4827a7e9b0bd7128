//! Where host work happens: this process's network namespace, or the one
//! `--netns` names.

use corral_egress::host::{Host, HostError};
use corral_egress::netns::Netns;

/// The namespace could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// `--netns` names nothing that can be opened.
    #[error("--netns {name}: give a name under /run/netns or a path like /proc/PID/ns/net")]
    NoSuchNetns {
        /// What was given.
        name: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// This process's own namespace could not be opened.
    #[error("cannot open this host's network namespace")]
    Current(#[source] HostError),
}

impl TargetError {
    /// True when the fix is a different `--netns` argument.
    pub fn is_usage(&self) -> bool {
        matches!(self, TargetError::NoSuchNetns { .. })
    }
}

/// The host (or namespace) corral acts on.
#[derive(Debug)]
pub struct Target {
    /// The egress facade bound to the namespace.
    pub host: Host,
    /// The `--netns` argument, if any.
    pub netns: Option<String>,
}

impl Target {
    /// Open `netns`, or this process's namespace when `None`.
    pub fn open(netns: Option<&str>) -> Result<Self, TargetError> {
        let host =
            match netns {
                None => Host::current().map_err(TargetError::Current)?,
                Some(name) => Host::in_netns(Netns::open(name).map_err(|source| {
                    TargetError::NoSuchNetns {
                        name: name.to_owned(),
                        source,
                    }
                })?),
            };
        Ok(Self {
            host,
            netns: netns.map(str::to_owned),
        })
    }

    /// For messages: `this host` or `network namespace NAME`.
    pub fn describe(&self) -> String {
        describe(self.netns.as_deref())
    }
}

/// `this host` or `network namespace NAME`.
pub fn describe(netns: Option<&str>) -> String {
    match netns {
        None => "this host".to_owned(),
        Some(name) => format!("network namespace {name}"),
    }
}
