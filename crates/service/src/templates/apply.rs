//! After the provider made a sandbox from a template, before it is handed
//! out (while it starts, or while it is still stopped when the caller
//! asked for it stopped): will cloud-init apply the template, or must
//! corral put the context file in place itself?
//!
//! The user-data went to the provider with the create. An image with
//! cloud-init (it has `/etc/cloud/cloud.cfg`) applies all of it at first
//! boot. An image without (corral's busybox test image) ignores it, so the
//! context file is written through the provider's file API (which works on
//! a stopped or running container and makes missing directories), and the user,
//! packages and install commands are reported as not applied. A virtual
//! machine's files cannot be read before it boots, and a provider without
//! a file API (Multipass) hands the user-data to its own cloud-init: both
//! count as cloud-init.

use corral_sandbox_core::sandbox::{InstanceType, ProviderError, Sandbox};
use serde::Serialize;

use super::Rendered;

/// The file whose presence says the guest runs cloud-init.
pub const CLOUD_INIT_MARK: &str = "/etc/cloud/cloud.cfg";

/// Who applied the template.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppliedBy {
    /// The guest's cloud-init, at first boot (it may still be running
    /// when the sandbox is handed out).
    CloudInit,
    /// corral, through the provider's file API (the image has no
    /// cloud-init).
    FileApi,
}

/// What became of a template in one sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateApplied {
    /// The template.
    pub name: String,
    /// Who applied it.
    pub by: AppliedBy,
    /// Where the agent-context file is.
    pub context_path: String,
    /// What the template asks for that was not applied (an image without
    /// cloud-init): the user, packages, install commands.
    pub not_applied: Vec<String>,
}

/// Put `rendered` in place in the just-created `sandbox`, a container or
/// a VM as `instance_type` says (see the module docs).
pub async fn apply(
    sandbox: &dyn Sandbox,
    rendered: &Rendered,
    instance_type: InstanceType,
) -> Result<TemplateApplied, ProviderError> {
    let cloud_init = instance_type == InstanceType::Vm
        || match sandbox.pull_file(CLOUD_INIT_MARK).await {
            Ok(_) | Err(ProviderError::Unsupported { .. }) => true,
            Err(ProviderError::NotFound { .. }) => false,
            // A directory or something unreadable there still says cloud-init.
            Err(ProviderError::InvalidSpec { .. }) => true,
            Err(e) => return Err(e),
        };
    if cloud_init {
        return Ok(TemplateApplied {
            name: rendered.template.clone(),
            by: AppliedBy::CloudInit,
            context_path: rendered.context_path.clone(),
            not_applied: Vec::new(),
        });
    }
    sandbox
        .push_file(&rendered.context_path, rendered.context.as_bytes(), 0o644)
        .await?;
    Ok(TemplateApplied {
        name: rendered.template.clone(),
        by: AppliedBy::FileApi,
        context_path: rendered.context_path.clone(),
        not_applied: rendered.cloud_init_only.clone(),
    })
}
