//! Where corral runs (host OS) and what it runs sandboxes on (kind).

mod host_os;
mod kind;

pub use host_os::HostOs;
pub use kind::SandboxKind;
