//! Waiting until a started sandbox can be handed out: it holds an address
//! leased by its profile's gateway (dnsmasq's lease file lists the address
//! the backend reports), and it answers exec.

use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use corral_sandbox_core::Profile;
use corral_sandbox_core::sandbox::{ExecRequest, Sandbox, SandboxInfo};
use serde::Serialize;

use crate::error::ServiceError;

/// How often exec readiness is polled.
const POLL: Duration = Duration::from_millis(100);

/// How often the lease is polled: the DHCP exchange ends at a moment
/// nothing tells corral of, so every poll period is half a period of
/// waiting on average; one backend state read per poll is cheap beside
/// that.
const LEASE_POLL: Duration = Duration::from_millis(20);

/// What "ready" found, and where the time to it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ready {
    /// The address leased by the profile's gateway, when the sandbox has a profile.
    pub lease: Option<IpAddr>,
    /// Milliseconds from start to ready.
    pub ms: u64,
    /// The steps, each in milliseconds.
    pub steps: Steps,
}

/// Where a hand-out's time went, step by step (milliseconds; the steps
/// follow one another, so they add up to the wall time but for the
/// bookkeeping between them).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Steps {
    /// From the request to the provider having made it: the start gate,
    /// the port binding and the provider's create (and its start, when the
    /// provider starts it as it makes it). Null for an existing sandbox.
    pub create_ms: Option<u64>,
    /// The provider's start call. Null when the create started it.
    pub start_ms: Option<u64>,
    /// Until the profile's gateway leased the address (null without a profile).
    pub lease_ms: Option<u64>,
    /// From the lease until the sandbox answered exec.
    pub exec_ms: u64,
    /// The checks before hand-out (the canary, for a profiled sandbox
    /// under a verifier).
    pub canary_ms: u64,
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
    let lease = wait_lease(sandbox, profile, state_dir, timeout, deadline).await?;
    let leased = Instant::now();
    let lease_ms = profile.map(|_| ms_since(started));
    wait_exec(sandbox, timeout, deadline).await?;
    Ok(Ready {
        lease,
        ms: ms_since(started),
        steps: Steps {
            lease_ms,
            exec_ms: ms_since(leased),
            ..Steps::default()
        },
    })
}

/// [`wait_ready`], and the sandbox's state read while exec is probed (it
/// runs already, and holds its lease when it has a profile): one round
/// trip fewer on the way to the hand-out.
pub async fn wait_ready_with_info(
    sandbox: &dyn Sandbox,
    profile: Option<&Profile>,
    state_dir: &Path,
    timeout: Duration,
) -> Result<(Ready, SandboxInfo), ServiceError> {
    let started = Instant::now();
    let deadline = started + timeout;
    let lease = wait_lease(sandbox, profile, state_dir, timeout, deadline).await?;
    let leased = Instant::now();
    let lease_ms = profile.map(|_| ms_since(started));
    let ((ms, exec_ms), info) = tokio::try_join!(
        async {
            wait_exec(sandbox, timeout, deadline).await?;
            Ok((ms_since(started), ms_since(leased)))
        },
        async { Ok::<_, ServiceError>(sandbox.info().await?) }
    )?;
    let steps = Steps {
        lease_ms,
        exec_ms,
        ..Steps::default()
    };
    Ok((Ready { lease, ms, steps }, info))
}

fn ms_since(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

fn not_ready(sandbox: &dyn Sandbox, timeout: Duration, what: String) -> ServiceError {
    ServiceError::NotReady {
        name: sandbox.name().to_string(),
        waited: timeout,
        what,
    }
}

/// Until `deadline`: the address leased by `profile`'s gateway (none
/// without a profile).
async fn wait_lease(
    sandbox: &dyn Sandbox,
    profile: Option<&Profile>,
    state_dir: &Path,
    timeout: Duration,
    deadline: Instant,
) -> Result<Option<IpAddr>, ServiceError> {
    let Some(p) = profile else {
        return Ok(None);
    };
    let mut last = String::from("no address reported yet");
    loop {
        match leased_address(sandbox, p, state_dir).await {
            Ok(Some(ip)) => return Ok(Some(ip)),
            Ok(None) => {}
            Err(e) => last = e,
        }
        if Instant::now() >= deadline {
            return Err(not_ready(
                sandbox,
                timeout,
                format!(
                    "a DHCP lease from the gateway of bridge {} ({last}); does the image run a DHCP client on eth0?",
                    p.bridge
                ),
            ));
        }
        tokio::time::sleep(LEASE_POLL).await;
    }
}

/// Until `deadline`: `true` run through exec exits 0 (the probe wants the
/// exit status alone; its output is not kept).
async fn wait_exec(
    sandbox: &dyn Sandbox,
    timeout: Duration,
    deadline: Instant,
) -> Result<(), ServiceError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let probe = ExecRequest::new(["true"]).with_timeout(left.max(Duration::from_secs(1)));
        let failed = match sandbox.exec_status(&probe).await {
            Ok(0) => return Ok(()),
            Ok(code) => format!("exec of `true` exited {code}"),
            Err(e) => format!("exec: {e}"),
        };
        if Instant::now() >= deadline {
            return Err(not_ready(sandbox, timeout, failed));
        }
        tokio::time::sleep(POLL).await;
    }
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
