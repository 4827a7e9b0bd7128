//! What a sandbox operation of the service can fail with.

use std::time::Duration;

use corral_sandbox_core::sandbox::ProviderError;

use crate::gate::GateError;
use crate::hooks::HookError;

/// A sandbox operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The provider refused or failed (not found, not corral's, bad spec…).
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The start gate refused (the profile's enforcement is incomplete) or
    /// could not look; boxed, as it carries every missing item.
    #[error(transparent)]
    Gate(Box<GateError>),
    /// A hook refused the sandbox before it was handed out.
    #[error(transparent)]
    Hook(#[from] HookError),
    /// The sandbox did not become ready in time.
    #[error("sandbox `{name}` started but is not ready after {waited:?}: {what}")]
    NotReady {
        /// The sandbox.
        name: String,
        /// How long the service waited.
        waited: Duration,
        /// What it was still waiting for.
        what: String,
    },
    /// The per-sandbox verification could not run.
    #[error("verification could not run")]
    Verify(#[source] Box<crate::verify::VerifyError>),
    /// A template could not be found or loaded.
    #[error(transparent)]
    Template(#[from] crate::templates::TemplateError),
    /// A template's user-data could not be written.
    #[error(transparent)]
    Render(#[from] crate::templates::render::RenderError),
    /// The escape hatch refused its arguments.
    #[error(transparent)]
    Hatch(#[from] crate::hatch::HatchRefusal),
    /// The sandbox's port could not be bound or unbound on the host.
    #[error(transparent)]
    Binding(#[from] crate::ports::BindingError),
    /// The sandbox is gone, but its port binding could not be removed.
    #[error(
        "sandbox `{name}` was deleted, but its port binding could not be removed (its address stays taken; nothing can use the binding without its MAC and port)"
    )]
    Unbind {
        /// The sandbox.
        name: String,
        /// The cause.
        #[source]
        source: Box<ServiceError>,
    },
    /// The blocking worker of a host check failed.
    #[error("the start gate's worker failed: {0}")]
    Worker(#[source] tokio::task::JoinError),
    /// Profiled work on an Incus cluster may not go to the member asked
    /// for (drained, unattested) or to any member (docs/cluster.md).
    #[error(transparent)]
    Placement(#[from] crate::cluster::PlacementRefused),
    /// Profiled work placed on another cluster member: its start gate,
    /// port binding, DHCP reservation and canary belong on that member's
    /// kernel, so this corral does none of them (docs/cluster.md).
    #[error(
        "sandbox `{sandbox}` is placed on cluster member {member}, and this corral runs on {local}: its start gate, port binding, DHCP reservation and canary must run on {member}'s kernel, so nothing was done; do it through {member}'s corral, or through a corrald started with `--cluster`, which asks {member}'s corrald to"
    )]
    OnAnotherMember {
        /// The sandbox.
        sandbox: String,
        /// The member it is placed on.
        member: String,
        /// The member this corral runs on.
        local: String,
    },
}

impl From<GateError> for ServiceError {
    fn from(e: GateError) -> Self {
        ServiceError::Gate(Box::new(e))
    }
}

impl ServiceError {
    /// The start gate's refusal, when that is what this is.
    pub fn refusal(&self) -> Option<&crate::gate::Refusal> {
        match self {
            ServiceError::Gate(g) => match g.as_ref() {
                GateError::Refused(r) => Some(r),
                _ => None,
            },
            _ => None,
        }
    }
}

/// An error and every cause, outermost first, joined by `: ` (the
/// message of the one error shape).
pub use crate::shapes::chain;
