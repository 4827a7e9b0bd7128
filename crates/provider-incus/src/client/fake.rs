//! A scripted daemon for unit tests: each connection gets the next canned
//! answer, and every request line is recorded.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::error::ClientError;
use super::transport::{BoxStream, Connector};

/// Answers requests from a script, one per connection.
#[derive(Debug, Clone, Default)]
pub struct FakeDaemon {
    answers: Arc<Mutex<VecDeque<(u16, String)>>>,
    /// Request lines seen (`GET /1.0?project=x HTTP/1.1`).
    pub requests: Arc<Mutex<Vec<String>>>,
}

impl FakeDaemon {
    /// A daemon that will answer with `answers` (status, JSON body), in order.
    pub fn new(answers: &[(u16, &str)]) -> Self {
        Self {
            answers: Arc::new(Mutex::new(
                answers.iter().map(|(s, b)| (*s, (*b).to_owned())).collect(),
            )),
            requests: Arc::default(),
        }
    }
}

#[async_trait]
impl Connector for FakeDaemon {
    async fn connect(&self) -> Result<BoxStream, ClientError> {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let answer = self
            .answers
            .lock()
            .map_err(|_| ClientError::Connect {
                endpoint: "fake".into(),
                source: std::io::Error::other("poisoned"),
            })?
            .pop_front();
        let requests = Arc::clone(&self.requests);
        tokio::spawn(async move {
            let mut server = theirs;
            let mut buf = vec![0u8; 64 * 1024];
            let Ok(n) = server.read(&mut buf).await else {
                return;
            };
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            if let (Some(line), Ok(mut seen)) = (head.lines().next(), requests.lock()) {
                seen.push(line.to_owned());
            }
            let (status, body) = answer.unwrap_or((
                500,
                r#"{"type":"error","error":"script exhausted","error_code":500}"#.into(),
            ));
            let response = format!(
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = server.write_all(response.as_bytes()).await;
            let _ = server.shutdown().await;
        });
        Ok(Box::pin(ours))
    }

    fn authority(&self) -> &str {
        "fake"
    }

    fn endpoint(&self) -> String {
        "fake".into()
    }
}
