//! Files in and out of a sandbox (`push`, `pull`), through the provider's
//! file API, ownership checked, each recorded in the event log. Both
//! directions are bounded: what is pushed is held in memory on its way,
//! and what is pulled is the guest's to choose.

use corral_sandbox_core::sandbox::ProviderError;

use super::SandboxService;
use crate::error::ServiceError;
use crate::hooks::Event;

/// The largest file pushed into a sandbox.
pub const MAX_PUSH_BYTES: u64 = 64 << 20;

impl SandboxService {
    /// Write `contents` to `path` (absolute) in sandbox `name`, with `mode`.
    pub async fn push(
        &self,
        name: &str,
        path: &str,
        contents: &[u8],
        mode: u32,
    ) -> Result<(), ServiceError> {
        let bytes = contents.len() as u64;
        if bytes > MAX_PUSH_BYTES {
            return Err(ProviderError::InvalidSpec {
                field: "contents",
                reason: format!(
                    "{bytes} bytes, over the {MAX_PUSH_BYTES}-byte limit on a pushed file; copy large data in another way (a mount, or fetch it from inside)"
                ),
            }
            .into());
        }
        if mode > 0o7777 {
            return Err(ProviderError::InvalidSpec {
                field: "mode",
                reason: format!("{mode:o}; expected permission bits such as 644 or 0755"),
            }
            .into());
        }
        self.open(name)
            .await?
            .push_file(path, contents, mode)
            .await?;
        self.hooks
            .record(&Event::FilePushed {
                name: name.to_owned(),
                path: path.to_owned(),
                bytes,
            })
            .await;
        Ok(())
    }

    /// Read the regular file `path` in sandbox `name` (within the
    /// provider's size limit).
    pub async fn pull(&self, name: &str, path: &str) -> Result<Vec<u8>, ServiceError> {
        let contents = self.open(name).await?.pull_file(path).await?;
        self.hooks
            .record(&Event::FilePulled {
                name: name.to_owned(),
                path: path.to_owned(),
                bytes: contents.len() as u64,
            })
            .await;
        Ok(contents)
    }
}
