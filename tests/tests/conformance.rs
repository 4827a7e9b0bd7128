//! The provider conformance scenario (`corral_tests::conformance`) against
//! every provider: real Incus containers, and Multipass and Tart through
//! stateful fake binaries (those tools cannot run on these machines; the
//! fakes prove corral's side of the contract, not the tools').

use std::sync::Arc;
use std::time::Duration;

use corral_provider_multipass::{MultipassConfig, MultipassProvider};
use corral_provider_tart::{TartConfig, TartProvider};
use corral_sandbox_core::profile::{BlockAction, DnsPolicy, EgressMode, Profile};
use corral_sandbox_core::sandbox::{
    Capabilities, InstanceType, NetworkAttachment, Operation, ProviderError, Sandbox, SandboxInfo,
    SandboxProvider, SandboxSpec,
};
use corral_sandbox_core::{HostOs, ProfileSet, SandboxKind, SandboxName};
use corral_tests::conformance::{self, Scenario};
use corral_tests::fakes::FakeTool;
use corral_tests::incus::{local_provider, unique_name};

fn profiles() -> ProfileSet {
    ProfileSet::new(vec![Profile {
        name: "dev".parse().unwrap_or_else(|e| panic!("{e}")),
        bridge: "cb-dev".parse().unwrap_or_else(|e| panic!("{e}")),
        subnet_v4: "192.168.64.0/24".parse().unwrap_or_else(|e| panic!("{e}")),
        subnet_v6: None,
        mode: EgressMode::Internet,
        allow: vec![],
        block: BlockAction::Reject,
        dns: DnsPolicy::Gateway,
        allow_unresolved: false,
        learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
        flows: Default::default(),
        approvals: Default::default(),
        deny: Vec::new(),
    }])
    .unwrap_or_else(|e| panic!("{e}"))
}

fn vm_spec(tag: &str, image: &str) -> SandboxSpec {
    let profile = profiles()
        .get("dev")
        .cloned()
        .unwrap_or_else(|| panic!("profile dev"));
    let mut spec = SandboxSpec::new(unique_name(tag), image);
    spec.instance_type = InstanceType::Vm;
    spec.network = Some(NetworkAttachment::for_profile(&profile, Vec::new()));
    spec
}

async fn conform(provider: &dyn SandboxProvider, scenario: &Scenario) {
    let started = std::time::Instant::now();
    let report = conformance::run(provider, scenario)
        .await
        .unwrap_or_else(|e| panic!("{} provider: {e}", provider.kind()));
    let disagreements = report.disagreements(&provider.capabilities().0);
    assert!(
        disagreements.is_empty(),
        "{}: capabilities() and behaviour disagree: {disagreements:#?}",
        provider.kind()
    );
    eprintln!(
        "{}: conformance passed in {} ms; observed {:?}; notes {:?}",
        provider.kind(),
        started.elapsed().as_millis(),
        report.observed,
        report.notes
    );
}

#[tokio::test]
async fn incus_conforms() {
    let Some(provider) = local_provider().await else {
        return;
    };
    let scenario = Scenario {
        spec: SandboxSpec::new(unique_name("conf"), corral_provider_incus::TEST_IMAGE_ALIAS),
        exec_cwd: true,
        guest_dir: "/tmp".into(),
    };
    conform(&provider, &scenario).await;
}

#[tokio::test]
async fn multipass_conforms_through_a_fake_binary() {
    let fake = FakeTool::multipass();
    let mut config = MultipassConfig::new(fake.staging(), profiles());
    config.timeouts.command = Duration::from_secs(20);
    let runner = corral_provider_multipass::ProcessRunner::with_search_path(fake.search_path());
    let provider = MultipassProvider::with_runner(config, Arc::new(runner), SandboxKind::Multipass)
        .unwrap_or_else(|e| panic!("{e}"));
    let scenario = Scenario {
        spec: vm_spec("mp", "24.04"),
        exec_cwd: true,
        guest_dir: "/tmp".into(),
    };
    conform(&provider, &scenario).await;
    let subs = fake.subcommands();
    for expected in ["launch", "exec", "snapshot", "restore", "clone", "delete"] {
        assert!(
            subs.iter().any(|s| s == expected),
            "corral never ran `multipass {expected}`: {subs:?}"
        );
    }
}

#[tokio::test]
async fn tart_conforms_through_a_fake_binary() {
    let fake = FakeTool::tart();
    let mut config = TartConfig::new(fake.staging(), profiles());
    config.timeouts.boot = Duration::from_secs(10);
    config.timeouts.poll = Duration::from_millis(50);
    let runner = corral_provider_tart::ProcessRunner::with_search_path(fake.search_path());
    let provider = TartProvider::new(config, Arc::new(runner), HostOs::Macos)
        .unwrap_or_else(|e| panic!("{e}"));
    let scenario = Scenario {
        spec: vm_spec("tart", "ghcr.io/cirruslabs/ubuntu:latest"),
        exec_cwd: false,
        guest_dir: "/tmp".into(),
    };
    conform(&provider, &scenario).await;
    let subs = fake.subcommands();
    for expected in ["clone", "exec", "stop", "rename", "delete"] {
        assert!(
            subs.iter().any(|s| s == expected),
            "corral never ran `tart {expected}`: {subs:?}"
        );
    }
}

/// A provider whose `capabilities()` claims one operation it cannot do.
#[derive(Debug)]
struct Overclaiming(MultipassProvider);

#[async_trait::async_trait]
impl SandboxProvider for Overclaiming {
    fn kind(&self) -> SandboxKind {
        self.0.kind()
    }
    fn capabilities(&self) -> Capabilities {
        let mut caps = self.0.capabilities();
        caps.0.insert(Operation::Rename);
        caps
    }
    async fn create(&self, spec: &SandboxSpec) -> Result<Box<dyn Sandbox>, ProviderError> {
        self.0.create(spec).await
    }
    async fn open(&self, name: &SandboxName) -> Result<Box<dyn Sandbox>, ProviderError> {
        self.0.open(name).await
    }
    async fn list(&self) -> Result<Vec<SandboxInfo>, ProviderError> {
        self.0.list().await
    }
}

/// The suite checks itself: a provider that over-claims fails it, and the
/// scenario still deletes what it created.
#[tokio::test]
async fn an_overclaiming_provider_fails_the_scenario() {
    let fake = FakeTool::multipass();
    let mut config = MultipassConfig::new(fake.staging(), profiles());
    config.timeouts.command = Duration::from_secs(20);
    let runner = corral_provider_multipass::ProcessRunner::with_search_path(fake.search_path());
    let inner = MultipassProvider::with_runner(config, Arc::new(runner), SandboxKind::Multipass)
        .unwrap_or_else(|e| panic!("{e}"));
    let provider = Overclaiming(inner);
    let scenario = Scenario {
        spec: vm_spec("over", "24.04"),
        exec_cwd: true,
        guest_dir: "/tmp".into(),
    };
    let err = conformance::run(&provider, &scenario)
        .await
        .err()
        .unwrap_or_else(|| panic!("an over-claiming provider passed the conformance scenario"));
    assert!(err.to_string().contains("rename"), "{err}");
    let left = provider.list().await.unwrap_or_else(|e| panic!("{e}"));
    assert!(
        left.is_empty(),
        "the scenario left sandboxes behind: {left:?}"
    );
}
