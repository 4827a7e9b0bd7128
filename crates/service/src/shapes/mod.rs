//! The JSON objects both front-ends answer with: `corral … --json` prints
//! them and corrald sends them, from these types, so a script reads one
//! shape whichever it talks to (docs/json-schema.md lists every field).

mod error;
mod gate;
mod listings;
mod sandbox;

pub use error::{ErrorBody, ErrorDetail, chain, denied, error_code, failure_code, provider_code};
pub use gate::{GATE, GateView, KindStanding, standings};
pub use listings::{EVENTS, EventList, TEMPLATES, TemplateList};
pub use sandbox::{
    ActionReport, ActionResult, Lifetime, SANDBOX_ACTION, SANDBOX_INFO, SANDBOX_LIST, SANDBOX_NEW,
    SANDBOX_RENAME, SANDBOX_RESTORE, SANDBOX_SNAPSHOT, SandboxDetail, SandboxList, SandboxNew,
    SandboxRename, SandboxRestore, SandboxSnapshot,
};
