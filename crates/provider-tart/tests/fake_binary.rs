//! The Tart provider driven through the `SandboxProvider` / `Sandbox`
//! traits against a recording fake `tart` and fake `softnet` on PATH.
//! Nothing here touches a real Tart or Softnet (they need macOS).

// Test helpers: a failed setup step should abort the test loudly.
#![allow(clippy::unwrap_used)]

mod fake;

use std::sync::Arc;
use std::time::{Duration, Instant};

use corral_provider_support::SetupError;
use corral_provider_support::testing::{dev_profiles, mode, sv};
use corral_provider_tart::{
    ConfigError, FilterHealth, TartConfig, TartProvider, Timeouts, check_platform,
};
use corral_sandbox_core::sandbox::{
    ExecRequest, InstanceType, NetworkAttachment, Operation, ProviderError, SandboxProvider,
    SandboxSpec, SandboxState, StopOptions,
};
use corral_sandbox_core::{HostOs, ProfileSet, SandboxKind, SandboxName};
use fake::Fake;

fn profiles() -> ProfileSet {
    dev_profiles("192.168.64.0/24")
}

fn config(fake: &Fake) -> TartConfig {
    let mut c = TartConfig::new(fake.root.join("staging"), profiles());
    c.timeouts = Timeouts {
        clone: Duration::from_secs(20),
        command: Duration::from_secs(20),
        exec: Duration::from_secs(20),
        boot: Duration::from_secs(10),
        poll: Duration::from_millis(50),
    };
    c
}

fn provider_with(fake: &Fake, c: TartConfig) -> TartProvider {
    TartProvider::new(c, Arc::new(fake.runner()), HostOs::Macos).unwrap()
}

fn provider(fake: &Fake) -> TartProvider {
    provider_with(fake, config(fake))
}

fn spec(name: &str, allow: &[&str]) -> SandboxSpec {
    let profile = profiles().get("dev").unwrap().clone();
    let resolved = allow.iter().map(|a| a.parse().unwrap()).collect();
    let mut s = SandboxSpec::new(name.parse().unwrap(), "ghcr.io/cirruslabs/ubuntu:latest");
    s.instance_type = InstanceType::Vm;
    s.network = Some(NetworkAttachment::for_profile(&profile, resolved));
    s.resources.cpus = Some(2);
    s.resources.memory_mib = Some(4096);
    s
}

#[tokio::test]
async fn create_start_exec_stop_delete_under_softnet() {
    let fake = Fake::new();
    let provider = provider(&fake);
    let sandbox = provider
        .create(&spec(
            "agent-1",
            &["93.184.215.14/32", "2606:4700::1111/128"],
        ))
        .await
        .unwrap();
    assert_eq!(
        fake.calls(),
        vec![
            sv(&[
                "clone",
                "ghcr.io/cirruslabs/ubuntu:latest",
                "corral-agent-1"
            ]),
            sv(&["set", "corral-agent-1", "--cpu", "2", "--memory", "4096"]),
        ]
    );
    let dir = fake.root.join("staging/corral-agent-1");
    assert_eq!(mode(&fake.root.join("staging")), 0o700);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join("corral-stamp.json")), 0o600);
    assert_eq!(sandbox.info().await.unwrap().state, SandboxState::Stopped);

    let started = Instant::now();
    sandbox.start().await.unwrap();
    let boot = started.elapsed();
    assert_eq!(
        fake.run_argv().unwrap(),
        sv(&[
            "run",
            "corral-agent-1",
            "--no-graphics",
            "--net-softnet",
            "--net-softnet-block=0.0.0.0/0",
            "--net-softnet-allow=192.168.64.1/32,93.184.215.14/32",
        ])
    );
    for file in ["run.log", "run.pid", "softnet.json"] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }
    let name: SandboxName = "agent-1".parse().unwrap();
    assert_eq!(
        provider.filter_health(&name).await.unwrap(),
        FilterHealth::Alive
    );
    let info = sandbox.info().await.unwrap();
    assert_eq!(info.state, SandboxState::Running);
    assert_eq!(info.addresses[0].to_string(), "192.168.64.5");
    eprintln!("fake boot to filter-alive took {boot:?}");

    let out = sandbox
        .exec(&ExecRequest::new([
            "sh",
            "-c",
            "printf '%s|' \"$@\"; exit 4",
            "--",
            "a b",
            "$(x)",
        ]))
        .await
        .unwrap();
    assert_eq!(out.exit_code, 4);
    assert_eq!(out.stdout_text(), "a b|$(x)|");

    // Tart has no snapshots: a typed refusal, not a panic.
    let err = sandbox.snapshot("s1").await.unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::Unsupported {
                kind: SandboxKind::Tart,
                operation: Operation::Snapshot
            }
        ),
        "{err}"
    );
    assert!(matches!(
        sandbox.restore("s1").await,
        Err(ProviderError::Unsupported { .. })
    ));

    let run_pid = fake.run_pid().unwrap();
    sandbox.stop(StopOptions::default()).await.unwrap();
    assert_eq!(
        fake.calls().last().unwrap(),
        &sv(&["stop", "corral-agent-1"])
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    while Fake::alive(run_pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!Fake::alive(run_pid));
    assert!(!dir.join("run.pid").exists());

    let listed = provider.list().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].name.as_str(), "agent-1");

    sandbox.delete().await.unwrap();
    assert_eq!(
        fake.calls().last().unwrap(),
        &sv(&["delete", "corral-agent-1"])
    );
    assert!(!dir.exists());
}

#[tokio::test]
async fn a_dead_softnet_is_a_dead_filter_and_exec_is_refused() {
    let fake = Fake::new();
    let provider = provider(&fake);
    let sandbox = provider.create(&spec("a", &[])).await.unwrap();
    sandbox.start().await.unwrap();
    Fake::kill(fake.softnet_pid().unwrap());
    let name: SandboxName = "a".parse().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut health = provider.filter_health(&name).await.unwrap();
    while health.is_alive() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        health = provider.filter_health(&name).await.unwrap();
    }
    assert!(matches!(health, FilterHealth::Dead { .. }), "{health}");
    let err = sandbox.exec(&ExecRequest::new(["true"])).await.unwrap_err();
    assert!(err.to_string().contains("Softnet filter"), "{err}");
    sandbox
        .stop(StopOptions {
            force: true,
            timeout: None,
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn never_started_is_unknown_not_alive() {
    let fake = Fake::new();
    let provider = provider(&fake);
    provider.create(&spec("a", &[])).await.unwrap();
    let health = provider.filter_health(&"a".parse().unwrap()).await.unwrap();
    assert!(matches!(health, FilterHealth::Unknown { .. }), "{health}");
    assert!(!health.is_alive());
}

#[tokio::test]
async fn a_vm_that_boots_without_softnet_is_stopped_not_served() {
    let fake = Fake::new();
    let mut c = config(&fake);
    c.timeouts.boot = Duration::from_millis(800);
    let provider = provider_with(&fake, c);
    let sandbox = provider.create(&spec("a", &[])).await.unwrap();
    fake.without_softnet_at_run();
    let err = sandbox.start().await.unwrap_err();
    assert!(err.to_string().contains("no fallback to NAT"), "{err}");
    let pid = fake.run_pid().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Fake::alive(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!Fake::alive(pid), "the unfiltered VM was killed");
}

#[tokio::test]
async fn tart_run_failing_fast_reports_its_log() {
    let fake = Fake::new();
    let provider = provider(&fake);
    let sandbox = provider.create(&spec("a", &[])).await.unwrap();
    fake.canned(
        "run",
        "",
        "Error: Softnet: failed to start (sudo needs a password)",
        1,
    );
    let started = Instant::now();
    let err = sandbox.start().await.unwrap_err();
    assert!(err.to_string().contains("exited while booting"), "{err}");
    assert!(err.to_string().contains("sudo needs a password"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn missing_softnet_refuses_without_falling_back() {
    let fake = Fake::new();
    let provider = provider(&fake);
    let sandbox = provider.create(&spec("a", &[])).await.unwrap();
    fake.remove_softnet();
    let err = sandbox.start().await.unwrap_err();
    assert!(matches!(err, ProviderError::Io { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("never runs Tart VMs without Softnet"),
        "{err}"
    );
    assert!(fake.run_argv().is_none(), "tart run was never attempted");
    let err = TartProvider::new(config(&fake), Arc::new(fake.runner()), HostOs::Macos).unwrap_err();
    assert!(matches!(err, ConfigError::SoftnetMissing), "{err}");
}

#[tokio::test]
async fn refused_everywhere_but_macos() {
    let fake = Fake::new();
    for host in [HostOs::Linux, HostOs::Windows] {
        let err = TartProvider::new(config(&fake), Arc::new(fake.runner()), host).unwrap_err();
        assert!(
            matches!(err, ConfigError::Setup(SetupError::Platform { .. })),
            "{err}"
        );
        assert!(err.to_string().contains("macOS"), "{err}");
        assert!(check_platform(host).is_err());
    }
    assert!(check_platform(HostOs::Macos).is_ok());
    if std::env::consts::OS != "macos" {
        assert!(TartProvider::on_this_host(config(&fake)).is_err());
    }
}

#[tokio::test]
async fn net_run_arguments_are_refused() {
    let fake = Fake::new();
    for bad in [
        "--net-bridged=en0",
        "--net-host",
        "--net-softnet-allow=0.0.0.0/0",
    ] {
        let mut c = config(&fake);
        c.extra_run_args = vec![bad.to_owned()];
        let err = TartProvider::new(c, Arc::new(fake.runner()), HostOs::Macos).unwrap_err();
        assert!(matches!(err, ConfigError::RunArg(_)), "{bad}: {err}");
    }
}

#[tokio::test]
async fn allowlist_is_checked_at_create() {
    let fake = Fake::new();
    let provider = provider(&fake);
    for bad in ["10.1.2.3/32", "1.1.1.0/24", "169.254.169.254/32"] {
        let err = provider.create(&spec("a", &[bad])).await.unwrap_err();
        assert!(
            matches!(
                err,
                ProviderError::InvalidSpec {
                    field: "network",
                    ..
                }
            ),
            "{bad}: {err}"
        );
    }
    let many: Vec<String> = (1..=65).map(|i| format!("8.8.{i}.8/32")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let err = provider.create(&spec("a", &many)).await.unwrap_err();
    assert!(err.to_string().contains("exceed the bound of 64"), "{err}");
    assert_eq!(fake.count(), 0);
}

#[tokio::test]
async fn unknown_profile_lists_the_configured_ones() {
    let fake = Fake::new();
    let provider = provider(&fake);
    let mut s = spec("a", &[]);
    if let Some(att) = s.network.as_mut() {
        att.profile = "prod".parse().unwrap();
    }
    let err = provider.create(&s).await.unwrap_err();
    assert!(matches!(err, ProviderError::UnknownProfile { .. }), "{err}");
    assert!(
        err.to_string().contains("configured profiles: dev"),
        "{err}"
    );
}

#[tokio::test]
async fn backend_errors_timeouts_and_malformed_json_are_typed() {
    let fake = Fake::new();
    let mut c = config(&fake);
    c.timeouts.command = Duration::from_millis(300);
    let provider = provider_with(&fake, c);
    fake.canned(
        "clone",
        "",
        "Error: failed to pull ghcr.io/x: unauthorized",
        1,
    );
    let err = provider.create(&spec("a", &[])).await.unwrap_err();
    match &err {
        ProviderError::Backend {
            operation,
            message,
            code,
            ..
        } => {
            assert_eq!(operation, "clone");
            assert!(message.contains("unauthorized"), "{message}");
            assert_eq!(*code, Some(1));
        }
        other => panic!("unexpected {other}"),
    }
    assert!(!fake.root.join("staging/corral-a").exists());
    fake.uncan("clone");

    let sandbox = provider.create(&spec("a", &[])).await.unwrap();
    fake.canned("list", "[{\"Name\": \"corral-a\", ", "", 0);
    let err = sandbox.info().await.unwrap_err();
    assert!(matches!(err, ProviderError::Malformed { .. }), "{err}");
    fake.uncan("list");
    fake.sleep("list", 5);
    let started = Instant::now();
    let err = sandbox.info().await.unwrap_err();
    assert!(matches!(err, ProviderError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn unowned_vms_are_refused_and_unlisted() {
    let fake = Fake::new();
    let provider = provider(&fake);
    fake.canned(
        "list",
        r#"[{"Name":"corral-stray","State":"running"},{"Name":"mine","State":"stopped"}]"#,
        "",
        0,
    );
    let err = provider.open(&"stray".parse().unwrap()).await.unwrap_err();
    assert!(matches!(err, ProviderError::NotOwned { .. }), "{err}");
    assert!(provider.list().await.unwrap().is_empty());
    let err = provider.open(&"ghost".parse().unwrap()).await.unwrap_err();
    assert!(matches!(err, ProviderError::NotFound { .. }), "{err}");
}

#[tokio::test]
async fn clone_copies_stamp_and_policy() {
    let fake = Fake::new();
    let provider = provider(&fake);
    let sandbox = provider
        .create(&spec("src", &["1.1.1.1/32"]))
        .await
        .unwrap();
    let copy = sandbox
        .clone_to(&"dst".parse().unwrap(), None)
        .await
        .unwrap();
    assert_eq!(
        fake.calls().last().unwrap(),
        &sv(&["clone", "corral-src", "corral-dst"])
    );
    assert_eq!(copy.name().as_str(), "dst");
    let policy =
        std::fs::read_to_string(fake.root.join("staging/corral-dst/softnet.json")).unwrap();
    assert!(policy.contains("1.1.1.1"), "{policy}");
}

#[tokio::test]
async fn rename_moves_the_stamp_with_the_vm() {
    let fake = Fake::new();
    let provider = provider(&fake);
    let sandbox = provider.create(&spec("old", &[])).await.unwrap();
    let renamed = sandbox.rename(&"new".parse().unwrap()).await.unwrap();
    assert_eq!(
        fake.calls().last().unwrap(),
        &sv(&["rename", "corral-old", "corral-new"])
    );
    assert_eq!(renamed.name().as_str(), "new");
    assert!(!fake.root.join("staging/corral-old").exists());
    let stamp =
        std::fs::read_to_string(fake.root.join("staging/corral-new/corral-stamp.json")).unwrap();
    assert!(stamp.contains("\"vm\": \"corral-new\""), "{stamp}");
    assert_eq!(renamed.info().await.unwrap().state, SandboxState::Stopped);
    let err = provider.open(&"old".parse().unwrap()).await.unwrap_err();
    assert!(matches!(err, ProviderError::NotFound { .. }), "{err}");
}
