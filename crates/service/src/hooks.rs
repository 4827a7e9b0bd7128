//! Where later stages plug into the lifecycle without the front-ends
//! changing: a check that runs inside a started sandbox before it is handed
//! out (the per-sandbox canary), and a record of every event (a durable
//! store, an audit stream). The default, [`NoHooks`], does neither.

use std::fmt;

use async_trait::async_trait;
use corral_sandbox_core::sandbox::{Sandbox, SandboxInfo};
use serde::Serialize;

/// A hook refused a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{check} refused sandbox `{sandbox}`: {reason}")]
pub struct HookError {
    /// Which check refused (e.g. `canary`).
    pub check: String,
    /// The sandbox.
    pub sandbox: String,
    /// Why, and what to do.
    pub reason: String,
}

/// Something that happened to a sandbox, after it happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// Created (not yet started).
    Created {
        /// The sandbox.
        name: String,
        /// Its profile, if any.
        profile: Option<String>,
    },
    /// Started, ready and handed out.
    Started {
        /// The sandbox.
        name: String,
    },
    /// A start or create was refused by the start gate or a hook.
    Refused {
        /// The sandbox.
        name: String,
        /// Why.
        reason: String,
    },
    /// Stopped.
    Stopped {
        /// The sandbox.
        name: String,
    },
    /// Deleted.
    Deleted {
        /// The sandbox.
        name: String,
    },
}

/// Stages later components add to the lifecycle.
#[async_trait]
pub trait Hooks: Send + Sync + fmt::Debug {
    /// Runs after a sandbox is started (and, for a create, ready), before
    /// the caller gets it. An error refuses it: the service stops it (and
    /// deletes it, when it was just created).
    async fn before_handout(
        &self,
        _sandbox: &dyn Sandbox,
        _info: &SandboxInfo,
    ) -> Result<(), HookError> {
        Ok(())
    }

    /// Called after every event; must not fail the operation.
    async fn record(&self, _event: &Event) {}
}

/// No extra stages.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {}
