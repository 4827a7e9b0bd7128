//! `corral-service`: the lifecycle both front-ends (`corral` and `corrald`)
//! call, so neither holds policy — they parse, call and render.
//!
//! - [`config`]: which configuration to load (sandbox-core's rule) and
//!   loading it;
//! - [`state_dir`]: the one rule for where host state lives, `--netns`
//!   included; [`Settings`] bundles configuration, namespace and that
//!   directory;
//! - [`host`]: plan, apply (sysctls → nftables → bridges → read-back →
//!   record → gateways), verify, status, refresh, teardown;
//! - [`gate`]: the start gate — the live enforcement of one profile read
//!   back and compared with what was applied, before any sandbox on it is
//!   created or started;
//! - [`ports`]: the port binding of each sandbox on a local corral bridge
//!   (bound before it is created, unbound when it is deleted), and the
//!   sweep that quarantines ports nobody bound;
//! - [`provider`]: provider selection through the platform matrix;
//! - [`sandboxes`]: create (template → gate → bind → create → start → ready →
//!   template → hooks), clone, start, stop, restart, delete, list, info,
//!   exec, snapshots and restore, rename, export and import, file push and
//!   pull, shell;
//! - [`hatch`]: what `corral incus NAME -- ARGS…` may run (another
//!   instance never; isolation-moving arguments only with `--i-know`);
//! - [`templates`]: what a new sandbox is made from, as data files (image,
//!   user, resources, packages, cloud-init, the agent-context file), and
//!   the check that none carries a credential;
//! - [`hooks`]: where a per-sandbox canary and a durable store plug in;
//! - [`verify`]: the canary inside every profiled sandbox (the
//!   `before_handout` hook), `corral verify`, the watchdog and re-placement
//!   after a failure;
//! - [`store`]: the durable store both front-ends open (events, the
//!   verification gate's demotions, sandboxes), SQLite in the state
//!   directory;
//! - [`callers`]: who is calling and what they may do (admin, restricted,
//!   none);
//! - [`grants`]: `corral grant`/`revoke`: the restricted tier's users and
//!   each one's Incus project;
//! - [`limits`]: resources no bigger than the host, a cap on provider
//!   operations in flight, one operation at a time per sandbox;
//! - [`reconcile`]: after an interruption, the database and the backend
//!   made to agree (orphans adopted, stale records forgotten);
//! - [`watch`]: the kernel watch — nftables and link notifications, a
//!   read-back under the host lock, then heal or cut;
//! - [`shapes`]: the JSON objects both front-ends answer with (one type
//!   each, errors included).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod callers;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod error;
pub mod gate;
pub mod grants;
pub mod hatch;
pub mod hooks;
pub mod host;
pub mod lifetimes;
pub mod limits;
pub mod ports;
pub mod provider;
pub mod reconcile;
pub mod reports;
pub mod sandboxes;
pub mod settings;
pub mod shapes;
pub mod state_dir;
pub mod store;
pub mod supervise;
pub mod target;
pub mod templates;
pub mod verify;
pub mod watch;

pub use callers::{AccessPolicy, Caller, Tier};
pub use clock::WallClock;
pub use config::{ConfigSource, LoadedConfig, Origin};
pub use error::ServiceError;
pub use gate::{GateError, GatePass, Missing, Refusal};
pub use hooks::{DefaultCanary, Event, HookError, Hooks, NoHooks, WithoutCanary};
pub use host::HostService;
pub use provider::Backend;
pub use sandboxes::{CreateOptions, HandedOut, NewSandbox, SandboxService};
pub use settings::Settings;
pub use store::{Store, StoreError};
pub use target::Target;
pub use templates::{Catalog, Template};
pub use verify::{Report, Verifier, VerifyError};
