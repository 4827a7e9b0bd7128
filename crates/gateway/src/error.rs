//! Errors of the gateway services.

use std::io;
use std::path::PathBuf;

/// What went wrong configuring or supervising a gateway.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    /// A DNS-serving profile has no upstream resolver to forward to.
    #[error(
        "profile `{profile}` needs upstream resolvers for its gateway DNS; set `dns_upstreams` in the host config, or set the profile's `dns = \"off\"`"
    )]
    NoUpstreams {
        /// The profile.
        profile: String,
    },
    /// The subnet has no address left for sandboxes after the gateway.
    #[error(
        "bridge `{bridge}` subnet {subnet} has no address for sandboxes besides the gateway; use a /30 or larger subnet"
    )]
    NoRoomForLeases {
        /// The bridge.
        bridge: String,
        /// Its subnet.
        subnet: String,
    },
    /// The TTL cap and set timeout break the rule that keeps answers usable.
    #[error("invalid gateway DNS timing: {0}")]
    Timing(String),
    /// A value cannot be written into dnsmasq's configuration safely.
    #[error("cannot write the dnsmasq configuration: {0}")]
    Render(String),
    /// The state directory is not safe to use, or a file in it failed.
    #[error(transparent)]
    Files(#[from] corral_state_files::StateFileError),
    /// dnsmasq could not be started.
    #[error("cannot run dnsmasq ({}); install Debian's `dnsmasq-base` package", binary.display())]
    Spawn {
        /// The binary tried.
        binary: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// dnsmasq started but refused its configuration or could not bind.
    #[error("dnsmasq for bridge `{bridge}` failed to start (exit {code}): {stderr}; see {}", conf.display())]
    Startup {
        /// The bridge.
        bridge: String,
        /// dnsmasq's exit status (-1 when killed by a signal).
        code: i32,
        /// What dnsmasq printed.
        stderr: String,
        /// The generated configuration.
        conf: PathBuf,
    },
    /// dnsmasq reported success but no process of ours is running.
    #[error("dnsmasq for bridge `{bridge}` reported success but {reason}; see its log at {}", log.display())]
    NotRunning {
        /// The bridge.
        bridge: String,
        /// What was found instead.
        reason: String,
        /// dnsmasq's log file.
        log: PathBuf,
    },
    /// A restart from the recorded configuration found none recorded.
    #[error("gateway of bridge `{bridge}` has no recorded configuration ({} is missing); run `corral host apply`", conf.display())]
    NoRecord {
        /// The bridge.
        bridge: String,
        /// The configuration file that is missing.
        conf: PathBuf,
    },
    /// kill(2) failed for a reason other than the process being gone.
    #[error(
        "cannot send {signal} to dnsmasq pid {pid} of bridge `{bridge}`: {source}; check that corral runs as the user that started it (root)"
    )]
    Signal {
        /// The bridge.
        bridge: String,
        /// Its pid.
        pid: u32,
        /// The signal.
        signal: &'static str,
        /// The cause.
        source: io::Error,
    },
    /// A running dnsmasq of ours did not exit when asked.
    #[error("dnsmasq pid {pid} for bridge `{bridge}` did not exit after SIGTERM and SIGKILL")]
    WontStop {
        /// The bridge.
        bridge: String,
        /// Its pid.
        pid: u32,
    },
    /// corral's resolver record for a bridge could not be written.
    #[error("cannot record corral's resolver for bridge `{bridge}`: {reason}")]
    Record {
        /// The bridge.
        bridge: String,
        /// Why.
        reason: String,
    },
}
