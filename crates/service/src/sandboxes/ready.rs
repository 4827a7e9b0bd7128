//! Waiting until a started sandbox can be handed out: it holds an address
//! leased by its profile's gateway (dnsmasq's lease file lists the address
//! the backend reports), and it answers exec.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use corral_sandbox_core::Profile;
use corral_sandbox_core::sandbox::{ExecRequest, Sandbox};
use serde::Serialize;

use crate::error::ServiceError;

/// How often readiness is polled.
const POLL: Duration = Duration::from_millis(100);

/// What "ready" found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ready {
    /// The address leased by the profile's gateway, when the sandbox has a profile.
    pub lease: Option<IpAddr>,
    /// Milliseconds from start to ready.
    pub ms: u64,
}

/// Wait up to `timeout` for `sandbox` to hold a lease from `profile`'s
/// gateway (when it has a profile) and to answer `true` through exec.
pub async fn wait_ready(
    sandbox: &dyn Sandbox,
    profile: Option<&Profile>,
    state_dir: &Path,
    timeout: Duration,
) -> Result<Ready, ServiceError> {
    let started = Instant::now();
    let deadline = started + timeout;
    let not_ready = |what: String| ServiceError::NotReady {
        name: sandbox.name().to_string(),
        waited: timeout,
        what,
    };
    let lease = match profile {
        None => None,
        Some(p) => {
            let mut last = String::from("no address reported yet");
            loop {
                match leased_address(sandbox, p, state_dir).await {
                    Ok(Some(ip)) => break Some(ip),
                    Ok(None) => {}
                    Err(e) => last = e,
                }
                if Instant::now() >= deadline {
                    return Err(not_ready(format!(
                        "a DHCP lease from the gateway of bridge {} ({last}); does the image run a DHCP client on eth0?",
                        p.bridge
                    )));
                }
                tokio::time::sleep(POLL).await;
            }
        }
    };
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let probe = ExecRequest::new(["true"]).with_timeout(left.max(Duration::from_secs(1)));
        match sandbox.exec_status(&probe).await {
            Ok(0) => break,
            Ok(code) => {
                if Instant::now() >= deadline {
                    return Err(not_ready(format!("exec of `true` exited {code}")));
                }
            }
            Err(e) => {
                if Instant::now() >= deadline {
                    return Err(not_ready(format!("exec: {e}")));
                }
            }
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(Ready {
        lease,
        ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// An address the backend reports for the sandbox, inside the profile's
/// subnet, that the profile's gateway has leased.
async fn leased_address(
    sandbox: &dyn Sandbox,
    profile: &Profile,
    state_dir: &Path,
) -> Result<Option<IpAddr>, String> {
    let info = sandbox.info().await.map_err(|e| e.to_string())?;
    let candidates: Vec<IpAddr> = info
        .addresses
        .iter()
        .copied()
        .filter(|a| matches!(a, IpAddr::V4(v4) if profile.subnet_v4.contains(v4)))
        .collect();
    if candidates.is_empty() {
        return Ok(None);
    }
    let leases = corral_gateway::leases(state_dir, &profile.bridge).map_err(|e| e.to_string())?;
    match candidates
        .iter()
        .find(|a| leases.iter().any(|l| l.address == **a))
    {
        Some(a) => Ok(Some(*a)),
        None => Err(format!(
            "{} is reported but not leased by the gateway",
            candidates
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}
