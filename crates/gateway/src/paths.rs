//! Where one gateway keeps its files: `<state>/gateway/<bridge>/`.

use std::path::{Path, PathBuf};

use corral_sandbox_core::BridgeName;

/// The configuration's file name in a gateway's directory.
pub(crate) const CONF_FILE: &str = "dnsmasq.conf";
/// The DHCP reservations file's name in a gateway's directory.
pub(crate) const RESERVATIONS_FILE: &str = "reservations";
/// The pid file's name in a gateway's directory.
pub(crate) const PID_FILE: &str = "dnsmasq.pid";

/// The state files of the gateway of one bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayPaths {
    state_dir: PathBuf,
    bridge: String,
    dir: PathBuf,
}

impl GatewayPaths {
    /// The files of `bridge`'s gateway under the host state directory,
    /// made absolute (the daemon changes its directory to `/`).
    pub fn new(state_dir: &Path, bridge: &BridgeName) -> Self {
        let base = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_owned());
        Self {
            dir: gateway_root(&base).join(bridge.as_str()),
            bridge: bridge.as_str().to_owned(),
            state_dir: base,
        }
    }

    /// The host state directory these files live under.
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    /// The name of this gateway's directory inside [`GATEWAY_DIR`].
    pub fn dir_name(&self) -> &str {
        &self.bridge
    }

    /// The directory holding everything below.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The generated dnsmasq configuration.
    pub fn conf(&self) -> PathBuf {
        self.dir.join(CONF_FILE)
    }

    /// dnsmasq's pid file.
    pub fn pidfile(&self) -> PathBuf {
        self.dir.join(PID_FILE)
    }

    /// The DHCP lease database (kept across restarts).
    pub fn leases(&self) -> PathBuf {
        self.dir.join(crate::files::LEASES_FILE)
    }

    /// The DHCP reservations (`dhcp-hostsfile`): one `MAC,address` line per
    /// bound port of this bridge; re-read on SIGHUP.
    pub fn reservations(&self) -> PathBuf {
        self.dir.join(RESERVATIONS_FILE)
    }

    /// corral's own DHCP server's leases (dnsmasq's format).
    pub fn corral_leases(&self) -> PathBuf {
        self.dir.join(crate::files::CORRAL_LEASES_FILE)
    }

    /// The reservations with their ports (JSON), which corral's own DHCP
    /// server answers by.
    pub fn dhcp_reservations(&self) -> PathBuf {
        self.dir.join(crate::files::DHCP_RESERVATIONS_FILE)
    }

    /// The socket corral's gateway holds while it serves this bridge.
    pub fn hosted_socket(&self) -> PathBuf {
        self.dir.join(crate::files::HOSTED_SOCKET_FILE)
    }

    /// dnsmasq's log (start-up, errors, nftset failures).
    pub fn log(&self) -> PathBuf {
        self.dir.join(crate::files::LOG_FILE)
    }
}

/// The name of the directory (in the state directory) holding one
/// subdirectory per bridge gateway.
pub const GATEWAY_DIR: &str = "gateway";

/// The directory holding one subdirectory per bridge gateway.
pub fn gateway_root(state_dir: &Path) -> PathBuf {
    state_dir.join(GATEWAY_DIR)
}

/// That directory opened, when it exists and passes the trust rule
/// (readers list nothing otherwise; every operation that writes there
/// reports the problem).
pub(crate) fn open_gateway_root(state_dir: &Path) -> Option<corral_state_files::StateDir> {
    corral_state_files::StateDir::open_existing(state_dir)
        .ok()
        .flatten()
        .and_then(|d| d.subdir_existing(GATEWAY_DIR).ok().flatten())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let p = GatewayPaths::new(Path::new("/s"), &BridgeName::new("cb-x").unwrap());
        assert_eq!(p.conf(), Path::new("/s/gateway/cb-x/dnsmasq.conf"));
        assert_eq!(p.pidfile(), Path::new("/s/gateway/cb-x/dnsmasq.pid"));
        assert_eq!(p.leases(), Path::new("/s/gateway/cb-x/leases"));
        assert_eq!(p.reservations(), Path::new("/s/gateway/cb-x/reservations"));
        let rel = GatewayPaths::new(Path::new("state"), &BridgeName::new("cb-x").unwrap());
        assert!(rel.conf().is_absolute(), "{}", rel.conf().display());
    }
}
