//! Bytes on their way through corrald: a backup written for a client to
//! download, or an upload written before it is imported. They live in the
//! service's private transfer directory (`transfers/` in the state
//! directory, 0700; files 0600, created new), and an export's file is
//! unlinked as soon as it is open, so nothing is left behind when a client
//! goes away.

use std::path::{Path, PathBuf};

use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use futures::StreamExt as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::error::ApiError;

/// A file name no other transfer has.
pub fn unique(dir: &Path, what: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    dir.join(format!(
        "{what}-{}-{}-{nanos:x}.tar.gz",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Write `body` to the new file `dest` (0600), at most `cap` bytes (413
/// beyond; the file is removed on any failure).
pub async fn receive(body: Body, dest: &Path, cap: u64) -> Result<u64, ApiError> {
    let io = |what: &str, e: std::io::Error| {
        ApiError::internal(anyhow::Error::new(e).context(format!("{what} {}", dest.display())))
    };
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(dest)
        .await
        .map_err(|e| io("cannot create", e))?;
    let mut stream = body.into_data_stream();
    let mut written = 0u64;
    let result = async {
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                ApiError::bad_request(anyhow::anyhow!("the upload could not be read: {e}"))
            })?;
            written += chunk.len() as u64;
            if written > cap {
                return Err(crate::guard::upload_too_large(cap));
            }
            file.write_all(&chunk)
                .await
                .map_err(|e| io("cannot write", e))?;
        }
        file.sync_all().await.map_err(|e| io("cannot flush", e))?;
        Ok(written)
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(dest).await;
    }
    result
}

/// Read a whole (small) body, at most `cap` bytes (413 beyond).
pub async fn read_capped(body: Body, cap: u64) -> Result<Vec<u8>, ApiError> {
    let mut stream = body.into_data_stream();
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            ApiError::bad_request(anyhow::anyhow!("the upload could not be read: {e}"))
        })?;
        if (out.len() + chunk.len()) as u64 > cap {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                anyhow::anyhow!("the file is larger than a push takes ({cap} bytes)"),
            ));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The file at `path` as a streamed body; the path is unlinked once the
/// file is open (the open file stays readable).
pub async fn send(path: &Path) -> Result<Body, ApiError> {
    let file = tokio::fs::File::open(path).await.map_err(|e| {
        ApiError::internal(anyhow::Error::new(e).context(format!("cannot open {}", path.display())))
    })?;
    let _ = tokio::fs::remove_file(path).await;
    let chunks = futures::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buf = vec![0u8; 256 * 1024];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok::<_, std::io::Error>(Bytes::from(buf)), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    Ok(Body::from_stream(chunks))
}
