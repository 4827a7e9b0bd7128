//! File push and pull through Incus's file API (works on stopped
//! containers too, which clone, import and templates rely on). A push
//! makes the missing directories above its file (root's, 0755), never
//! touching one that exists (Incus leaves an existing path as it is when
//! asked to make a directory there).
//!
//! The guest decides what lies at a path, so a pull looks before it reads:
//! a `HEAD` gives the type and size without opening the file. Directories
//! and symlinks are reported, never read. Incus reports FIFOs, devices and
//! `/proc` files as files of size 0, and a `GET` of a FIFO hangs until
//! its timeout, so a size-0 file is never opened: it reads as empty. A
//! file over the byte limit is refused before any byte moves, and the read
//! itself is a stream that stops at the limit (the file may grow between
//! the look and the read).

use std::time::Duration;

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
    let url = sandbox.path(&format!("/files?path={}", encode_query(path)));
    let client = sandbox.provider.client();
    let bytes = Bytes::copy_from_slice(contents);
    match client
        .send_bytes(Method::POST, &url, &headers, bytes.clone())
        .await
    {
        Ok(_) => Ok(()),
        // Incus answers 404 when a directory above the file is missing.
        Err(e) if e.is_not_found() => {
            make_parents(sandbox, path).await?;
            match client.send_bytes(Method::POST, &url, &headers, bytes).await {
                Ok(_) => Ok(()),
                Err(e) => Err(not_a_directory(sandbox, path)
                    .await
                    .unwrap_or_else(|| sandbox.provider.err(e))),
            }
        }
        Err(e) => Err(sandbox.provider.err(e)),
    }
}

/// The directory above `path` (`None` at the root).
fn parent(path: &str) -> Option<&str> {
    match path.trim_end_matches('/').rsplit_once('/') {
        Some(("", _)) | None => None,
        Some((dir, _)) => Some(dir),
    }
}

/// Make each missing directory above `path` (root's, 0755), the nearest
/// first: Incus answers 404 when a directory's own parent is missing, and
/// then that one is made first. Incus leaves whatever already exists at a
/// path it is asked to make a directory (a directory keeps its owner and
/// mode), so nothing that exists is touched and no request is spent
/// looking first; what is in the way shows when the file is written.
async fn make_parents(sandbox: &IncusSandbox, path: &str) -> Result<(), ProviderError> {
    let client = sandbox.provider.client();
    let headers = [
        ("X-Incus-uid", "0".to_owned()),
        ("X-Incus-gid", "0".to_owned()),
        ("X-Incus-mode", "0755".to_owned()),
        ("X-Incus-type", "directory".to_owned()),
    ];
    // Directories still to make, the deepest first; and those that
    // already answered 404 once (a second 404, after the one above was
    // made, means something other than a directory is in the way).
    let mut pending: Vec<&str> = parent(path).into_iter().collect();
    let mut refused: Vec<&str> = Vec::new();
    while let Some(dir) = pending.last().copied() {
        let url = sandbox.path(&format!("/files?path={}", encode_query(dir)));
        match client
            .send_bytes(Method::POST, &url, &headers, Bytes::new())
            .await
        {
            Ok(_) => {
                pending.pop();
            }
            Err(e) if e.is_not_found() && !refused.contains(&dir) => {
                refused.push(dir);
                match parent(dir) {
                    Some(up) => pending.push(up),
                    None => return Err(sandbox.provider.err(e)),
                }
            }
            Err(e) if e.is_not_found() => {
                return Err(not_a_directory(sandbox, path)
                    .await
                    .unwrap_or_else(|| sandbox.provider.err(e)));
            }
            Err(e) => return Err(sandbox.provider.err(e)),
        }
    }
    Ok(())
}

/// After a write failed although its directories were made: the first
/// path above `path` that is not a directory in the guest, as the error
/// to report (`None` when each one is a directory).
async fn not_a_directory(sandbox: &IncusSandbox, path: &str) -> Option<ProviderError> {
    let client = sandbox.provider.client();
    let parts: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let mut dir = String::new();
    for part in parts.iter().take(parts.len().saturating_sub(1)) {
        dir.push('/');
        dir.push_str(part);
        let url = sandbox.path(&format!("/files?path={}", encode_query(&dir)));
        let head = client.head(&url).await.ok()?;
        let kind = head
            .get("X-Incus-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("file");
        if kind != "directory" {
            return Some(ProviderError::InvalidSpec {
                field: "path",
                reason: format!(
                    "{} is a {kind} in the guest, not a directory",
                    corral_sandbox_core::text::Shown(&dir)
                ),
            });
        }
    }
    None
}

/// What is at a guest path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pulled {
    /// A regular file's contents.
    File(Vec<u8>),
    /// A symlink, directory or something else (by Incus's type name).
    Other(String),
}

/// How often a file's HEAD is asked again after Incus fails it (a 5xx),
/// and the pause before each new ask.
const HEAD_RETRIES: [Duration; 2] = [Duration::from_millis(100), Duration::from_millis(400)];

/// HEAD `url`, asked again on a 5xx: Incus answers a file's HEAD through a
/// file server it starts in the instance, and under many concurrent
/// creates that start fails now and then (a 5xx with no body, seen when
/// 100 creates ran beside other Incus work). A HEAD changes nothing, so
/// asking again is safe; a 4xx (no such file, not allowed) is final.
async fn head_settled(
    client: &crate::client::IncusClient,
    url: &str,
) -> Result<http::HeaderMap, crate::client::ClientError> {
    let mut pauses = HEAD_RETRIES.iter();
    loop {
        let answer = client.head(url).await;
        if let Err(crate::client::ClientError::Api { status, .. }) = &answer
            && *status >= 500
            && let Some(pause) = pauses.next()
        {
            tokio::time::sleep(*pause).await;
            continue;
        }
        return answer;
    }
}

/// Read `path` in the guest, whatever it is; a regular file of more than
/// `max` bytes is refused.
pub async fn pull_any(
    sandbox: &IncusSandbox,
    path: &str,
    max: u64,
) -> Result<Pulled, ProviderError> {
    check_path(path)?;
    let client = sandbox.provider.client();
    let url = sandbox.path(&format!("/files?path={}", encode_query(path)));
    let not_found = |e| {
        sandbox
            .provider
            .not_found_as(e, "file", &format!("{}:{path}", sandbox.name))
    };
    let head = head_settled(client, &url).await.map_err(not_found)?;
    let kind = head
        .get("X-Incus-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("file")
        .to_owned();
    if kind != "file" {
        return Ok(Pulled::Other(kind));
    }
    let size = head
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    if size == 0 {
        // Empty, or a FIFO, device or /proc file: never opened.
        return Ok(Pulled::File(Vec::new()));
    }
    let too_large = |size: String| ProviderError::InvalidSpec {
        field: "path",
        reason: format!(
            "{} is {size} bytes, over the {max}-byte limit on what pull brings to the host",
            corral_sandbox_core::text::Shown(path)
        ),
    };
    if size > max {
        return Err(too_large(size.to_string()));
    }
    let (_, body, truncated) = client.get_capped(&url, max).await.map_err(not_found)?;
    if truncated {
        return Err(too_large(format!("more than {max}")));
    }
    Ok(Pulled::File(body.to_vec()))
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

/// Read the regular file at `path` in the guest, within the provider's
/// `max_pull_bytes`.
pub async fn pull(sandbox: &IncusSandbox, path: &str) -> Result<Vec<u8>, ProviderError> {
    let max = sandbox.provider.config().max_pull_bytes;
    match pull_any(sandbox, path, max).await? {
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
    fn the_parent_of_a_guest_path() {
        assert_eq!(parent("/home/agent/AGENTS.md"), Some("/home/agent"));
        assert_eq!(parent("/home/agent/"), Some("/home"));
        assert_eq!(parent("/home"), None);
        assert_eq!(parent("/"), None);
    }

    #[test]
    fn guest_paths_must_be_absolute_without_dotdot() {
        assert!(check_path("/etc/hosts").is_ok());
        assert!(check_path("etc/hosts").is_err());
        assert!(check_path("/tmp/../etc/shadow").is_err());
    }

    /// Incus failing a HEAD (a 5xx) is asked again and then settles; a 4xx
    /// is final at once; three 5xx in a row give the last, its status named.
    #[tokio::test]
    async fn a_head_incus_fails_is_asked_again_and_a_refusal_is_not() {
        use std::sync::Arc;

        use crate::client::IncusClient;
        use crate::client::fake::FakeDaemon;

        let url = "/1.0/instances/x/files?path=/etc/cloud/cloud.cfg";
        let on = |daemon: &FakeDaemon| {
            IncusClient::new(Arc::new(daemon.clone()), "p", Duration::from_secs(5))
        };
        let asked = |daemon: &FakeDaemon| daemon.requests.lock().unwrap().len();

        let flaky = FakeDaemon::new(&[(500, ""), (200, "")]);
        assert!(head_settled(&on(&flaky), url).await.is_ok());
        assert_eq!(asked(&flaky), 2);

        let missing = r#"{"type":"error","error":"not found","error_code":404}"#;
        let gone = FakeDaemon::new(&[(404, missing), (200, "")]);
        assert!(head_settled(&on(&gone), url).await.is_err());
        assert_eq!(asked(&gone), 1);

        let down = FakeDaemon::new(&[(500, ""), (503, ""), (500, "")]);
        let err = head_settled(&on(&down), url).await.unwrap_err();
        assert_eq!(asked(&down), 3);
        assert!(err.to_string().contains("500"), "{err}");
    }
}
