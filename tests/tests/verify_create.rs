//! The canary on the create path, in-process through the service, on the
//! built-in profiles applied for real (`corral_tests::builtin_lab`) and
//! real Incus containers:
//!
//! - a rule change that lands after the start gate passed (the gate reads
//!   the ruleset back before create; a hook injects an accept for the
//!   canary between start and the canary): the canary fails, the new
//!   sandbox is deleted, nothing is handed out, and the failure, an alert
//!   and the deletion are on record;
//! - re-placement: the operator prefers Multipass (driven through the
//!   recording fake, its guest tools answering as a leaking filter would)
//!   over Incus; the Multipass VM fails its canary and is disposed of, the
//!   work is placed again through sandbox-core's `replace_after_failure`
//!   on the next enforced kind, Incus, whose real container passes and is
//!   handed out. What runs for real here is the Incus side, the start gate,
//!   the store and the placement; the Multipass VM is the fake's.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_provider_multipass::{MultipassConfig, MultipassProvider};
use corral_sandbox_core::sandbox::{Sandbox, SandboxInfo, SandboxProvider, StopOptions};
use corral_sandbox_core::{HostOs, SandboxKind};
use corral_service::hooks::{Event, HookError, Hooks};
use corral_service::sandboxes::NewSandbox;
use corral_service::store::EventQuery;
use corral_service::verify::placement::Placer;
use corral_service::{
    Backend, CreateOptions, SandboxService, ServiceError, Settings, Store, Verifier, WallClock,
};
use corral_tests::builtin_lab::{BuiltinLab, CANARY};
use corral_tests::fakes::FakeTool;

fn settings(lab: &BuiltinLab) -> Arc<Settings> {
    let loaded = corral_service::config::load_file(
        &lab.config_path(),
        corral_sandbox_core::config::ConfigFormat::Toml,
    )
    .unwrap();
    Arc::new(Settings::new(loaded, None, Some(&lab.state_dir())))
}

fn incus_backend(settings: &Settings) -> Arc<Backend> {
    Arc::new(
        Backend::select(
            "linux",
            SandboxKind::Incus,
            &settings.config.host,
            corral_test_support::gate::INCUS_SOCKET.into(),
        )
        .unwrap(),
    )
}

fn request(name: &str, profile: &str) -> NewSandbox {
    NewSandbox::new(name, TEST_IMAGE_ALIAS).on(profile)
}

fn unique(tag: &str) -> String {
    format!("t-vc-{tag}-{}", std::process::id())
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

/// The verifier, with an accept for the canary inserted into the
/// profile's egress chain first: a change after the start gate looked.
#[derive(Debug)]
struct SabotageFirst(Verifier);

#[async_trait]
impl Hooks for SabotageFirst {
    async fn before_handout(
        &self,
        sandbox: &dyn Sandbox,
        info: &SandboxInfo,
    ) -> Result<(), HookError> {
        let chain = format!("{}-out", info.profile.as_ref().unwrap());
        let out = std::process::Command::new("nft")
            .args([
                "insert",
                "rule",
                "inet",
                "corral",
                &chain,
                "ip",
                "daddr",
                &CANARY.ip().to_string(),
                "accept",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.0.before_handout(sandbox, info).await
    }

    async fn record(&self, event: &Event) {
        self.0.record(event).await;
    }
}

fn needs() -> bool {
    corral_test_support::gate::netns()
        && corral_test_support::gate::tool("nft", "nftables")
        && corral_test_support::gate::incus().is_some()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_canary_failure_on_create_deletes_the_sandbox_and_is_recorded() {
    if !needs() {
        return;
    }
    // The lab (whose setup blocks) and the guard live outside the runtime.
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let name = unique("sabotaged");
    let _guard = Cleanup(vec![name.clone()]);
    runtime().block_on(sabotaged_create(&lab, &name));
}

async fn sabotaged_create(lab: &BuiltinLab, name: &str) {
    let name = name.to_owned();
    let settings = settings(lab);
    let backend = incus_backend(&settings);
    let store = Arc::new(Store::open(&settings.state_dir).unwrap());
    let verifier = Verifier::new(
        Arc::clone(&settings),
        Arc::clone(&store),
        Arc::new(WallClock),
    )
    .with_backend(Arc::clone(&backend));
    let service = SandboxService::new(Arc::clone(&settings), Arc::clone(&backend))
        .with_hooks(Arc::new(SabotageFirst(verifier)));
    let err = service
        .create(&request(&name, "allowlist"), CreateOptions::default())
        .await
        .unwrap_err();
    let ServiceError::Hook(h) = &err else {
        panic!("expected the canary's refusal, got {err}");
    };
    assert_eq!(h.check, "canary");
    assert!(h.reason.contains("canary destination blocked"), "{h}");
    // Disposed of: the backend no longer has it.
    let provider = backend.provider().await.unwrap();
    assert!(provider.open(&name.parse().unwrap()).await.is_err());
    let events = store
        .events(&EventQuery {
            sandbox: Some(name.clone()),
            ..EventQuery::default()
        })
        .unwrap();
    let types: Vec<&str> = events.iter().map(|e| e.event.type_name()).collect();
    for want in ["created", "verification", "alert", "refused", "deleted"] {
        assert!(types.contains(&want), "{want} missing: {types:?}");
    }
    let failed = events
        .iter()
        .find_map(|e| match &e.event {
            Event::Verification(v) => Some(v),
            _ => None,
        })
        .unwrap();
    assert!(
        !failed
            .checks
            .iter()
            .find(|c| c.kind.as_str() == "canary-blocked")
            .unwrap()
            .passed
    );
    assert_eq!(
        store.sandbox(&name).unwrap(),
        None,
        "a deleted sandbox is forgotten"
    );
}

#[test]
fn a_failed_canary_on_multipass_is_replaced_on_incus() {
    if !needs() {
        return;
    }
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    lab.apply().unwrap_or_else(|e| panic!("{e}"));
    let (donor, work) = (unique("donor"), unique("work"));
    let _guard = Cleanup(vec![donor.clone(), work.clone()]);
    runtime().block_on(replaced(&lab, &donor, &work));
}

async fn replaced(lab: &BuiltinLab, donor: &str, work: &str) {
    let (donor, work) = (donor.to_owned(), work.to_owned());
    let settings = settings(lab);
    let incus = incus_backend(&settings);
    let store = Arc::new(Store::open(&settings.state_dir).unwrap());
    let verifier = Verifier::new(
        Arc::clone(&settings),
        Arc::clone(&store),
        Arc::new(WallClock),
    )
    .with_backend(Arc::clone(&incus));
    let incus_service = SandboxService::new(Arc::clone(&settings), Arc::clone(&incus))
        .with_hooks(Arc::new(verifier.clone()));

    // The fake VM needs an address the profile's gateway leased to pass
    // readiness: it borrows a real container's.
    let made = incus_service
        .create(&request(&donor, "isolated"), CreateOptions::default())
        .await
        .unwrap();
    let lease = made.ready.unwrap().lease.unwrap();

    let fake = FakeTool::multipass();
    for tool in ["nc", "ping", "nslookup", "getent"] {
        fake.install(
            tool,
            &format!(
                "#!/bin/sh\necho \"{tool} $*\" >> '{}/guest.log'\n{}",
                fake.state().display(),
                LEAKING_GUEST
            ),
        );
    }
    std::fs::write(fake.state().join("ipv4"), lease.to_string()).unwrap();
    let mut mp = MultipassConfig::new(fake.staging(), settings.config.profiles.clone());
    mp.timeouts.command = Duration::from_secs(20);
    let runner = corral_provider_multipass::ProcessRunner::with_search_path(fake.search_path());
    let provider: Arc<dyn SandboxProvider> = Arc::new(
        MultipassProvider::with_runner(mp, Arc::new(runner), SandboxKind::Multipass).unwrap(),
    );
    let mp_backend =
        Arc::new(Backend::with_provider(HostOs::Linux, &settings.config.host, provider).unwrap());
    let mp_service = SandboxService::new(Arc::clone(&settings), mp_backend)
        .with_hooks(Arc::new(verifier.clone()));
    let placer = Placer::new(HostOs::Linux, vec![mp_service, incus_service], verifier);

    // One request for both kinds (Multipass always makes a VM; Incus VMs
    // cannot start here, so the request asks for a container).
    let placed = placer
        .create(&request(&work, "isolated"), CreateOptions::default())
        .await
        .unwrap_or_else(|e| panic!("placement failed: {}", corral_service::error::chain(&e)));
    assert_eq!(placed.kind, SandboxKind::Incus, "{placed:#?}");
    assert_eq!(placed.attempts.len(), 1, "{placed:#?}");
    assert_eq!(placed.attempts[0].kind, SandboxKind::Multipass);
    assert!(
        placed.attempts[0]
            .reason
            .contains("canary destination blocked"),
        "{}",
        placed.attempts[0].reason
    );
    // The VM was disposed of through the fake; the container is handed out.
    let vms = std::fs::read_dir(fake.state().join("vms")).unwrap().count();
    assert_eq!(vms, 0, "the failed VM is deleted");
    assert!(
        std::fs::read_to_string(fake.state().join("guest.log"))
            .unwrap()
            .contains("nc -v -z -w 2 198.51.100.7 443")
    );
    assert_eq!(placed.handed.info.kind, SandboxKind::Incus);
    let runs: Vec<(SandboxKind, bool)> = store
        .events(&EventQuery {
            sandbox: Some(work.clone()),
            ..EventQuery::default()
        })
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event {
            Event::Verification(v) => Some((
                v.kind,
                v.outcome == corral_sandbox_core::verify::EventOutcome::Passed,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        runs,
        [(SandboxKind::Multipass, false), (SandboxKind::Incus, true)]
    );
}

/// A guest whose filter lets the canary through (and blocks the rest).
const LEAKING_GUEST: &str = r#"tool=${0##*/}
case "$tool" in
nc)
  while [ "$#" -gt 2 ]; do case "$1" in -w) shift 2 ;; -*) shift ;; *) break ;; esac; done
  if [ "$1 $2" = "198.51.100.7 443" ]; then echo "Connection to $1 $2 port [tcp/*] succeeded!"; exit 0; fi
  echo "nc: connect to $1 port $2 (tcp) failed: Connection refused"; exit 1 ;;
nslookup) echo ";; connection timed out; no servers could be reached"; exit 1 ;;
getent) exit 2 ;;
ping) exit 1 ;;
esac
exit 127
"#;
