//! Starts behind corral's back, against the real Incus daemon and the
//! built-in profiles applied for real (`corral_tests::builtin_lab`): a
//! corral sandbox on `allowlist`, stopped, then started with the `incus`
//! client itself, not through corral.
//!
//! - Control: with the profile's enforcement intact the out-of-band start
//!   passes the gate, the topology check and the canary: it keeps running
//!   and a non-alert `unmanaged_start` records it as admitted.
//! - corral's own start is not judged again (its `starting` record vouches
//!   for it): no `unmanaged_start`.
//! - With `table inet corral` deleted, the same out-of-band start is
//!   refused by the start gate: the watcher stops the sandbox and records
//!   an `unmanaged_start` alert naming the refusal.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::{SandboxProvider, SandboxState, StopOptions};
use corral_service::hooks::Event;
use corral_service::sandboxes::NewSandbox;
use corral_service::store::EventQuery;
use corral_service::supervise::IncusStartWatcher;
use corral_service::{
    Backend, CreateOptions, SandboxService, Settings, Store, Verifier, WallClock,
};
use corral_tests::builtin_lab::BuiltinLab;

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

/// `incus start NAME` in corral's project: an admin's start, not corral's.
async fn incus_start(name: &str) {
    let out = tokio::process::Command::new("incus")
        .args(["start", name, "--project", &IncusConfig::local().project])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "incus start: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

async fn state(provider: &IncusProvider, name: &str) -> SandboxState {
    let s = provider.open(&name.parse().unwrap()).await.unwrap();
    s.info().await.unwrap().state
}

fn unmanaged(store: &Store, name: &str) -> Vec<(bool, bool, String)> {
    store
        .events(&EventQuery {
            sandbox: Some(name.to_owned()),
            ..EventQuery::default()
        })
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::UnmanagedStart {
                admitted, reason, ..
            } => Some((e.alert, admitted, reason)),
            _ => None,
        })
        .collect()
}

/// Polls until `done`; a correctness wait with a generous bound.
async fn wait_until(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !done().await {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[test]
fn a_start_behind_corrals_back_is_gated_and_stopped_when_the_gate_refuses() {
    if !needs() {
        return;
    }
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let name = format!("t-us-{}", std::process::id());
    let _guard = Cleanup(name.clone());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(scenario(&lab, &name));
}

async fn scenario(lab: &BuiltinLab, name: &str) {
    let loaded = corral_service::config::load_file(
        &lab.config_path(),
        corral_sandbox_core::config::ConfigFormat::Toml,
    )
    .unwrap();
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
    let service = Arc::new(
        SandboxService::new(Arc::clone(&settings), Arc::clone(&backend))
            .with_hooks(Arc::new(verifier)),
    );
    service
        .create(
            &NewSandbox::new(name, TEST_IMAGE_ALIAS).on("allowlist"),
            CreateOptions::default(),
        )
        .await
        .unwrap();
    let provider = IncusProvider::connect(IncusConfig::local()).await.unwrap();
    let mut watcher = IncusStartWatcher::new(
        Arc::clone(&service),
        Arc::clone(&store),
        backend.incus_providers().await.unwrap().unwrap(),
    )
    .spawn();
    watcher.subscribed().await;
    let stop = StopOptions {
        force: true,
        timeout: None,
    };

    // Control: enforcement intact. Started behind corral's back, it is
    // judged, passes and keeps running.
    service.stop(name, stop).await.unwrap();
    incus_start(name).await;
    wait_until("the out-of-band start is judged", async || {
        !unmanaged(&store, name).is_empty()
    })
    .await;
    let judged = unmanaged(&store, name);
    assert!(
        matches!(&judged[..], [(false, true, _)]),
        "admitted, not an alert: {judged:?}"
    );
    assert_eq!(state(&provider, name).await, SandboxState::Running);

    // corral's own start is corral's: not judged again.
    service.stop(name, stop).await.unwrap();
    service.start(name, Duration::from_secs(60)).await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        unmanaged(&store, name).len(),
        1,
        "{:?}",
        unmanaged(&store, name)
    );

    // The enforcement goes; the same out-of-band start is refused and the
    // sandbox stopped.
    service.stop(name, stop).await.unwrap();
    let out = std::process::Command::new("nft")
        .args(["delete", "table", "inet", "corral"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    incus_start(name).await;
    wait_until("the refused start is recorded", async || {
        unmanaged(&store, name).len() == 2
    })
    .await;
    let judged = unmanaged(&store, name);
    let (alert, admitted, reason) = &judged[1];
    assert!(*alert && !*admitted, "{judged:?}");
    assert!(
        reason.contains("refused") && reason.contains("stopped"),
        "{reason}"
    );
    assert!(reason.contains("table inet corral"), "{reason}");
    assert!(!reason.contains("NOT stopped"), "{reason}");
    wait_until("the refused sandbox is stopped", async || {
        state(&provider, name).await == SandboxState::Stopped
    })
    .await;

    watcher.stop().await;
}
