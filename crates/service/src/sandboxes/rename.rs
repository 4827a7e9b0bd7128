//! `rename OLD NEW`: a stopped sandbox gets a new name; its record (owner,
//! verdicts) follows it, and the event log says where it came from.

use corral_sandbox_core::sandbox::SandboxInfo;

use super::{SandboxService, sandbox_name};
use crate::error::ServiceError;
use crate::hooks::Event;

impl SandboxService {
    /// Rename sandbox `old` to `new` (the backend refuses a running one:
    /// stop it first).
    pub async fn rename(&self, old: &str, new: &str) -> Result<SandboxInfo, ServiceError> {
        let to = sandbox_name(new)?;
        let sandbox = self.open(old).await?;
        self.refuse_taken(new).await?;
        let renamed = sandbox.rename(&to).await?;
        self.hooks
            .record(&Event::Renamed {
                name: new.to_owned(),
                from: old.to_owned(),
            })
            .await;
        Ok(renamed.info().await?)
    }
}
