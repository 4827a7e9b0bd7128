//! Incus's response envelope and background operations.

use serde::Deserialize;
use serde_json::Value;

/// Every Incus answer is wrapped in this envelope.
#[derive(Debug, Clone, Deserialize)]
pub struct Envelope {
    /// "sync", "async" or "error".
    #[serde(rename = "type")]
    pub kind: String,
    /// For "async": the operation's URL.
    #[serde(default)]
    pub operation: String,
    /// For "error": Incus's code (an HTTP status).
    #[serde(default)]
    pub error_code: u16,
    /// For "error": Incus's message.
    #[serde(default)]
    pub error: String,
    /// The payload.
    #[serde(default)]
    pub metadata: Value,
}

/// A background operation as Incus reports it.
#[derive(Debug, Clone, Deserialize)]
pub struct Operation {
    /// Its id.
    pub id: String,
    /// "Running", "Success", "Failure", "Cancelled"…
    pub status: String,
    /// The error message when it failed.
    #[serde(default)]
    pub err: String,
    /// Operation-specific results (exec's return code and output paths…).
    #[serde(default)]
    pub metadata: Option<Value>,
    /// Whether a DELETE cancels it.
    #[serde(default)]
    pub may_cancel: bool,
}

impl Operation {
    /// Where the operation has got to.
    pub fn state(&self) -> OperationState {
        match self.status.as_str() {
            "Success" => OperationState::Succeeded,
            "Failure" | "Cancelled" => OperationState::Failed,
            _ => OperationState::Running,
        }
    }
}

/// The three outcomes corral distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OperationState {
    /// Still going (a wait that came back early).
    Running,
    /// Done, and it worked.
    Succeeded,
    /// Done, and it did not.
    Failed,
}

/// The id at the end of an operation URL (`/1.0/operations/<id>`).
pub fn operation_id(url: &str) -> Option<&str> {
    let path = url.split('?').next().unwrap_or(url);
    path.strip_prefix("/1.0/operations/")
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_come_from_the_url() {
        assert_eq!(operation_id("/1.0/operations/abc-1"), Some("abc-1"));
        assert_eq!(
            operation_id("/1.0/operations/abc-1?project=corral"),
            Some("abc-1")
        );
        assert_eq!(operation_id("/1.0/instances/x"), None);
        assert_eq!(operation_id("/1.0/operations/"), None);
    }

    #[test]
    fn states_read_from_status() {
        let op: Operation = serde_json::from_value(serde_json::json!({
            "id": "x", "status": "Failure", "err": "boom", "may_cancel": false
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(op.state(), OperationState::Failed);
        assert_eq!(op.err, "boom");
    }
}
