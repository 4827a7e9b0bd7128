//! corrald's reconcile frees the port bindings of sandboxes that no longer
//! exist, against the real kernel (a profile's rules and gateway applied in
//! an anonymous network namespace) and the real Incus daemon: a create
//! killed between binding its port and Incus making the sandbox leaves a
//! binding nobody uses. The reconcile releases it — rules, reservation and
//! record — and keeps the binding a create in progress still claims and
//! the one whose sandbox exists.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;

use corral_egress::netns::Netns;
use corral_egress::plan::PortBinding;
use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::sandbox::{NetworkAttachment, SandboxProvider as _, SandboxSpec};
use corral_sandbox_core::{Config, ProfileName, SandboxKind, SandboxName};
use corral_service::config::{LoadedConfig, Origin};
use corral_service::host::{HostService, applied, plan_config};
use corral_service::ports::bind_new;
use corral_service::reconcile::reconcile;
use corral_service::store::EventQuery;
use corral_service::{Backend, SandboxService, Settings, Store, Target, WallClock};

/// The namespace with corral applied; torn down (gateways stopped) on
/// drop, even when the test panics.
struct Lab {
    _ns: Netns,
    path: String,
    state: tempfile::TempDir,
}

impl Lab {
    fn new() -> Self {
        let ns = Netns::new().unwrap();
        let path = format!("/proc/{}/fd/{}", std::process::id(), ns.fd().as_raw_fd());
        Self {
            _ns: ns,
            path,
            state: tempfile::tempdir().unwrap(),
        }
    }

    fn host(&self) -> HostService {
        HostService::new(
            Target::open(Some(&self.path)).unwrap(),
            self.state.path().to_owned(),
        )
    }

    fn recorded(&self) -> Vec<String> {
        applied(&self.host().store())
            .unwrap()
            .unwrap()
            .plan
            .bindings
            .iter()
            .map(|b| b.port.to_string())
            .collect()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Ok(t) = Target::open(Some(&self.path)) {
            let _ = HostService::new(t, self.state.path().to_owned()).teardown();
        }
    }
}

/// Deletes the instance on drop, even when the test panics.
struct Instance(IncusProvider, SandboxName);

impl Drop for Instance {
    fn drop(&mut self) {
        let rt = runtime();
        if let Ok(s) = rt.block_on(self.0.open(&self.1)) {
            let _ = rt.block_on(s.delete());
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A profile whose subnet no other test binds ports in: port names derive
/// from addresses, and the reconcile looks at every sandbox on the shared
/// Incus daemon.
fn config() -> Config {
    let octet = std::process::id() % 200 + 20;
    let text = format!(
        "[[profile]]\nname = \"rp\"\nbridge = \"corral-rp\"\nsubnet = \"10.248.{octet}.0/24\"\nmode = \"internet\"\n"
    );
    Config::from_toml_str(&text, "reconcile_ports").unwrap()
}

fn reservations(lab: &Lab) -> String {
    std::fs::read_to_string(
        lab.state
            .path()
            .join("gateway")
            .join("corral-rp")
            .join("reservations"),
    )
    .unwrap_or_default()
}

#[test]
fn reconcile_releases_bindings_no_sandbox_uses_and_keeps_claimed_and_used_ones() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let Some(socket) = corral_test_support::gate::incus() else {
        return;
    };
    let lab = Lab::new();
    let planned = plan_config(LoadedConfig {
        config: config(),
        origin: Origin::Builtin,
    })
    .unwrap();
    lab.host().apply(&planned).unwrap();
    let state: PathBuf = lab.state.path().to_owned();
    let profile = ProfileName::new("rp").unwrap();

    // Three ports bound the way the service's create binds them.
    // `orphan`: its create died before Incus had the sandbox (the kernel
    // dropped its claim with the process).
    let (orphan, claim) = bind_new(Some(&lab.path), &state, &profile, &[]).unwrap();
    drop(claim);
    // `busy`: a create still in progress holds its claim.
    let (busy, busy_claim) = bind_new(Some(&lab.path), &state, &profile, &[]).unwrap();
    // `used`: Incus has its sandbox (created stopped: the bridge is in the
    // namespace, not on the host).
    let (used, claim) = bind_new(Some(&lab.path), &state, &profile, &[]).unwrap();
    let mut incus_config = IncusConfig::local();
    incus_config.endpoint = corral_provider_incus::Endpoint::Unix(socket.clone());
    let incus = runtime()
        .block_on(IncusProvider::connect(incus_config))
        .unwrap();
    let name = SandboxName::new(format!("t-rp-{}", std::process::id())).unwrap();
    let guard = Instance(incus.clone(), name.clone());
    let p = planned.config.profiles.get("rp").unwrap();
    let mut spec = SandboxSpec::new(name.clone(), TEST_IMAGE_ALIAS);
    let mut net = NetworkAttachment::for_profile(p, Vec::new());
    net.nic = Some(used.nic());
    spec.network = Some(net);
    runtime().block_on(incus.create(&spec)).unwrap();
    drop(claim);

    // Control: all three are recorded, reserved and in force.
    let all = |b: &[&PortBinding]| -> Vec<String> {
        let mut v: Vec<String> = b.iter().map(|x| x.port.to_string()).collect();
        v.sort();
        v
    };
    let mut recorded = lab.recorded();
    recorded.sort();
    assert_eq!(recorded, all(&[&orphan, &busy, &used]));
    assert!(reservations(&lab).contains(&orphan.mac.to_string()));
    let now = applied(&lab.host().store()).unwrap().unwrap();
    assert!(lab.host().verify(&now).unwrap().is_empty());

    let settings = Settings {
        config: planned.config.clone(),
        origin: Origin::Builtin,
        netns: Some(lab.path.clone()),
        state_dir: state.clone(),
    };
    let backend =
        Backend::select("linux", SandboxKind::Incus, &settings.config.host, socket).unwrap();
    let service = SandboxService::new(Arc::new(settings), Arc::new(backend))
        .without_canary("reconcile hands nothing out");
    let store = Store::open(&state).unwrap();
    let done = runtime()
        .block_on(reconcile(&service, &store, &WallClock))
        .unwrap();
    assert_eq!(done.released, vec![orphan.port.to_string()]);
    let mut recorded = lab.recorded();
    recorded.sort();
    assert_eq!(recorded, all(&[&busy, &used]));
    assert!(
        !reservations(&lab).contains(&orphan.mac.to_string()),
        "the orphan's reservation stayed"
    );
    // What was applied (now without the orphan) is what is in force.
    let now = applied(&lab.host().store()).unwrap().unwrap();
    assert!(lab.host().verify(&now).unwrap().is_empty());
    let events = store
        .events(&EventQuery {
            sandbox: Some(orphan.port.to_string()),
            after: None,
            limit: None,
        })
        .unwrap();
    assert!(
        events
            .iter()
            .any(|e| format!("{e:?}").contains("released: port")),
        "{events:?}"
    );

    // The create in progress dies: the next reconcile frees its port too,
    // and still keeps the one in use.
    drop(busy_claim);
    let done = runtime()
        .block_on(reconcile(&service, &store, &WallClock))
        .unwrap();
    assert_eq!(done.released, vec![busy.port.to_string()]);
    assert_eq!(lab.recorded(), vec![used.port.to_string()]);
    drop(guard);
}

#[test]
fn a_new_binding_skips_macs_and_ports_other_sandboxes_carry() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = Lab::new();
    let planned = plan_config(LoadedConfig {
        config: config(),
        origin: Origin::Builtin,
    })
    .unwrap();
    lab.host().apply(&planned).unwrap();
    let state: PathBuf = lab.state.path().to_owned();
    let profile = ProfileName::new("rp").unwrap();
    let p = planned.config.profiles.get("rp").unwrap();
    // Control: with nothing in use, the first address is the one chosen.
    let first = PortBinding::allocate(p, &[]).unwrap();
    let second = PortBinding::allocate(p, std::slice::from_ref(&first)).unwrap();
    // A sandbox elsewhere (another state directory, or left by a crash)
    // carries the first address's MAC, another the second's port name.
    let mac_taken = corral_sandbox_core::sandbox::BoundNic {
        mac: first.mac,
        port: corral_sandbox_core::InterfaceName::new("elsewhere0").unwrap(),
    };
    let port_taken = corral_sandbox_core::sandbox::BoundNic {
        mac: "02:00:00:00:00:99".parse().unwrap(),
        port: second.port.clone(),
    };
    let (b, _claim) =
        bind_new(Some(&lab.path), &state, &profile, &[mac_taken, port_taken]).unwrap();
    assert_ne!(b.mac, first.mac);
    assert_ne!(b.port, second.port);
    assert_eq!(
        b,
        PortBinding::allocate(p, &[first, second]).unwrap(),
        "the next free address after the two in use"
    );
    assert_eq!(lab.recorded(), vec![b.port.to_string()]);
}
