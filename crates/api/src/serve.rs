//! Listening: on a unix socket (by default `/run/corral/corrald.sock`), or
//! on a loopback TCP address. corrald has no authentication, so a
//! non-loopback address is refused and the socket's file mode is the access
//! control: 0660 (owner and group), in a directory corrald creates 0750.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use crate::routes::router;
use crate::state::AppState;

/// Where to listen.
#[derive(Debug, Clone)]
pub enum Listen {
    /// A loopback TCP address (`127.0.0.1:7979`, `[::1]:7979`).
    Tcp(SocketAddr),
    /// A unix socket path (replaced if it exists).
    Unix(PathBuf),
}

/// The default unix socket.
pub const DEFAULT_SOCKET: &str = "/run/corral/corrald.sock";

/// The socket's mode: read and write for its owner and group only.
pub const SOCKET_MODE: u32 = 0o660;

/// The mode of a socket directory corrald creates.
pub const DIR_MODE: u32 = 0o750;

/// Create the socket's missing parent directories with [`DIR_MODE`];
/// directories that already exist are left as they are.
pub fn prepare_socket_dir(socket: &Path) -> anyhow::Result<()> {
    let Some(parent) = socket.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    let mut missing = Vec::new();
    let mut dir = parent;
    while !dir.exists() {
        missing.push(dir.to_owned());
        match dir.parent() {
            Some(up) => dir = up,
            None => break,
        }
    }
    for dir in missing.iter().rev() {
        std::fs::create_dir(dir)
            .with_context(|| format!("cannot create the socket directory {}", dir.display()))?;
        // Set after creation: the umask would otherwise narrow or widen it.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
            .with_context(|| format!("cannot set the mode of {}", dir.display()))?;
    }
    Ok(())
}

/// Refuse addresses other hosts could reach.
pub fn check_loopback(addr: SocketAddr) -> anyhow::Result<()> {
    if !addr.ip().is_loopback() {
        bail!(
            "{addr} is not a loopback address; corrald has no authentication, so it listens only on loopback or a unix socket (--socket PATH)"
        );
    }
    Ok(())
}

/// Serve until the process is stopped. `ready` is called with the bound
/// address (useful with port 0).
pub async fn serve(
    state: AppState,
    listen: Listen,
    ready: impl FnOnce(String),
) -> anyhow::Result<()> {
    let app = router(state);
    match listen {
        Listen::Tcp(addr) => {
            check_loopback(addr)?;
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?;
            ready(listener.local_addr()?.to_string());
            axum::serve(listener, app).await.context("serving HTTP")
        }
        Listen::Unix(path) => {
            prepare_socket_dir(&path)?;
            if path.exists() {
                std::fs::remove_file(&path)
                    .with_context(|| format!("cannot replace the old socket {}", path.display()))?;
            }
            let listener = tokio::net::UnixListener::bind(&path)
                .with_context(|| format!("cannot listen on {}", path.display()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(SOCKET_MODE))
                .with_context(|| format!("cannot set the mode of {}", path.display()))?;
            ready(path.display().to_string());
            axum::serve(listener, app).await.context("serving HTTP")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback() {
        assert!(check_loopback("127.0.0.1:1".parse().unwrap()).is_ok());
        assert!(check_loopback("[::1]:1".parse().unwrap()).is_ok());
        let e = check_loopback("0.0.0.0:7979".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("no authentication"), "{e}");
    }

    #[test]
    fn missing_socket_dirs_are_created_0750_existing_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let before = std::fs::metadata(tmp.path()).unwrap().permissions().mode();
        let sock = tmp.path().join("a/b/corrald.sock");
        prepare_socket_dir(&sock).unwrap();
        for d in [tmp.path().join("a"), tmp.path().join("a/b")] {
            let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, DIR_MODE, "{}", d.display());
        }
        assert_eq!(
            std::fs::metadata(tmp.path()).unwrap().permissions().mode(),
            before
        );
        prepare_socket_dir(&sock).unwrap();
        prepare_socket_dir(Path::new("relative.sock")).unwrap();
    }
}
