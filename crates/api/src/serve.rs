//! Listening: on a unix socket, or on a loopback TCP address. corrald has no
//! authentication, so a non-loopback address is refused.

use std::net::SocketAddr;
use std::path::PathBuf;

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
            if path.exists() {
                std::fs::remove_file(&path)
                    .with_context(|| format!("cannot replace the old socket {}", path.display()))?;
            }
            let listener = tokio::net::UnixListener::bind(&path)
                .with_context(|| format!("cannot listen on {}", path.display()))?;
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
}
