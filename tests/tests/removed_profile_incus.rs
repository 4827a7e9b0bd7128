//! A profile removed from `corral.toml` under a live Incus sandbox (issue
//! 25's removed-profile case with the real daemon): the built-in profiles
//! applied for real (`corral_tests::builtin_lab`), a corral sandbox on
//! `internet` running, then `corral host apply` of the same configuration
//! without `internet`.
//!
//! - Control: under its profile the sandbox reaches the lab's world (the
//!   probe is a real round trip from inside the container).
//! - The plain apply refuses, naming the bridge and the sandbox's port,
//!   and changes nothing: the sandbox still reaches the world.
//! - With `--force` the port is cut and the bridge deleted: the sandbox
//!   reaches nothing — neither the world nor the host's other gateways.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::config::{Config, ConfigFormat};
use corral_sandbox_core::sandbox::{Sandbox, SandboxProvider, StopOptions};
use corral_sandbox_core::{ProfileName, ProfileSet, SandboxKind};
use corral_service::host::{ApplyError, plan_config};
use corral_service::sandboxes::NewSandbox;
use corral_service::{
    Backend, CreateOptions, HostService, SandboxService, Settings, Store, Target, Verifier,
    WallClock,
};
use corral_tests::builtin_lab::{ALLOWED, BuiltinLab, CANARY};
use corral_tests::incus::tcp_probe;

const REMOVED: &str = "internet";
const BRIDGE: &str = "corral-net";

fn needs() -> bool {
    corral_test_support::gate::netns()
        && corral_test_support::gate::tool("nft", "nftables")
        && corral_test_support::gate::incus().is_some()
}

/// Deletes the named Incus instance when dropped.
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let Ok(p) = IncusProvider::connect(IncusConfig::local()).await else {
                return;
            };
            if let Ok(s) = p.open(&self.0.parse().unwrap()).await {
                let _ = s
                    .stop(StopOptions {
                        force: true,
                        timeout: None,
                    })
                    .await;
                let _ = s.delete().await;
            }
        });
    }
}

/// The lab's configuration without `internet` (and without the phase that
/// names it), written next to it.
fn without_removed(lab: &BuiltinLab, dir: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(lab.config_path()).unwrap();
    let mut c = Config::from_toml_str(&text, "lab").unwrap();
    c.profiles = ProfileSet::new(
        c.profiles
            .iter()
            .filter(|p| p.name.as_str() != REMOVED)
            .cloned()
            .collect(),
    )
    .unwrap();
    let ph = &mut c.phases;
    for p in [
        &mut ph.work,
        &mut ph.rework,
        &mut ph.audit_agent,
        &mut ph.audit_tool,
        &mut ph.merge,
    ] {
        if p.as_ref()
            .is_some_and(|n: &ProfileName| n.as_str() == REMOVED)
        {
            *p = None;
        }
    }
    let text = c.to_toml_string();
    Config::from_toml_str(&text, "without").unwrap_or_else(|e| panic!("{e}\n{text}"));
    let path = dir.join("without.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn apply(lab: &BuiltinLab, config: &Path, force: bool) -> Result<(), ApplyError> {
    let loaded = corral_service::config::load_file(config, ConfigFormat::Toml).unwrap();
    let planned = plan_config(loaded).unwrap();
    HostService::new(Target::open(None).unwrap(), lab.state_dir())
        .apply_forcing(&planned, force)
        .map(|_| ())
}

fn ports_of(bridge: &str) -> Vec<String> {
    let mut p: Vec<String> = std::fs::read_dir(format!("/sys/class/net/{bridge}/brif"))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    p.sort();
    p
}

async fn reached(sb: &dyn Sandbox, to: SocketAddr) -> bool {
    let p = tcp_probe(sb, to)
        .await
        .unwrap_or_else(|e| panic!("probe to {to} could not run: {e}"));
    eprintln!("probe {to}: reached {} ({})", p.reached, p.detail);
    p.reached
}

#[test]
fn a_live_incus_sandbox_on_a_removed_profile_is_refused_then_cut() {
    if !needs() {
        return;
    }
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let name = format!("t-rm-{}", std::process::id());
    let _guard = Cleanup(name.clone());
    let dir = tempfile::tempdir().unwrap();
    let without = without_removed(&lab, dir.path());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(scenario(&lab, &name, &without));
}

async fn scenario(lab: &BuiltinLab, name: &str, without: &Path) {
    let loaded = corral_service::config::load_file(&lab.config_path(), ConfigFormat::Toml).unwrap();
    let settings = Arc::new(Settings::new(loaded, None, Some(&lab.state_dir())));
    let backend = Arc::new(
        Backend::select(
            "linux",
            SandboxKind::Incus,
            &settings.config.host,
            corral_test_support::gate::INCUS_SOCKET.into(),
        )
        .unwrap(),
    );
    let store = Arc::new(Store::open(&settings.state_dir).unwrap());
    let verifier = Verifier::new(
        Arc::clone(&settings),
        Arc::clone(&store),
        Arc::new(WallClock),
    )
    .with_backend(Arc::clone(&backend));
    let service = SandboxService::new(Arc::clone(&settings), Arc::clone(&backend))
        .with_hooks(Arc::new(verifier));
    service
        .create(
            &NewSandbox::new(name, TEST_IMAGE_ALIAS).on(REMOVED),
            CreateOptions::default(),
        )
        .await
        .unwrap();
    let provider = IncusProvider::connect(IncusConfig::local()).await.unwrap();
    let sb = provider.open(&name.parse().unwrap()).await.unwrap();
    let ports = ports_of(BRIDGE);
    assert_eq!(ports.len(), 1, "the sandbox's port on {BRIDGE}: {ports:?}");

    // Control: under its profile the sandbox reaches the world.
    assert!(reached(sb.as_ref(), ALLOWED).await, "control: the world");

    // The plain apply refuses, naming the bridge and its port; nothing
    // changes.
    let err = apply(lab, without, false).expect_err("a plain apply must refuse");
    let text = corral_service::error::chain(&err);
    assert!(
        text.contains(BRIDGE) && text.contains(&ports[0]) && text.contains("--force"),
        "{text}"
    );
    assert_eq!(ports_of(BRIDGE), ports, "the refusal changed nothing");
    assert!(
        reached(sb.as_ref(), ALLOWED).await,
        "after the refusal the sandbox is still under its profile"
    );

    // With force: the port cut, the bridge gone, and the sandbox, still
    // running, reaches nothing.
    apply(lab, without, true).unwrap_or_else(|e| panic!("{}", corral_service::error::chain(&e)));
    assert!(
        !Path::new(&format!("/sys/class/net/{BRIDGE}")).exists(),
        "the bridge is deleted"
    );
    let mut targets = vec![ALLOWED, CANARY];
    // The other profiles' gateways on the host (their resolvers' TCP port).
    for gw in ["10.231.1.1", "10.231.3.1"] {
        targets.push(SocketAddr::new(gw.parse().unwrap(), 53));
    }
    for to in targets {
        assert!(!reached(sb.as_ref(), to).await, "after --force, {to}");
    }
}
