//! The sandbox trait every provider implements, and its types.

mod error;
mod exec;
mod provider;
mod site;
mod spec;
mod state;
mod streams;

pub use error::ProviderError;
pub use exec::{BackendClient, ExecOutput, ExecRequest, ExecUser, TerminalCommand, TerminalSize};
pub use provider::{Capabilities, Made, Operation, Sandbox, SandboxProvider, StopOptions};
pub use site::ProbeSite;
pub use spec::{
    Attachment, BoundNic, InstanceType, MountSpec, NetworkAttachment, Resources, SandboxInfo,
    SandboxSpec, SnapshotInfo,
};
pub use state::SandboxState;
pub use streams::{BufferSource, ByteSink, ByteSource, ExecStreams, read_all};
