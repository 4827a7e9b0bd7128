//! File push and pull through Incus's file API (works on stopped
//! containers too, which clone and import rely on).

use bytes::Bytes;
use corral_sandbox_core::sandbox::ProviderError;
use http::Method;

use crate::client::encode_query;
use crate::sandbox::IncusSandbox;

fn check_path(path: &str) -> Result<(), ProviderError> {
    if !path.starts_with('/') || path.split('/').any(|c| c == "..") {
        return Err(ProviderError::InvalidSpec {
            field: "path",
            reason: format!("{path:?}; expected an absolute guest path without `..`"),
        });
    }
    Ok(())
}

/// Write `contents` to `path` in the guest, owned by root, with `mode`.
pub async fn push(
    sandbox: &IncusSandbox,
    path: &str,
    contents: &[u8],
    mode: u32,
) -> Result<(), ProviderError> {
    push_owned(sandbox, path, contents, mode, (0, 0)).await
}

/// Write `contents` to `path` in the guest, owned by `owner` (guest uid, gid).
pub async fn push_owned(
    sandbox: &IncusSandbox,
    path: &str,
    contents: &[u8],
    mode: u32,
    owner: (u32, u32),
) -> Result<(), ProviderError> {
    check_path(path)?;
    let headers = [
        ("X-Incus-uid", owner.0.to_string()),
        ("X-Incus-gid", owner.1.to_string()),
        ("X-Incus-mode", format!("{:04o}", mode & 0o7777)),
        ("X-Incus-type", "file".to_owned()),
        ("X-Incus-write", "overwrite".to_owned()),
        ("Content-Type", "application/octet-stream".to_owned()),
    ];
    sandbox
        .provider
        .client()
        .send_bytes(
            Method::POST,
            &sandbox.path(&format!("/files?path={}", encode_query(path))),
            &headers,
            Bytes::copy_from_slice(contents),
        )
        .await
        .map(|_| ())
        .map_err(|e| sandbox.provider.err(e))
}

/// What is at a guest path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pulled {
    /// A regular file's contents.
    File(Vec<u8>),
    /// A symlink, directory or something else (by Incus's type name).
    Other(String),
}

/// Read `path` in the guest, whatever it is.
pub async fn pull_any(sandbox: &IncusSandbox, path: &str) -> Result<Pulled, ProviderError> {
    check_path(path)?;
    let (headers, body) = sandbox
        .provider
        .client()
        .get_bytes(&sandbox.path(&format!("/files?path={}", encode_query(path))))
        .await
        .map_err(|e| {
            sandbox
                .provider
                .not_found_as(e, "file", &format!("{}:{path}", sandbox.name))
        })?;
    let kind = headers
        .get("X-Incus-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("file")
        .to_owned();
    Ok(if kind == "file" {
        Pulled::File(body.to_vec())
    } else {
        Pulled::Other(kind)
    })
}

/// Remove the file at `path` in the guest.
pub async fn remove(sandbox: &IncusSandbox, path: &str) -> Result<(), ProviderError> {
    check_path(path)?;
    sandbox
        .provider
        .client()
        .call(
            Method::DELETE,
            &sandbox.path(&format!("/files?path={}", encode_query(path))),
            None,
        )
        .await
        .map(|_| ())
        .map_err(|e| sandbox.provider.err(e))
}

/// Read the regular file at `path` in the guest.
pub async fn pull(sandbox: &IncusSandbox, path: &str) -> Result<Vec<u8>, ProviderError> {
    match pull_any(sandbox, path).await? {
        Pulled::File(bytes) => Ok(bytes),
        Pulled::Other(kind) => Err(ProviderError::InvalidSpec {
            field: "path",
            reason: format!("{path} is a {kind}, not a regular file"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_paths_must_be_absolute_without_dotdot() {
        assert!(check_path("/etc/hosts").is_ok());
        assert!(check_path("etc/hosts").is_err());
        assert!(check_path("/tmp/../etc/shadow").is_err());
    }
}
