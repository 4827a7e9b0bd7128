//! Where corral runs (host OS), what it runs sandboxes on (kind), and the
//! matrix between them: support, isolation, egress enforcement, selection.

mod enforcement;
mod host_os;
mod kind;
mod markdown;
mod matrix;
mod select;

pub use enforcement::{Classification, Enforcement, EnforcementSite, Isolation};
pub use host_os::HostOs;
pub use kind::SandboxKind;
pub use markdown::render_markdown;
pub use matrix::{Cell, EgressClass, MatrixEntry, Refusal, Support, cell, egress_class, entries};
pub use select::{SelectError, Selection, select_provider};
