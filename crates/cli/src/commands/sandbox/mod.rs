//! The sandbox verbs: `new`, `ls`, `info`, `exec`, `start`, `stop`,
//! `restart`, `rm`, `snapshot`, `restore`, `rename`, `export`, `import`,
//! `push`, `pull`, `shell`, `verify`. Each parses, calls the lifecycle service (start gate and
//! ownership checks included) and renders its answer.

pub(crate) mod confirm;
mod context;
mod copies;
mod exec;
mod files;
mod hatch;
mod info;
mod ls;
mod many;
mod new;
mod rename;
mod render;
mod restart;
mod rm;
mod shell;
mod snapshots;
mod start;
mod stop;
mod verify;

pub use context::{fail, service, store, verified_service};
pub use copies::{export, import};
pub use exec::run as exec;
pub use files::{pull, push};
pub use hatch::run as incus;
pub use info::run as info;
pub use ls::run as ls;
pub use new::run as new;
pub use rename::run as rename;
pub use restart::run as restart;
pub use rm::run as rm;
pub use shell::run as shell;
pub use snapshots::{restore, snapshot};
pub use start::run as start;
pub use stop::run as stop;
pub use verify::run as verify;
