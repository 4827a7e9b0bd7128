//! Reading `multipass … --format json` answers.
//!
//! Only the fields corral uses are read; unknown fields are ignored so a
//! newer Multipass does not break parsing, but a missing required field or
//! a non-JSON answer is a [`ParseError`] (mapped to `ProviderError::Malformed`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use corral_sandbox_core::sandbox::{SandboxState, SnapshotInfo};
use serde::Deserialize;

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// What `info` and `list` say about one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceInfo {
    /// Instance name.
    pub name: String,
    /// Lifecycle state.
    pub state: SandboxState,
    /// IPv4 addresses Multipass reports.
    pub addresses: Vec<IpAddr>,
}

#[derive(Deserialize)]
struct RawInstance {
    #[serde(default)]
    name: Option<String>,
    state: String,
    #[serde(default)]
    ipv4: Vec<String>,
}

#[derive(Deserialize)]
struct InfoDoc {
    info: BTreeMap<String, RawInstance>,
}

#[derive(Deserialize)]
struct ListDoc {
    list: Vec<RawInstance>,
}

#[derive(Deserialize)]
struct SnapshotsDoc {
    info: BTreeMap<String, BTreeMap<String, RawSnapshot>>,
}

#[derive(Deserialize)]
struct RawSnapshot {
    #[serde(default)]
    created: Option<String>,
}

/// Map Multipass's state words onto corral's states.
pub fn state(word: &str) -> SandboxState {
    match word {
        "Running" => SandboxState::Running,
        "Stopped" => SandboxState::Stopped,
        "Suspended" => SandboxState::Frozen,
        "Starting" | "Restarting" | "Delayed Shutdown" | "Suspending" => {
            SandboxState::Transitioning
        }
        _ => SandboxState::Unknown,
    }
}

fn convert(name: String, raw: RawInstance) -> Result<InstanceInfo, ParseError> {
    let addresses = raw
        .ipv4
        .iter()
        .map(|a| {
            a.parse()
                .map_err(|_| ParseError(format!("`{a}` in ipv4 of `{name}` is not an address")))
        })
        .collect::<Result<_, _>>()?;
    Ok(InstanceInfo {
        state: state(&raw.state),
        name,
        addresses,
    })
}

fn decode<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ParseError> {
    serde_json::from_slice(bytes).map_err(|e| ParseError(format!("invalid JSON: {e}")))
}

/// Parse `multipass info VM --format json` and return `vm`'s entry.
pub fn parse_info(bytes: &[u8], vm: &str) -> Result<InstanceInfo, ParseError> {
    let mut doc: InfoDoc = decode(bytes)?;
    let raw = doc
        .info
        .remove(vm)
        .ok_or_else(|| ParseError(format!("the answer has no entry for `{vm}`")))?;
    convert(vm.to_owned(), raw)
}

/// Parse `multipass list --format json`.
pub fn parse_list(bytes: &[u8]) -> Result<Vec<InstanceInfo>, ParseError> {
    let doc: ListDoc = decode(bytes)?;
    doc.list
        .into_iter()
        .map(|mut raw| {
            let name = raw
                .name
                .take()
                .ok_or_else(|| ParseError("a list entry has no name".to_owned()))?;
            convert(name, raw)
        })
        .collect()
}

/// Parse `multipass snapshots --format json` and return `vm`'s snapshots.
pub fn parse_snapshots(bytes: &[u8], vm: &str) -> Result<Vec<SnapshotInfo>, ParseError> {
    let mut doc: SnapshotsDoc = decode(bytes)?;
    Ok(doc
        .info
        .remove(vm)
        .unwrap_or_default()
        .into_iter()
        .map(|(name, raw)| SnapshotInfo {
            name,
            created: raw.created,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = r#"{
        "errors": [],
        "info": {
            "corral-a": {
                "cpu_count": "2",
                "image_release": "24.04 LTS",
                "ipv4": ["10.20.30.4", "10.99.5.23"],
                "state": "Running",
                "snapshot_count": "0"
            }
        }
    }"#;

    #[test]
    fn info() {
        let i = parse_info(INFO.as_bytes(), "corral-a").unwrap();
        assert_eq!(i.state, SandboxState::Running);
        assert_eq!(i.addresses.len(), 2);
        assert_eq!(i.addresses[1].to_string(), "10.99.5.23");
        assert!(parse_info(INFO.as_bytes(), "other").is_err());
    }

    #[test]
    fn list() {
        let doc = r#"{"list":[{"name":"corral-a","state":"Stopped","ipv4":[],"release":"x"},
                     {"name":"mine","state":"Suspended","ipv4":["10.0.0.1"]}]}"#;
        let l = parse_list(doc.as_bytes()).unwrap();
        assert_eq!(l[0].name, "corral-a");
        assert_eq!(l[0].state, SandboxState::Stopped);
        assert_eq!(l[1].state, SandboxState::Frozen);
    }

    #[test]
    fn snapshots() {
        let doc = r#"{"errors":[],"info":{"corral-a":{"s1":{"comment":"","parent":""},"s2":{"parent":"s1","created":"2026-01-01T00:00:00Z"}},"x":{"s9":{}}}}"#;
        let s = parse_snapshots(doc.as_bytes(), "corral-a").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].name, "s2");
        assert_eq!(s[1].created.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert!(parse_snapshots(doc.as_bytes(), "none").unwrap().is_empty());
    }

    #[test]
    fn malformed() {
        for bad in [
            "",
            "not json",
            "{}",
            r#"{"info":[]}"#,
            r#"{"list":[{"state":"Running"}]}"#,
        ] {
            assert!(
                parse_info(bad.as_bytes(), "a").is_err() || parse_list(bad.as_bytes()).is_err(),
                "{bad}"
            );
        }
        let bad_ip = r#"{"info":{"a":{"state":"Running","ipv4":["nope"]}}}"#;
        assert!(parse_info(bad_ip.as_bytes(), "a").is_err());
        assert_eq!(state("Frobnicating"), SandboxState::Unknown);
    }
}
