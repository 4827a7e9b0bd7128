//! Listening: on a unix socket (by default `/run/corral/corrald.sock`),
//! where the kernel names every caller, or on a loopback TCP address with a
//! bearer token (plain HTTP carries the token in clear, so other hosts are
//! refused).
//!
//! The socket is claimed, not taken: a lock file beside it is held for the
//! server's life, a socket something still answers on is "address in use",
//! a stale one (nothing answers) is replaced, and the socket is removed when
//! the server stops on SIGTERM or SIGINT.

use std::fs::{File, OpenOptions, TryLockError};
use std::future::Future;
use std::net::SocketAddr;
use std::os::unix::fs::{
    FileTypeExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::setup_error::{IoContext as _, SetupError};
use axum::Router;
use corral_service::AccessPolicy;
use corral_service::callers::NamedGroup;

use crate::guard::{self, Guard, Identify, Peer, Token};
use crate::routes::router;
use crate::state::AppState;

/// Where to listen.
#[derive(Debug, Clone)]
pub enum Listen {
    /// A loopback TCP address (`127.0.0.1:7979`, `[::1]:7979`); every
    /// request must carry `token`.
    Tcp {
        /// The address.
        addr: SocketAddr,
        /// The bearer token.
        token: Token,
    },
    /// A unix socket path; callers are sorted by `policy`.
    Unix {
        /// The socket.
        path: PathBuf,
        /// The socket's group (its mode is 0660), else corrald's own.
        group: Option<NamedGroup>,
        /// Who may call.
        policy: AccessPolicy,
    },
}

/// The default unix socket.
pub const DEFAULT_SOCKET: &str = "/run/corral/corrald.sock";

/// The socket's mode: read and write for its owner and group only.
pub const SOCKET_MODE: u32 = 0o660;

/// The mode of a socket directory corrald creates (and of the one systemd
/// made for it): its owner and group enter, nobody else.
pub const DIR_MODE: u32 = 0o750;

/// How long requests in flight get to finish after SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The variable systemd sets to the unit's `RuntimeDirectory=` paths
/// (colon-separated): directories that are corrald's own.
pub const RUNTIME_DIRECTORY_VAR: &str = "RUNTIME_DIRECTORY";

/// Create the socket's missing parent directories with [`DIR_MODE`], given
/// to `group` when there is one, so that its members reach the socket
/// (0660, the same group) and nobody else does. An existing parent is left
/// as it is unless it is the directory systemd made for corrald
/// (`$RUNTIME_DIRECTORY`), which also gets the group. Then every
/// directory above the socket must let the group in: else corrald refuses
/// to start, naming the directory, rather than serve a socket its group
/// cannot reach.
pub fn prepare_socket_dir(socket: &Path, group: Option<&NamedGroup>) -> Result<(), SetupError> {
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
            .ctx(|| format!("cannot create the socket directory {}", dir.display()))?;
        own_dir(dir, group)?;
    }
    let Some(group) = group else {
        return Ok(());
    };
    let systemds = std::env::var_os(RUNTIME_DIRECTORY_VAR).unwrap_or_default();
    if missing.is_empty() && std::env::split_paths(&systemds).any(|d| d == parent) {
        own_dir(parent, Some(group))?;
    }
    let mut dir = Some(parent);
    while let Some(d) = dir {
        let meta = std::fs::metadata(d).ctx(|| format!("cannot inspect {}", d.display()))?;
        let mode = meta.permissions().mode();
        let enters = mode & 0o001 != 0 || (meta.gid() == group.gid && mode & 0o010 != 0);
        if !enters {
            return Err(SetupError::Refused(format!(
                "members of --socket-group `{}` cannot enter {} (mode {:o}, group {}), so they could not reach the socket {}: give the directory to the group (`chgrp {} {}; chmod g+x {}`), or put the socket in a directory corrald creates",
                group.name,
                d.display(),
                mode & 0o7777,
                meta.gid(),
                socket.display(),
                group.name,
                d.display(),
                d.display(),
            )));
        }
        dir = d.parent().filter(|p| !p.as_os_str().is_empty());
    }
    Ok(())
}

/// Gives `dir` [`DIR_MODE`] and, with a group, that group.
fn own_dir(dir: &Path, group: Option<&NamedGroup>) -> Result<(), SetupError> {
    if let Some(g) = group
        && std::fs::metadata(dir).is_ok_and(|m| m.gid() != g.gid)
    {
        // Root without CAP_CHOWN (a unit's bounding set) may still give a
        // directory to its own group: run corrald with that group
        // (systemd's `Group=`) and nothing needs changing here.
        std::os::unix::fs::lchown(dir, None, Some(g.gid)).ctx(|| {
            format!(
                "cannot give the socket directory {} to group `{}` (under systemd, set `Group={}` in the unit so that the directory is made with it)",
                dir.display(),
                g.name,
                g.name
            )
        })?;
    }
    // Set after creation: the umask would otherwise narrow or widen it.
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(DIR_MODE))
        .ctx(|| format!("cannot set the mode of {}", dir.display()))
}

/// Refuse addresses other hosts could reach.
pub fn check_loopback(addr: SocketAddr) -> Result<(), SetupError> {
    if !addr.ip().is_loopback() {
        return Err(SetupError::Refused(format!(
            "{addr} is not a loopback address; corrald speaks plain HTTP, so its token would cross the network in clear: listen on loopback (and tunnel) or on the unix socket (--socket PATH)"
        )));
    }
    Ok(())
}

/// The lock file held while a server owns `socket`.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut name = socket.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// A claimed socket path: the lock is held and nothing answers there.
#[derive(Debug)]
pub struct Claim {
    _lock: File,
    path: PathBuf,
}

/// Claim `socket`: take its lock file (another corrald holding it is
/// "address in use"), then refuse a socket something answers on and remove
/// a stale one. A path that is not a socket is never removed.
pub fn claim_socket(socket: &Path) -> Result<Claim, SetupError> {
    let lock = lock_path(socket);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&lock)
        .ctx(|| format!("cannot open the lock file {}", lock.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(SetupError::Refused(format!(
                "address in use: another corrald holds {} (it serves {}); stop it first, or give this one another --socket",
                lock.display(),
                socket.display()
            )));
        }
        Err(TryLockError::Error(e)) => {
            return Err(e).ctx(|| format!("cannot lock {}", lock.display()));
        }
    }
    match std::fs::symlink_metadata(socket) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).ctx(|| format!("cannot inspect {}", socket.display())),
        Ok(meta) if !meta.file_type().is_socket() => {
            return Err(SetupError::Refused(format!(
                "{} exists and is not a socket; corrald will not replace it: move it away or choose another --socket",
                socket.display()
            )));
        }
        Ok(_) => match std::os::unix::net::UnixStream::connect(socket) {
            Ok(_) => {
                return Err(SetupError::Refused(format!(
                    "address in use: a server answers on {}; stop it first, or give this one another --socket",
                    socket.display()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                tracing::info!(socket = %socket.display(), "replacing a stale socket nothing answers on");
                std::fs::remove_file(socket)
                    .ctx(|| format!("cannot remove the stale socket {}", socket.display()))?;
            }
            Err(e) => {
                return Err(e).ctx(|| format!("cannot tell whether {} is live", socket.display()));
            }
        },
    }
    Ok(Claim {
        _lock: file,
        path: socket.to_owned(),
    })
}

/// The socket this server bound, removed when dropped if it is still the
/// same file (another server may have replaced it since).
#[derive(Debug)]
struct BoundSocket {
    path: PathBuf,
    dev: u64,
    ino: u64,
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.dev() == self.dev && m.ino() == self.ino);
        if ours && let Err(e) = std::fs::remove_file(&self.path) {
            tracing::warn!(socket = %self.path.display(), error = %e, "cannot remove the socket");
        }
    }
}

/// SIGTERM or SIGINT.
pub async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the default action (exit) still applies.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// Serve until `stop` completes, then give requests in flight
/// [`SHUTDOWN_GRACE`] to finish. `ready` is called with the bound address
/// (useful with port 0).
pub async fn serve(
    state: AppState,
    listen: Listen,
    ready: impl FnOnce(String),
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), SetupError> {
    let max_body = state.limits().max_body;
    let max_upload = state.limits().max_upload;
    let app = |identify| -> Router {
        let guard = Arc::new(Guard {
            identify,
            max_body,
            max_upload,
        });
        router(state.clone()).layer(axum::middleware::from_fn_with_state(guard, guard::check))
    };
    let (tx, rx) = tokio::sync::watch::channel(false);
    let drained = async move {
        let mut rx = rx;
        let _ = rx.wait_for(|stopping| *stopping).await;
    };
    let stopping = async move {
        stop.await;
        tracing::info!("stopping: no new connections; requests in flight get {SHUTDOWN_GRACE:?}");
        let _ = tx.send(true);
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    match listen {
        Listen::Tcp { addr, token } => {
            check_loopback(addr)?;
            let listener = tokio::net::TcpListener::bind(addr)
                .await
                .ctx(|| format!("cannot listen on {addr}"))?;
            let addr = listener
                .local_addr()
                .ctx(|| "cannot read the bound address".to_owned())?;
            ready(addr.to_string());
            let server = axum::serve(
                listener,
                app(Identify::Tcp { token, addr }).into_make_service_with_connect_info::<Peer>(),
            )
            .with_graceful_shutdown(drained);
            tokio::select! {
                r = server => r.ctx(|| "serving HTTP".to_owned()),
                () = stopping => Ok(()),
            }
        }
        Listen::Unix {
            path,
            group,
            policy,
        } => {
            prepare_socket_dir(&path, group.as_ref())?;
            let claim = claim_socket(&path)?;
            let listener = tokio::net::UnixListener::bind(&path)
                .ctx(|| format!("cannot listen on {}", path.display()))?;
            let meta = std::fs::symlink_metadata(&path)
                .ctx(|| format!("cannot inspect {}", path.display()))?;
            let bound = BoundSocket {
                path: claim.path.clone(),
                dev: meta.dev(),
                ino: meta.ino(),
            };
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(SOCKET_MODE))
                .ctx(|| format!("cannot set the mode of {}", path.display()))?;
            if let Some(g) = &group
                && meta.gid() != g.gid
            {
                std::os::unix::fs::lchown(&path, None, Some(g.gid))
                    .ctx(|| format!("cannot give {} to group `{}`", path.display(), g.name))?;
            }
            ready(path.display().to_string());
            let server = axum::serve(
                listener,
                app(Identify::Unix(policy)).into_make_service_with_connect_info::<Peer>(),
            )
            .with_graceful_shutdown(drained);
            let result = tokio::select! {
                r = server => r.ctx(|| "serving HTTP".to_owned()),
                () = stopping => Ok(()),
            };
            drop(bound);
            drop(claim);
            result
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
        assert!(e.to_string().contains("in clear"), "{e}");
    }

    #[test]
    fn missing_socket_dirs_are_created_0750_existing_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let before = std::fs::metadata(tmp.path()).unwrap().permissions().mode();
        let sock = tmp.path().join("a/b/corrald.sock");
        prepare_socket_dir(&sock, None).unwrap();
        for d in [tmp.path().join("a"), tmp.path().join("a/b")] {
            let mode = std::fs::metadata(&d).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, DIR_MODE, "{}", d.display());
        }
        assert_eq!(
            std::fs::metadata(tmp.path()).unwrap().permissions().mode(),
            before
        );
        prepare_socket_dir(&sock, None).unwrap();
        prepare_socket_dir(Path::new("relative.sock"), None).unwrap();
    }

    #[test]
    fn a_claim_refuses_a_live_socket_and_a_held_lock_and_replaces_a_stale_one() {
        let tmp = tempfile::tempdir().unwrap();
        let sock = tmp.path().join("s.sock");
        // Live: a listener answers.
        let live = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = claim_socket(&sock).unwrap_err();
        assert!(e.to_string().starts_with("address in use"), "{e}");
        // Stale: the file stays, nothing listens.
        drop(live);
        assert!(sock.exists());
        let claim = claim_socket(&sock).unwrap();
        assert!(!sock.exists());
        // Held: a second claim while the first lives.
        let e = claim_socket(&sock).unwrap_err();
        assert!(e.to_string().contains("another corrald holds"), "{e}");
        drop(claim);
        claim_socket(&sock).unwrap();
        // Not a socket: never removed.
        let file = tmp.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let e = claim_socket(&file).unwrap_err();
        assert!(e.to_string().contains("is not a socket"), "{e}");
        assert!(file.exists());
    }
}
