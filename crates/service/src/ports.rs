//! Port bindings of the sandboxes the service creates: each sandbox on a
//! local corral bridge gets its MAC, address and port name from corral
//! (`PortBinding::allocate`), bound on the host before the provider creates
//! it, and unbound when it is deleted.
//!
//! Bind: under the state directory's host lock (apply and refresh rewrite
//! the same record), read what was applied → allocate the lowest free
//! address of the profile → `corral_gateway::bind_port` (the DHCP
//! reservation, which a running dnsmasq re-reads before the call returns;
//! then the binding's set elements, the ports swept, the result verified)
//! → record the bindings with the applied inputs. Unbind runs the other way
//! (rules, then reservation, then the record). Sweep isolates every port of
//! the applied bridges and quarantines every unbound one; [`PortSweeper`]
//! (corrald) sweeps on every link event that touches a bridge's ports.
//!
//! A create holds a [`PortClaim`] on the port it bound until the provider
//! has made the sandbox (whose NIC then names the port): a flock the kernel
//! drops when the process dies. [`claim_bindings`] and [`release`] let
//! corrald's reconcile free the bindings of sandboxes that no longer exist
//! (a create or delete killed between the binding and the provider) without
//! ever taking one a create in another process is still using.
//!
//! Everything here blocks (netlink, flock, dnsmasq's reload): async callers
//! use `tokio::task::spawn_blocking`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use corral_egress::host::{HostError, PortReport, StateError, StateStore};
use corral_egress::link::{LinkEvent, LinkWatch};
use corral_egress::netns::Netns;
use corral_egress::plan::{PlanError, PortBinding};
use corral_gateway::PortError;
use corral_sandbox_core::ProfileName;
use corral_sandbox_core::sandbox::BoundNic;
use corral_state_files::{StateDir, StateFileError, StateLock};

use crate::host::{PlanningError, applied};
use crate::target::{Target, TargetError};

/// A port could not be bound, unbound or swept.
#[derive(Debug, thiserror::Error)]
pub enum BindingError {
    /// The state directory's host lock could not be taken.
    #[error("cannot take the host lock")]
    Lock(#[source] StateError),
    /// Nothing was applied to this target.
    #[error("nothing has been applied to {target} yet (no {}); run `corral host apply` first", state_file.display())]
    NothingApplied {
        /// `this host` or the namespace.
        target: String,
        /// The missing record.
        state_file: PathBuf,
    },
    /// What was applied has no such profile.
    #[error("profile `{profile}` is not in what was applied to {target}; run `corral host apply`")]
    ProfileNotApplied {
        /// The profile.
        profile: String,
        /// `this host` or the namespace.
        target: String,
    },
    /// What was applied could not be read back.
    #[error(transparent)]
    Planning(#[from] PlanningError),
    /// The namespace could not be opened.
    #[error(transparent)]
    Target(#[from] TargetError),
    /// The profile's subnet has no free address left.
    #[error(transparent)]
    Allocate(PlanError),
    /// The reservation or the rules could not be changed (the reservations
    /// are as they were).
    #[error("binding port {port}")]
    Port {
        /// The port.
        port: String,
        /// The cause.
        #[source]
        source: PortError,
    },
    /// A port's claim could not be taken or checked.
    #[error("cannot claim port {port}")]
    Claim {
        /// The port.
        port: String,
        /// The cause.
        #[source]
        source: StateFileError,
    },
    /// Whether a link already holds a port's name could not be read.
    #[error("cannot tell whether a link named {port} exists in {target}")]
    LinkCheck {
        /// The port.
        port: String,
        /// `this host` or the namespace.
        target: String,
        /// The cause (boxed: it is large, and rare).
        #[source]
        source: Box<HostError>,
    },
    /// The link-event watch could not be started.
    #[error("cannot watch link events to sweep ports")]
    Watch(#[source] std::io::Error),
    /// The ports of the applied bridges could not be swept.
    #[error("sweeping the ports of corral's bridges")]
    Sweep(#[source] HostError),
    /// The host changed, but recording it failed; the change was undone.
    #[error("port {port} was bound, but recording it failed, so it was unbound again")]
    Record {
        /// The port.
        port: String,
        /// The cause.
        #[source]
        source: StateError,
    },
    /// The host changed, and recording it failed.
    #[error(
        "port {port} was unbound, but recording it failed; the next apply puts its binding back"
    )]
    RecordUnbound {
        /// The port.
        port: String,
        /// The cause.
        #[source]
        source: StateError,
    },
}

/// A process's hold on a bound port: while it is held (a create between
/// binding the port and the provider making the sandbox), a reconcile
/// leaves the binding alone. An exclusive flock on `claims/<port>` of the
/// state directory, released on drop — and by the kernel when the process
/// dies, so a create killed midway leaves a binding a reconcile frees.
#[derive(Debug)]
pub struct PortClaim {
    _lock: StateLock,
    port: String,
}

impl PortClaim {
    /// The port claimed.
    pub fn port(&self) -> &str {
        &self.port
    }

    fn dir(state_dir: &Path, port: &str) -> Result<StateDir, BindingError> {
        StateDir::open(state_dir)
            .and_then(|d| d.subdir(CLAIMS))
            .map_err(|source| BindingError::Claim {
                port: port.to_owned(),
                source,
            })
    }

    /// The claim on `port` under `state_dir`; `None` at once while another
    /// process holds it.
    fn try_take(state_dir: &Path, port: &str) -> Result<Option<Self>, BindingError> {
        let lock = Self::dir(state_dir, port)?
            .try_lock(port)
            .map_err(|source| BindingError::Claim {
                port: port.to_owned(),
                source,
            })?;
        Ok(lock.map(|l| Self {
            _lock: l,
            port: port.to_owned(),
        }))
    }
}

/// Subdirectory of the state directory holding the claim files (one per
/// port name ever bound: at most one per address of the profiles' subnets).
const CLAIMS: &str = "claims";

/// Binds a fresh port for a sandbox on `profile` of what was applied to
/// `netns` under `state_dir`, and records it. Returns the binding (create
/// the sandbox's NIC with its MAC and port name) and the claim on it: hold
/// it until the provider has made the sandbox.
///
/// `in_use` are the NICs the backend's sandboxes already have (bound under
/// any state directory, or left by a crash): an address whose MAC or port
/// one of them carries is skipped (Incus refuses to start a second NIC with
/// a MAC another one has).
pub fn bind_new(
    netns: Option<&str>,
    state_dir: &Path,
    profile: &ProfileName,
    in_use: &[BoundNic],
) -> Result<(PortBinding, PortClaim), BindingError> {
    let target = Target::open(netns)?;
    let store = StateStore::new(state_dir);
    let _lock = store.lock().map_err(BindingError::Lock)?;
    let Some(now) = applied(&store)? else {
        return Err(BindingError::NothingApplied {
            target: target.describe(),
            state_file: store.path(),
        });
    };
    let Some(p) = now.config.profiles.get(profile.as_str()) else {
        return Err(BindingError::ProfileNotApplied {
            profile: profile.to_string(),
            target: target.describe(),
        });
    };
    // Claimed before it is recorded (under the host lock a reconcile also
    // takes), so no reconcile ever sees the binding unclaimed while this
    // create uses it. A port whose claim another process holds (a
    // reconcile about to release its old binding) is skipped, never waited
    // for: that reconcile needs the host lock held here.
    let mut busy: Vec<PortBinding> = now.plan.bindings.clone();
    let (binding, claim) = loop {
        let b = PortBinding::allocate(p, &busy).map_err(BindingError::Allocate)?;
        if in_use.iter().any(|n| n.mac == b.mac || n.port == b.port) {
            busy.push(b);
            continue;
        }
        // No sandbox corral knows uses this port, yet a link of its name
        // exists: what a backend left behind (Incus keeps a container's
        // host-side veth when the container dies under it), or someone
        // else's. Its name would make the backend's create fail ("File
        // exists"), and it is not corral's to delete: skip the address.
        let taken =
            target
                .host
                .link_exists(b.port.as_str())
                .map_err(|source| BindingError::LinkCheck {
                    port: b.port.to_string(),
                    target: target.describe(),
                    source: Box::new(source),
                })?;
        if taken {
            tracing::warn!(
                port = %b.port,
                "a link named like this port exists and no sandbox uses it (left behind by a \
                 sandbox that died?); its address is skipped until it is gone (`ip link del {}`)",
                b.port
            );
            busy.push(b);
            continue;
        }
        match PortClaim::try_take(state_dir, b.port.as_str())? {
            Some(c) => break (b, c),
            None => busy.push(b),
        }
    };
    let port = binding.port.to_string();
    let plan = corral_gateway::bind_port(
        &target.host,
        state_dir,
        &now.plan,
        &now.config.profiles,
        binding.clone(),
    )
    .map_err(|source| BindingError::Port {
        port: port.clone(),
        source,
    })?;
    if let Err(source) = record(&store, plan.bindings.clone()) {
        // Never leave a binding the record does not know: verify would
        // report it, and no delete would ever remove it.
        if let Err(e) =
            corral_gateway::unbind_port(&target.host, state_dir, &plan, &now.config.profiles, &port)
        {
            tracing::warn!(port = %port, error = %e, "could not undo a binding whose record failed");
        }
        return Err(BindingError::Record { port, source });
    }
    Ok((binding, claim))
}

/// Claims every binding recorded under `state_dir` that no process holds
/// (see [`PortClaim`]): the ones a reconcile may release once it has seen
/// that no sandbox uses them. Take the claims first, list the sandboxes
/// second: a create that lets go of its claim has made its sandbox by then.
pub fn claim_bindings(state_dir: &Path) -> Result<Vec<(PortBinding, PortClaim)>, BindingError> {
    let store = StateStore::new(state_dir);
    let bindings = {
        let _lock = store.lock().map_err(BindingError::Lock)?;
        match applied(&store)? {
            Some(now) => now.plan.bindings,
            None => return Ok(Vec::new()),
        }
    };
    let mut out = Vec::new();
    for b in bindings {
        if let Some(c) = PortClaim::try_take(state_dir, b.port.as_str())? {
            out.push((b, c));
        }
    }
    Ok(out)
}

/// Releases `claimed` bindings whose port no NIC of `live` names (their
/// sandbox is gone): each one's rules, reservation and record, as a delete
/// would. Returns the bindings released.
pub fn release_unused(
    netns: Option<&str>,
    state_dir: &Path,
    claimed: Vec<(PortBinding, PortClaim)>,
    live: &[BoundNic],
) -> Result<Vec<PortBinding>, BindingError> {
    let mut out = Vec::new();
    for (b, claim) in claimed {
        // A sandbox whose NIC names the port keeps it, whatever its MAC
        // says (a mismatch is a start gate refusal, not an orphan).
        if live.iter().any(|n| n.port == b.port) {
            continue;
        }
        if let Some(gone) = unbind(netns, state_dir, &b.nic())? {
            out.push(gone);
        }
        drop(claim);
    }
    Ok(out)
}

/// Removes the binding of `nic`'s port from what was applied to `netns`
/// under `state_dir`, when the record holds exactly that binding (same
/// port and MAC). Returns the binding removed, if any: none when nothing
/// was applied there, or the record does not hold it (a sandbox bound
/// under another state directory, or never bound).
pub fn unbind(
    netns: Option<&str>,
    state_dir: &Path,
    nic: &BoundNic,
) -> Result<Option<PortBinding>, BindingError> {
    let target = Target::open(netns)?;
    let store = StateStore::new(state_dir);
    let _lock = store.lock().map_err(BindingError::Lock)?;
    let Some(now) = applied(&store)? else {
        return Ok(None);
    };
    let Some(binding) = now
        .plan
        .binding(nic.port.as_str())
        .filter(|b| b.mac == nic.mac)
        .cloned()
    else {
        return Ok(None);
    };
    let port = binding.port.to_string();
    let plan = corral_gateway::unbind_port(
        &target.host,
        state_dir,
        &now.plan,
        &now.config.profiles,
        &port,
    )
    .map_err(|source| BindingError::Port {
        port: port.clone(),
        source,
    })?;
    record(&store, plan.bindings).map_err(|source| BindingError::RecordUnbound { port, source })?;
    Ok(Some(binding))
}

/// Isolates every port of the bridges applied to `netns` under
/// `state_dir` and quarantines every port without a binding (a NIC
/// hot-plugged behind corral's back). `None` when nothing was applied.
pub fn sweep(
    netns: Option<&str>,
    state_dir: &Path,
) -> Result<Option<Vec<PortReport>>, BindingError> {
    let target = Target::open(netns)?;
    let store = StateStore::new(state_dir);
    let _lock = store.lock().map_err(BindingError::Lock)?;
    let Some(now) = applied(&store)? else {
        return Ok(None);
    };
    let reports = target
        .host
        .sweep_ports(&now.plan)
        .map_err(BindingError::Sweep)?;
    Ok(Some(reports))
}

/// Records `bindings` as the ones in force, keeping the rest of what was
/// applied as it is.
fn record(store: &StateStore, bindings: Vec<PortBinding>) -> Result<(), StateError> {
    let Some(inputs) = store.load()? else {
        return Ok(());
    };
    store.save(&inputs.with_bindings(bindings))
}

/// Sweeps the ports of the applied bridges whenever the kernel reports a
/// port joining or leaving a bridge (rtnetlink link events, not a timer:
/// a NIC plugged in behind corral's back is quarantined within one sweep
/// of its appearing), and once at start. Runs on its own thread until
/// dropped.
#[derive(Debug)]
pub struct PortSweeper {
    stop: Arc<AtomicBool>,
    sweeps: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How long the sweeper waits for one more event before sweeping, so a
/// burst (a container's veth pair appearing, going up, joining) is one
/// sweep.
const SETTLE: Duration = Duration::from_millis(50);
/// How often the sweeper looks at its stop flag while nothing happens.
const IDLE: Duration = Duration::from_millis(500);

impl PortSweeper {
    /// Starts sweeping what was applied to `netns` (this process's
    /// namespace when `None`) under `state_dir`.
    pub fn spawn(netns: Option<String>, state_dir: PathBuf) -> Result<Self, BindingError> {
        let ns = match &netns {
            None => Netns::current(),
            Some(name) => Netns::open(name),
        }
        .map_err(|source| {
            BindingError::Target(TargetError::NoSuchNetns {
                name: netns.clone().unwrap_or_else(|| "(this host)".to_owned()),
                source,
            })
        })?;
        let watch = LinkWatch::open(&ns).map_err(BindingError::Watch)?;
        let stop = Arc::new(AtomicBool::new(false));
        let sweeps = Arc::new(AtomicU64::new(0));
        let (stop2, sweeps2) = (Arc::clone(&stop), Arc::clone(&sweeps));
        let thread = std::thread::Builder::new()
            .name("port-sweeper".into())
            .spawn(move || run(watch, netns.as_deref(), &state_dir, &stop2, &sweeps2))
            .map_err(BindingError::Watch)?;
        Ok(Self {
            stop,
            sweeps,
            thread: Some(thread),
        })
    }

    /// Sweeps done so far (for reports and tests).
    pub fn sweeps(&self) -> u64 {
        self.sweeps.load(Ordering::Relaxed)
    }
}

impl Drop for PortSweeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    mut watch: LinkWatch,
    netns: Option<&str>,
    state_dir: &Path,
    stop: &AtomicBool,
    sweeps: &AtomicU64,
) {
    let sweep_now = || {
        match sweep(netns, state_dir) {
            Ok(Some(ports)) => {
                let quarantined = ports.iter().filter(|p| !p.bound).count();
                tracing::debug!(ports = ports.len(), quarantined, "swept the bridges' ports");
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "could not sweep the bridges' ports"),
        }
        sweeps.fetch_add(1, Ordering::Relaxed);
    };
    sweep_now();
    while !stop.load(Ordering::Relaxed) {
        match watch.next(IDLE) {
            Ok(None) => {}
            Ok(Some(event)) => {
                if event == LinkEvent::Lost {
                    tracing::warn!("link events were lost; sweeping every port");
                }
                // Let the burst settle (bounded, so a flapping link cannot
                // hold the sweep off).
                for _ in 0..20 {
                    match watch.next(SETTLE) {
                        Ok(Some(_)) => {}
                        _ => break,
                    }
                }
                sweep_now();
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading link events failed; sweeping and retrying");
                sweep_now();
                std::thread::sleep(IDLE);
            }
        }
    }
}
