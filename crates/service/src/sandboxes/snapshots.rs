//! Snapshots: take one (`snapshot NAME [LABEL]`), list them, put a sandbox
//! back to one (`restore NAME SNAP`).
//!
//! A restore of a running sandbox is a restart into the snapshot: the
//! start gate is checked first (a refused restore leaves the sandbox as it
//! was), then it is stopped, restored, started, waited for and verified
//! like any start. The snapshot must exist before anything is stopped.

use std::time::Duration;

use corral_sandbox_core::sandbox::{ProviderError, SandboxState, SnapshotInfo, StopOptions};

use super::{HandedOut, SandboxService};
use crate::error::ServiceError;
use crate::hooks::Event;

/// The first `snapN` not in `taken` (Incus's own naming).
pub fn next_label(taken: &[SnapshotInfo]) -> String {
    (0..)
        .map(|n| format!("snap{n}"))
        .find(|l| !taken.iter().any(|s| &s.name == l))
        .unwrap_or_else(|| "snap".to_owned())
}

impl SandboxService {
    /// Every snapshot of sandbox `name`.
    pub async fn snapshots(&self, name: &str) -> Result<Vec<SnapshotInfo>, ServiceError> {
        Ok(self.open(name).await?.snapshots().await?)
    }

    /// Take a snapshot of sandbox `name`, called `label` (default: the
    /// first free `snapN`).
    pub async fn snapshot(
        &self,
        name: &str,
        label: Option<&str>,
    ) -> Result<SnapshotInfo, ServiceError> {
        let sandbox = self.open(name).await?;
        let label = match label {
            Some(l) => l.to_owned(),
            None => next_label(&sandbox.snapshots().await?),
        };
        sandbox.snapshot(&label).await?;
        self.hooks
            .record(&Event::Snapshotted {
                name: name.to_owned(),
                snapshot: label.clone(),
            })
            .await;
        let taken = sandbox.snapshots().await?;
        Ok(taken
            .into_iter()
            .find(|s| s.name == label)
            .unwrap_or(SnapshotInfo {
                name: label,
                created: None,
            }))
    }

    /// Put sandbox `name` back to `snapshot` (see the module docs). A
    /// running sandbox is running again afterwards, ready and verified.
    pub async fn restore(
        &self,
        name: &str,
        snapshot: &str,
        ready_timeout: Duration,
    ) -> Result<HandedOut, ServiceError> {
        let sandbox = self.open(name).await?;
        let info = sandbox.info().await?;
        if !sandbox
            .snapshots()
            .await?
            .iter()
            .any(|s| s.name == snapshot)
        {
            return Err(ProviderError::NotFound {
                what: "snapshot",
                name: format!("{name}/{snapshot}"),
            }
            .into());
        }
        let running = info.state == SandboxState::Running;
        let gate = if running {
            self.admit(name, &info).await?
        } else {
            None
        };
        if running {
            sandbox
                .stop(StopOptions {
                    force: true,
                    timeout: None,
                })
                .await?;
        }
        sandbox.restore(snapshot).await?;
        self.hooks
            .record(&Event::Restored {
                name: name.to_owned(),
                snapshot: snapshot.to_owned(),
            })
            .await;
        if !running {
            return Ok(HandedOut {
                info: sandbox.info().await?,
                gate,
                ready: None,
                template: None,
                from: None,
            });
        }
        self.start_admitted(sandbox.as_ref(), &info, gate, ready_timeout)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_count_up_past_the_taken_ones() {
        let s = |n: &str| SnapshotInfo {
            name: n.into(),
            created: None,
        };
        assert_eq!(next_label(&[]), "snap0");
        assert_eq!(next_label(&[s("snap0"), s("x"), s("snap2")]), "snap1");
    }
}
