//! Whether corral's gateway serves a bridge right now, as another process
//! can ask it: while a [`crate::HostedGateway`] runs it holds a datagram
//! socket bound in the bridge's gateway directory (root's alone), and a
//! `connect(2)` to it succeeds only while that socket is open. The process
//! that hosts the gateway dies or stops serving, the socket closes with
//! it, and the file left behind refuses connections. The start gate asks
//! this of a bridge whose profile has no resolver to ask (`none` on
//! corral's gateway): it is the kernel's word that a host serves it, as a
//! dnsmasq's pid is for dnsmasq's bridges, not proof that a lease will
//! come (the canary's checks are that).

use std::io;
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};

use corral_sandbox_core::BridgeName;

use crate::GatewayPaths;

/// The socket, bound; its file removed when dropped (unless another
/// gateway has bound that path since).
#[derive(Debug)]
pub(crate) struct HostedMark {
    _socket: UnixDatagram,
    path: PathBuf,
    ino: u64,
}

impl HostedMark {
    /// Binds the mark at `path`, replacing a file a gateway that is gone
    /// left there.
    pub(crate) fn claim(path: &Path) -> io::Result<Self> {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let socket = UnixDatagram::bind(path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot bind {} (the socket that says it is served): {e}",
                    path.display()
                ),
            )
        })?;
        let ino = std::fs::symlink_metadata(path)?.ino();
        Ok(Self {
            _socket: socket,
            path: path.to_owned(),
            ino,
        })
    }
}

impl Drop for HostedMark {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Whether corral's gateway for `bridge` under `state_dir` is hosted now:
/// `Ok` when its socket takes a connection, the reason otherwise.
pub fn is_hosted(state_dir: &Path, bridge: &BridgeName) -> Result<(), String> {
    let path = GatewayPaths::new(state_dir, bridge).hosted_socket();
    let probe = UnixDatagram::unbound().map_err(|e| format!("cannot make a socket: {e}"))?;
    probe.connect(&path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => {
            "nothing hosts corral's gateway for it (no corrald or `corral host watch` has served it)"
                .to_owned()
        }
        io::ErrorKind::ConnectionRefused => {
            "nothing hosts corral's gateway for it now (its host stopped serving it)".to_owned()
        }
        _ => format!("cannot ask {}: {e}", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Not hosted, hosted while the mark lives, not hosted once dropped; a
    /// file left by a gateway that died refuses, and a new claim replaces
    /// it.
    #[test]
    fn the_mark_says_hosted_only_while_it_is_held() {
        let dir = tempfile::tempdir().unwrap();
        let bridge = BridgeName::new("cb-mark").unwrap();
        let path = GatewayPaths::new(dir.path(), &bridge).hosted_socket();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        assert!(is_hosted(dir.path(), &bridge).is_err());
        let mark = HostedMark::claim(&path).unwrap();
        assert_eq!(is_hosted(dir.path(), &bridge), Ok(()));
        drop(mark);
        assert!(!path.exists());
        assert!(is_hosted(dir.path(), &bridge).is_err());
        // A dead host's file: bound, then the socket closed without the
        // drop's cleanup.
        let dead = UnixDatagram::bind(&path).unwrap();
        drop(dead);
        assert!(path.exists());
        let refused = is_hosted(dir.path(), &bridge).unwrap_err();
        assert!(refused.contains("stopped serving"), "{refused}");
        let _mark = HostedMark::claim(&path).unwrap();
        assert_eq!(is_hosted(dir.path(), &bridge), Ok(()));
    }
}
