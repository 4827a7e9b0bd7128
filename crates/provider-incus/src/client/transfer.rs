//! Large transfers: backups streamed to disk and uploaded from disk, never
//! held in memory whole.

use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use http::header::CONTENT_TYPE;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Body, ClientError, IncusClient, Operation, full};

impl IncusClient {
    /// Stream the body of GET `path` into `dest` (created, mode 0600: a
    /// backup holds the whole disk, credentials included).
    pub async fn download(
        &self,
        path: &str,
        dest: &Path,
        timeout: Duration,
    ) -> Result<u64, ClientError> {
        let what = format!("GET {path}");
        let io = |context: String| move |source| ClientError::Io { context, source };
        // Only a file this download created is removed when it fails: one
        // that appeared at `dest` first is someone else's.
        let created = std::sync::atomic::AtomicBool::new(false);
        let transfer = async {
            let response = self
                .exchange(Method::GET, path, full(Bytes::new()), &[], timeout)
                .await?;
            if !response.status().is_success() {
                let (status, _, body) = Self::read_body(response, &what, self.timeout).await?;
                return Err(Self::envelope(&what, status, &body).err().unwrap_or(
                    ClientError::Api {
                        what: what.clone(),
                        status: status.as_u16(),
                        message: status.to_string(),
                    },
                ));
            }
            let mut file = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(dest)
                .await
                .map_err(io(format!("cannot create {}", dest.display())))?;
            created.store(true, std::sync::atomic::Ordering::Relaxed);
            let mut body = response.into_body();
            let mut written = 0u64;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|source| ClientError::Http {
                    what: what.clone(),
                    source,
                })?;
                if let Ok(data) = frame.into_data() {
                    file.write_all(&data)
                        .await
                        .map_err(io(format!("cannot write {}", dest.display())))?;
                    written += data.len() as u64;
                }
            }
            file.sync_all()
                .await
                .map_err(io(format!("cannot flush {}", dest.display())))?;
            Ok(written)
        };
        let result = tokio::time::timeout(timeout, transfer)
            .await
            .map_err(|_| ClientError::Timeout {
                what: what.clone(),
                after: timeout,
            })
            .and_then(|r| r);
        if result.is_err() && created.load(std::sync::atomic::Ordering::Relaxed) {
            let _ = tokio::fs::remove_file(dest).await;
        }
        result
    }

    /// Stream `source` as the body of POST `path` (with `headers`), then
    /// wait for the operation it starts; the whole exchange within `timeout`.
    pub async fn upload(
        &self,
        path: &str,
        headers: &[(&str, String)],
        source: &Path,
        timeout: Duration,
    ) -> Result<Operation, ClientError> {
        let what = format!("POST {path}");
        let file = tokio::fs::File::open(source)
            .await
            .map_err(|e| ClientError::Io {
                context: format!("cannot open {}", source.display()),
                source: e,
            })?;
        let len = file
            .metadata()
            .await
            .map_err(|e| ClientError::Io {
                context: format!("cannot stat {}", source.display()),
                source: e,
            })?
            .len();
        let chunks = futures::stream::unfold(file, |mut file| async move {
            let mut buf = vec![0u8; 256 * 1024];
            match file.read(&mut buf).await {
                Ok(0) => None,
                Ok(n) => {
                    buf.truncate(n);
                    Some((Ok(Frame::data(Bytes::from(buf))), file))
                }
                Err(e) => Some((Err(e), file)),
            }
        });
        let body: Body = BodyExt::boxed(StreamBody::new(chunks));
        let mut all_headers = headers.to_vec();
        all_headers.push((CONTENT_TYPE.as_str(), "application/octet-stream".to_owned()));
        all_headers.push((http::header::CONTENT_LENGTH.as_str(), len.to_string()));
        let started = tokio::time::Instant::now();
        let response = self
            .exchange(Method::POST, path, body, &all_headers, timeout)
            .await?;
        let (status, _, bytes) = Self::read_body(response, &what, timeout).await?;
        let env = Self::envelope(&what, status, &bytes)?;
        let left = timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        self.finish(&what, env, left).await
    }
}
