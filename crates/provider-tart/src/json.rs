//! Reading `tart list --format json`.

use corral_sandbox_core::sandbox::SandboxState;
use serde::Deserialize;

/// Why an answer could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// One VM as `tart list` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmEntry {
    /// VM name.
    pub name: String,
    /// Lifecycle state.
    pub state: SandboxState,
}

#[derive(Deserialize)]
struct Raw {
    #[serde(rename = "Name")]
    name: String,
    #[serde(rename = "Running", default)]
    running: Option<bool>,
    #[serde(rename = "State", default)]
    state: Option<String>,
}

fn state(raw: &Raw) -> SandboxState {
    match (raw.state.as_deref(), raw.running) {
        (Some("running"), _) => SandboxState::Running,
        (Some("stopped"), _) => SandboxState::Stopped,
        (Some("suspended"), _) => SandboxState::Frozen,
        (Some(_), _) => SandboxState::Unknown,
        (None, Some(true)) => SandboxState::Running,
        (None, Some(false)) => SandboxState::Stopped,
        (None, None) => SandboxState::Unknown,
    }
}

/// Parse `tart list --format json`.
pub fn parse_list(bytes: &[u8]) -> Result<Vec<VmEntry>, ParseError> {
    let raw: Vec<Raw> =
        serde_json::from_slice(bytes).map_err(|e| ParseError(format!("invalid JSON: {e}")))?;
    Ok(raw
        .iter()
        .map(|r| VmEntry {
            name: r.name.clone(),
            state: state(r),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list() {
        let doc = r#"[
          {"Source":"local","Name":"corral-a","Disk":50,"Size":21,"Accessed":"x","Running":true,"State":"running"},
          {"Source":"local","Name":"corral-b","Running":false},
          {"Source":"local","Name":"c","State":"suspended"},
          {"Name":"d","State":"weird"}
        ]"#;
        let l = parse_list(doc.as_bytes()).unwrap();
        assert_eq!(l[0].state, SandboxState::Running);
        assert_eq!(l[1].state, SandboxState::Stopped);
        assert_eq!(l[2].state, SandboxState::Frozen);
        assert_eq!(l[3].state, SandboxState::Unknown);
    }

    #[test]
    fn malformed() {
        for bad in ["", "{}", "[{\"Running\":true}]", "[1]", "nope"] {
            assert!(parse_list(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
