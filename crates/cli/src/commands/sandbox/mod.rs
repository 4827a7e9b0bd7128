//! The sandbox verbs: `new`, `ls`, `info`, `exec`, `start`, `stop`,
//! `restart`, `rm`, `verify`. Each parses, calls the lifecycle service (start gate and
//! ownership checks included) and renders its answer.

mod context;
mod exec;
mod info;
mod ls;
mod many;
mod new;
mod render;
mod restart;
mod rm;
mod start;
mod stop;
mod verify;

pub use context::store;
pub use exec::run as exec;
pub use info::run as info;
pub use ls::run as ls;
pub use new::run as new;
pub use restart::run as restart;
pub use rm::run as rm;
pub use start::run as start;
pub use stop::run as stop;
pub use verify::run as verify;
