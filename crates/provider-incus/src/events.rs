//! Incus's lifecycle event stream (`GET /1.0/events?type=lifecycle`, a
//! WebSocket of JSON text messages), reduced to what corral watches: an
//! instance of a project started or restarted. Measured on Incus 6
//! (`incus monitor --type=lifecycle --format json`): each message is
//! `{"type":"lifecycle","project":P,"timestamp":T,"metadata":{"action":
//! "instance-started"|"instance-restarted"|…,"name":N,"project":P,
//! "source":"/1.0/instances/N?project=P","requestor":{…}}}`.

use futures::StreamExt;
use serde::Deserialize;
use tokio_tungstenite::tungstenite::Message;

use crate::client::{ClientError, IncusClient, IncusSocket, encode_query};

/// An instance began running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceStarted {
    /// Its project.
    pub project: String,
    /// The instance.
    pub name: String,
    /// True for a restart (`instance-restarted`), false for a start.
    pub restarted: bool,
    /// When Incus says it happened (RFC 3339), for messages.
    pub timestamp: String,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    project: String,
    #[serde(default)]
    timestamp: String,
    #[serde(default)]
    metadata: RawMeta,
}

#[derive(Deserialize, Default)]
struct RawMeta {
    #[serde(default)]
    action: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    project: String,
}

/// The start in one lifecycle message; `None` for any other message.
pub fn parse_start(text: &str) -> Option<InstanceStarted> {
    let raw: Raw = serde_json::from_str(text).ok()?;
    if raw.kind != "lifecycle" {
        return None;
    }
    let restarted = match raw.metadata.action.as_str() {
        "instance-started" => false,
        "instance-restarted" => true,
        _ => return None,
    };
    if raw.metadata.name.is_empty() {
        return None;
    }
    let project = if raw.metadata.project.is_empty() {
        raw.project
    } else {
        raw.metadata.project
    };
    Some(InstanceStarted {
        project,
        name: raw.metadata.name,
        restarted,
        timestamp: raw.timestamp,
    })
}

/// The lifecycle events of one project.
pub struct LifecycleStream {
    socket: IncusSocket,
    project: String,
}

impl std::fmt::Debug for LifecycleStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LifecycleStream")
            .field("project", &self.project)
            .finish_non_exhaustive()
    }
}

impl LifecycleStream {
    /// Subscribe to `project`'s lifecycle events on `client`'s daemon.
    pub async fn open(client: &IncusClient, project: &str) -> Result<Self, ClientError> {
        let path = format!(
            "/1.0/events?type=lifecycle&project={}",
            encode_query(project)
        );
        Ok(Self {
            socket: client.websocket(&path).await?,
            project: project.to_owned(),
        })
    }

    /// The project watched.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The next start in the stream; `None` once the daemon closed it (it
    /// restarted or went away: open a new one).
    pub async fn next_start(&mut self) -> Option<InstanceStarted> {
        while let Some(msg) = self.socket.next().await {
            let text = match msg {
                Ok(Message::Text(t)) => t,
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => continue,
            };
            if let Some(start) = parse_start(text.as_str()) {
                return Some(start);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_and_restarts_are_kept_everything_else_dropped() {
        let started = r#"{"location":"none","metadata":{"action":"instance-started","name":"d-probe-ev","project":"corral","requestor":{"address":"@","protocol":"unix","username":"root"},"source":"/1.0/instances/d-probe-ev?project=corral"},"project":"corral","timestamp":"2026-12-01T21:03:42.548224485Z","type":"lifecycle"}"#;
        assert_eq!(
            parse_start(started),
            Some(InstanceStarted {
                project: "corral".into(),
                name: "d-probe-ev".into(),
                restarted: false,
                timestamp: "2026-12-01T21:03:42.548224485Z".into(),
            })
        );
        let restarted = started.replace("instance-started", "instance-restarted");
        assert!(parse_start(&restarted).unwrap().restarted);
        for other in [
            started.replace("instance-started", "instance-stopped"),
            started.replace("\"lifecycle\"", "\"logging\""),
            "not json".to_owned(),
            r#"{"type":"lifecycle","metadata":{"action":"instance-started"}}"#.to_owned(),
        ] {
            assert_eq!(parse_start(&other), None, "{other}");
        }
    }
}
