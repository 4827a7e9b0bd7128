//! Where one gateway keeps its files: `<state>/gateway/<bridge>/`.

use std::path::{Path, PathBuf};

use corral_sandbox_core::BridgeName;

/// The state files of the gateway of one bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayPaths {
    dir: PathBuf,
}

impl GatewayPaths {
    /// The files of `bridge`'s gateway under the host state directory,
    /// made absolute (the daemon changes its directory to `/`).
    pub fn new(state_dir: &Path, bridge: &BridgeName) -> Self {
        let base = std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_owned());
        Self {
            dir: gateway_root(&base).join(bridge.as_str()),
        }
    }

    /// The directory holding everything below.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The generated dnsmasq configuration.
    pub fn conf(&self) -> PathBuf {
        self.dir.join("dnsmasq.conf")
    }

    /// dnsmasq's pid file.
    pub fn pidfile(&self) -> PathBuf {
        self.dir.join("dnsmasq.pid")
    }

    /// The DHCP lease database (kept across restarts).
    pub fn leases(&self) -> PathBuf {
        self.dir.join("leases")
    }

    /// dnsmasq's log (start-up, errors, nftset failures).
    pub fn log(&self) -> PathBuf {
        self.dir.join("dnsmasq.log")
    }
}

/// The directory holding one subdirectory per bridge gateway.
pub fn gateway_root(state_dir: &Path) -> PathBuf {
    state_dir.join("gateway")
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
        let rel = GatewayPaths::new(Path::new("state"), &BridgeName::new("cb-x").unwrap());
        assert!(rel.conf().is_absolute(), "{}", rel.conf().display());
    }
}
