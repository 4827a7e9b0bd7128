use std::time::Duration;

use super::{Operation, SandboxState};
use crate::platform::SandboxKind;

/// What went wrong in a provider. Every variant says what failed and, where
/// there is one, what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The backend cannot do this operation at all.
    #[error("{kind} sandboxes do not support {operation}")]
    Unsupported {
        /// The backend.
        kind: SandboxKind,
        /// The refused operation.
        operation: Operation,
    },
    /// No such sandbox (or snapshot).
    #[error("{what} `{}` does not exist", crate::text::Shown(name))]
    NotFound {
        /// "sandbox", "snapshot", "image"…
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// The image to create from is not where the backend looks for it.
    #[error(
        "image `{}` is not in {}; {}",
        crate::text::Shown(image),
        crate::text::Shown(place),
        crate::text::Shown(remedy)
    )]
    ImageMissing {
        /// The image (alias or fingerprint) asked for.
        image: String,
        /// Where the backend looked, e.g. "Incus project `corral`".
        place: String,
        /// How to get it there, or which image to name instead.
        remedy: String,
    },
    /// The name is already taken.
    #[error(
        "{what} `{}` already exists; choose another name or remove it first",
        crate::text::Shown(name)
    )]
    AlreadyExists {
        /// "sandbox", "snapshot"…
        what: &'static str,
        /// Its name.
        name: String,
    },
    /// The instance exists but carries no (or a foreign) corral ownership stamp.
    #[error(
        "`{name}` was not created by corral ({reason}); corral refuses to touch it — use the backend's own tools"
    )]
    NotOwned {
        /// The instance.
        name: String,
        /// What is missing or wrong in the stamp.
        reason: String,
    },
    /// The operation is not allowed in the sandbox's current state.
    #[error("cannot {operation} `{name}` while it is {state}: {hint}")]
    InvalidState {
        /// The sandbox.
        name: String,
        /// Its state.
        state: SandboxState,
        /// What was attempted.
        operation: Operation,
        /// What to do instead.
        hint: String,
    },
    /// The instance's devices or config differ from the one-NIC topology corral built.
    #[error("`{name}` does not have the topology corral gave it: {}", differences.join("; "))]
    Topology {
        /// The instance.
        name: String,
        /// Each difference, in words.
        differences: Vec<String>,
    },
    /// The spec asks for something invalid.
    #[error("invalid sandbox spec: {field}: {}", crate::text::Shown(reason))]
    InvalidSpec {
        /// The offending field.
        field: &'static str,
        /// What is wrong and what was expected.
        reason: String,
    },
    /// The spec names a profile the configuration does not have.
    #[error("profile `{}` is not configured; configured profiles: {}", crate::text::Shown(profile), configured.join(", "))]
    UnknownProfile {
        /// The missing profile.
        profile: String,
        /// The profiles that exist.
        configured: Vec<String>,
    },
    /// A mount source is not allowed.
    #[error(
        "mount `{}` refused: {}",
        crate::text::Shown(source_path),
        crate::text::Shown(reason)
    )]
    Mount {
        /// The host path.
        source_path: String,
        /// Why.
        reason: String,
    },
    /// The backend answered with an error.
    #[error("{kind} refused {operation}: {message}")]
    Backend {
        /// The backend.
        kind: SandboxKind,
        /// What was attempted.
        operation: String,
        /// The backend's own message.
        message: String,
        /// Backend status code (HTTP status, exit code), when there is one.
        code: Option<i64>,
    },
    /// The backend's answer could not be understood.
    #[error("{kind} answered {operation} with something corral cannot read: {detail}")]
    Malformed {
        /// The backend.
        kind: SandboxKind,
        /// What was attempted.
        operation: String,
        /// What was wrong with the answer.
        detail: String,
    },
    /// The operation did not finish in time.
    #[error("{operation} timed out after {after:?}")]
    Timeout {
        /// What was attempted.
        operation: String,
        /// The bound that was exceeded.
        after: Duration,
    },
    /// The operation runs the backend's own client, which reaches only a
    /// local daemon; this backend is remote.
    #[error(
        "{operation} runs the backend's own client on this host, but corral reaches {kind} at {endpoint}, whose client trust corral does not hold; run it on that host instead"
    )]
    LocalOnly {
        /// The backend.
        kind: SandboxKind,
        /// What was attempted (e.g. `corral shell`).
        operation: String,
        /// Where the backend is.
        endpoint: String,
    },
    /// The backend could not be reached or a local resource failed.
    #[error("{context}")]
    Io {
        /// What corral was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
