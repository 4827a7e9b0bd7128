//! Binding a sandbox's port, end to end: its DHCP reservation on the
//! bridge's gateway and its binding in `table bridge corral`, in the order
//! that never lets a sandbox run ahead of its rules.
//!
//! ```text
//! let binding = PortBinding::allocate(profile, &plan.bindings)?; // MAC, address, port name
//! let plan = corral_gateway::bind_port(&host, state_dir, &plan, &profiles, binding)?;
//! // persist plan.bindings (AppliedInputs::with_bindings), then create and
//! // start the sandbox with that MAC and port name.
//! ...
//! let plan = corral_gateway::unbind_port(&host, state_dir, &plan, &profiles, port)?;
//! ```

use std::path::Path;

use corral_egress::host::{Host, HostError};
use corral_egress::plan::{HostPlan, PlanError, PortBinding};
use corral_sandbox_core::ProfileSet;

use super::error::GatewayError;
use super::process::Gateway;

/// Binding or unbinding a port failed.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The binding does not fit the profiles.
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The gateway's reservations could not be changed.
    #[error(transparent)]
    Gateway(#[from] GatewayError),
    /// The host's rules could not be changed (the reservations were put
    /// back as they were).
    #[error(transparent)]
    Host(#[from] HostError),
}

fn reserve(
    state_dir: &Path,
    plan: &HostPlan,
    bindings: &[PortBinding],
) -> Result<(), GatewayError> {
    for b in &plan.bridges {
        Gateway::new(state_dir, &b.name).set_reservations(bindings)?;
    }
    Ok(())
}

/// Binds `binding`'s port: first the gateway's reservation (re-read by a
/// running dnsmasq before this returns, so the sandbox's first DHCP request
/// is answered), then the rules (`Host::bind_port`). Returns the new plan;
/// on failure the reservations are as before.
pub fn bind_port(
    host: &Host,
    state_dir: &Path,
    plan: &HostPlan,
    profiles: &ProfileSet,
    binding: PortBinding,
) -> Result<HostPlan, PortError> {
    let new = plan.with_binding(profiles, binding.clone())?;
    reserve(state_dir, plan, &new.bindings)?;
    match host.bind_port(plan, profiles, binding) {
        Ok(bound) => Ok(bound),
        Err(e) => {
            let _ = reserve(state_dir, plan, &plan.bindings);
            Err(e.into())
        }
    }
}

/// Unbinds `port`: first the rules (the port is quarantined at once), then
/// its reservation. Returns the new plan.
pub fn unbind_port(
    host: &Host,
    state_dir: &Path,
    plan: &HostPlan,
    profiles: &ProfileSet,
    port: &str,
) -> Result<HostPlan, PortError> {
    let new = host.unbind_port(plan, profiles, port)?;
    reserve(state_dir, &new, &new.bindings)?;
    Ok(new)
}
