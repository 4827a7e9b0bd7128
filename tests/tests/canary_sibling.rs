//! The sibling check on the create path, in-process through the service,
//! on the built-in profiles applied for real (`corral_tests::builtin_lab`)
//! and real Incus containers: the first sandbox on a profile has no
//! sibling to probe (the control: the check is not planned, and counted as
//! skipped); the second's canary probes the first with an ICMP echo, which
//! bridge-port isolation drops without a trace, and is judged dropped the
//! moment the host sees the bridge take the sandbox's ARP request in
//! without sending it out of any port — not by the sibling bound, nor the
//! kernel's ARP give-up of about 3 s — while the same echo from the host
//! (its control) is answered within the bound.
//! The hand-out reports where its time went, step by step.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::{SandboxProvider, StopOptions};
use corral_sandbox_core::verify::{CheckKind, Observed, SIBLING_BOUND, VerificationEvent};
use corral_service::hooks::Event;
use corral_service::sandboxes::NewSandbox;
use corral_service::store::EventQuery;
use corral_service::{
    Backend, CreateOptions, SandboxService, Settings, Store, Verifier, WallClock,
};
use corral_tests::builtin_lab::BuiltinLab;

fn needs() -> bool {
    corral_test_support::gate::netns()
        && corral_test_support::gate::tool("nft", "nftables")
        && corral_test_support::gate::incus().is_some()
}

/// Deletes the named Incus instances when dropped.
struct Cleanup(Vec<String>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let Ok(p) = IncusProvider::connect(IncusConfig::local()).await else {
                return;
            };
            for n in &self.0 {
                if let Ok(s) = p.open(&n.parse().unwrap()).await {
                    let _ = s
                        .stop(StopOptions {
                            force: true,
                            timeout: None,
                        })
                        .await;
                    let _ = s.delete().await;
                }
            }
        });
    }
}

fn verification(store: &Store, name: &str) -> VerificationEvent {
    store
        .events(&EventQuery {
            sandbox: Some(name.to_owned()),
            ..EventQuery::default()
        })
        .unwrap()
        .into_iter()
        .find_map(|e| match e.event {
            Event::Verification(v) => Some(*v),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no verification event for {name}"))
}

#[test]
fn a_second_sandbox_sees_its_sibling_dropped_on_the_bridge() {
    if !needs() {
        return;
    }
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let pid = std::process::id();
    let profiles = ["isolated", "internet", "allowlist"];
    let names: Vec<(String, String)> = profiles
        .iter()
        .map(|p| (format!("t-sib-{p}-a-{pid}"), format!("t-sib-{p}-b-{pid}")))
        .collect();
    let _guard = Cleanup(
        names
            .iter()
            .flat_map(|(a, b)| [a.clone(), b.clone()])
            .collect(),
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
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
        let service = SandboxService::new(Arc::clone(&settings), Arc::clone(&backend))
            .with_hooks(Arc::new(verifier));
        for (profile, (first, second)) in profiles.iter().zip(&names) {
            let made = service
                .create(
                    &NewSandbox::new(first, TEST_IMAGE_ALIAS).on(*profile),
                    CreateOptions::default(),
                )
                .await
                .unwrap_or_else(|e| panic!("{first}: {e}"));
            // Control: with no sibling there is nothing to probe; the
            // check is skipped, counted and said.
            let a = verification(&store, first);
            assert!(
                a.not_planned
                    .iter()
                    .any(|n| n.kind == CheckKind::SiblingBlocked && !n.could_not_run),
                "{profile}: {a:?}"
            );
            assert!(a.message.contains("skipped"), "{}", a.message);
            let steps = &made.ready.as_ref().unwrap().steps;
            assert!(
                steps.create_ms.is_some() && steps.lease_ms.is_some(),
                "{steps:?}"
            );

            service
                .create(
                    &NewSandbox::new(second, TEST_IMAGE_ALIAS).on(*profile),
                    CreateOptions::default(),
                )
                .await
                .unwrap_or_else(|e| panic!("{second}: {e}"));
            let b = verification(&store, second);
            let sib = b
                .checks
                .iter()
                .find(|c| c.kind == CheckKind::SiblingBlocked)
                .unwrap_or_else(|| panic!("{profile}: no sibling check: {b:?}"));
            assert!(sib.passed, "{profile}: {sib:?}");
            assert_eq!(
                u128::from(sib.bound_ms),
                SIBLING_BOUND.as_millis(),
                "{sib:?}"
            );
            // Blocked, on the bridge's evidence: the sandbox's ARP request
            // reached the bridge and went out of no port (not a bound run
            // out), while the host's own echo came back.
            assert_eq!(sib.observed, Some(Observed::Dropped), "{sib:?}");
            assert!(sib.output.contains("no sibling was asked"), "{sib:?}");
            let control = sib.control.as_ref().unwrap();
            assert!(control.reached, "{profile}: {control:?}");
            assert_eq!(b.outcome, corral_sandbox_core::verify::EventOutcome::Passed);
        }
    });
}
