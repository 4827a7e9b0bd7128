//! The provider driven through the `SandboxProvider` / `Sandbox` traits
//! against a recording fake `multipass` (and fake `ssh`) on PATH.
//! Nothing here touches a real Multipass.

// Test helpers: a failed setup step should abort the test loudly.
#![allow(clippy::unwrap_used)]

mod fake;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use corral_provider_multipass::{
    MultipassConfig, MultipassProvider, ProcessRunner, SshRunner, SshTarget, Timeouts,
};
use corral_provider_support::testing::{dev_profiles, mode, sv};
use corral_sandbox_core::sandbox::{
    ExecRequest, InstanceType, NetworkAttachment, ProviderError, SandboxProvider, SandboxSpec,
    SandboxState, StopOptions,
};
use corral_sandbox_core::{ProfileSet, SandboxKind, SandboxName};
use fake::Fake;

fn profiles() -> ProfileSet {
    dev_profiles("172.20.8.0/22")
}

fn config(fake: &Fake) -> MultipassConfig {
    let mut c = MultipassConfig::new(fake.root.join("staging"), profiles());
    c.timeouts = Timeouts {
        launch: Duration::from_secs(20),
        command: Duration::from_secs(20),
        exec: Duration::from_secs(20),
    };
    c
}

fn local(fake: &Fake) -> MultipassProvider {
    MultipassProvider::with_runner(
        config(fake),
        Arc::new(fake.runner()),
        SandboxKind::Multipass,
    )
    .unwrap()
}

fn spec(name: &str) -> SandboxSpec {
    let profile = profiles().get("dev").unwrap().clone();
    let mut s = SandboxSpec::new(name.parse().unwrap(), "24.04");
    s.instance_type = InstanceType::Vm;
    s.network = Some(NetworkAttachment::for_profile(&profile, vec![]));
    s.resources.cpus = Some(2);
    s.resources.memory_mib = Some(2048);
    s.resources.disk_gib = Some(10);
    s
}

#[tokio::test]
async fn create_exec_snapshot_restore_delete() {
    let fake = Fake::new();
    let provider = local(&fake);
    let staging = fake.root.join("staging");
    let vm_dir = staging.join("corral-agent-1");
    let cloud_init = vm_dir.join("cloud-init.yaml");

    let sandbox = provider.create(&spec("agent-1")).await.unwrap();
    assert_eq!(
        fake.calls(),
        vec![
            sv(&[
                "launch",
                "--name",
                "corral-agent-1",
                "--cpus",
                "2",
                "--memory",
                "2048M",
                "--disk",
                "10G",
                "--cloud-init",
                cloud_init.to_str().unwrap(),
                "--network",
                "name=cb-dev,mode=auto",
                "24.04",
            ]),
            sv(&["stop", "corral-agent-1"]),
        ]
    );
    assert_eq!(mode(&staging), 0o700);
    assert_eq!(mode(&vm_dir), 0o700);
    assert_eq!(mode(&cloud_init), 0o600);
    let user_data = std::fs::read_to_string(&cloud_init).unwrap();
    assert!(user_data.contains("subnet='172.20.8.0/22'"), "{user_data}");
    assert!(user_data.contains("gateway='172.20.8.1'"), "{user_data}");

    fake.info_state("corral-agent-1", "Running");
    let info = sandbox.info().await.unwrap();
    assert_eq!(info.state, SandboxState::Running);
    assert_eq!(info.profile.unwrap().as_str(), "dev");
    assert_eq!(info.addresses[0].to_string(), "10.99.5.23");

    fake.run_exec();
    let before = fake.count();
    let out = sandbox
        .exec(&ExecRequest::new([
            "sh",
            "-c",
            "printf '%s|' \"$@\"; echo err >&2; exit 3",
            "--",
            "a b",
            "$(touch pwned)",
            "it's",
        ]))
        .await
        .unwrap();
    assert_eq!(out.exit_code, 3);
    assert_eq!(out.stdout_text(), "a b|$(touch pwned)|it's|");
    assert_eq!(out.stderr_text(), "err\n");
    assert_eq!(
        fake.calls()[before][..4],
        sv(&["exec", "corral-agent-1", "--", "sh"])
    );

    sandbox.restart(StopOptions::default()).await.unwrap();
    assert_eq!(
        fake.calls().last().unwrap(),
        &sv(&["restart", "corral-agent-1"])
    );
    sandbox
        .restart(StopOptions {
            force: true,
            timeout: None,
        })
        .await
        .unwrap();
    let calls = fake.calls();
    assert_eq!(
        calls[calls.len() - 2..],
        [
            sv(&["stop", "--force", "corral-agent-1"]),
            sv(&["start", "corral-agent-1"])
        ]
    );

    // Multipass snapshots stopped instances only: refused while running.
    let err = sandbox.snapshot("s1").await.unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::InvalidState {
                state: SandboxState::Running,
                ..
            }
        ),
        "{err}"
    );

    sandbox.stop(StopOptions::default()).await.unwrap();
    fake.info_state("corral-agent-1", "Stopped");
    sandbox.snapshot("s1").await.unwrap();
    sandbox.restore("s1").await.unwrap();
    let calls = fake.calls();
    let n = calls.len();
    let info = sv(&["info", "corral-agent-1", "--format", "json"]);
    assert_eq!(
        calls[n - 4..],
        [
            info.clone(),
            sv(&["snapshot", "--name", "s1", "corral-agent-1"]),
            info,
            sv(&["restore", "--destructive", "corral-agent-1.s1"]),
        ]
    );

    fake.respond(
        "snapshots",
        r#"{"errors":[],"info":{"corral-agent-1":{"s1":{"comment":"","parent":""}}}}"#,
        0,
    );
    let snaps = sandbox.snapshots().await.unwrap();
    assert_eq!(snaps.len(), 1);
    assert_eq!(snaps[0].name, "s1");

    let listed = provider.list().await;
    // list: the fake answers `list` with nothing canned, i.e. empty output.
    assert!(
        matches!(listed, Err(ProviderError::Malformed { .. })),
        "{listed:?}"
    );
    fake.respond(
        "list",
        r#"{"list":[{"name":"corral-agent-1","state":"Stopped","ipv4":[]},{"name":"corral-stray","state":"Running","ipv4":[]},{"name":"mine","state":"Running","ipv4":[]}]}"#,
        0,
    );
    let listed = provider.list().await.unwrap();
    assert_eq!(listed.len(), 1, "only stamped VMs are listed: {listed:?}");
    assert_eq!(listed[0].name.as_str(), "agent-1");

    sandbox.delete().await.unwrap();
    assert_eq!(
        fake.calls().last().unwrap(),
        &sv(&["delete", "--purge", "corral-agent-1"])
    );
    assert!(!vm_dir.exists());
}

#[tokio::test]
async fn clone_gets_its_own_stamp() {
    let fake = Fake::new();
    let provider = local(&fake);
    let sandbox = provider.create(&spec("src")).await.unwrap();
    fake.info_state("corral-src", "Stopped");
    let target: SandboxName = "copy".parse().unwrap();
    let copy = sandbox.clone_to(&target, None).await.unwrap();
    assert_eq!(
        fake.calls().last().unwrap(),
        &sv(&["clone", "--name", "corral-copy", "corral-src"])
    );
    assert_eq!(copy.name().as_str(), "copy");
    assert!(
        fake.root
            .join("staging/corral-copy/corral-stamp.json")
            .exists()
    );
    let err = sandbox.clone_to(&target, Some("s1")).await.unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::InvalidSpec {
                field: "from_snapshot",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn unknown_profile_lists_the_configured_ones_and_runs_nothing() {
    let fake = Fake::new();
    let provider = local(&fake);
    let mut s = spec("a");
    let mut att = s.network.take().unwrap();
    att.profile = "prod".parse().unwrap();
    s.network = Some(att);
    let err = provider.create(&s).await.unwrap_err();
    match &err {
        ProviderError::UnknownProfile {
            profile,
            configured,
        } => {
            assert_eq!(profile, "prod");
            assert_eq!(configured, &vec!["dev".to_owned()]);
        }
        other => panic!("unexpected {other}"),
    }
    assert!(err.to_string().contains("configured profiles: dev"));
    assert_eq!(fake.count(), 0);
}

#[tokio::test]
async fn mismatched_attachment_is_refused() {
    let fake = Fake::new();
    let provider = local(&fake);
    let mut s = spec("a");
    if let Some(att) = s.network.as_mut() {
        att.gateway_v4 = "172.20.8.9".parse().unwrap();
    }
    let err = provider.create(&s).await.unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::InvalidSpec {
                field: "network",
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(fake.count(), 0);
}

#[tokio::test]
async fn unowned_vm_is_refused() {
    let fake = Fake::new();
    let provider = local(&fake);
    fake.info_state("corral-stray", "Running");
    let err = provider.open(&"stray".parse().unwrap()).await.unwrap_err();
    assert!(matches!(err, ProviderError::NotOwned { .. }), "{err}");
    assert!(err.to_string().contains("no ownership stamp"), "{err}");
    // A VM that is not there at all is NotFound, not NotOwned.
    fake.fail(
        "info",
        "info failed: instance \"corral-ghost\" does not exist\n",
        2,
    );
    let err = provider.open(&"ghost".parse().unwrap()).await.unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::NotFound {
                what: "sandbox",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn non_zero_exit_is_a_backend_error_with_the_message() {
    let fake = Fake::new();
    let provider = local(&fake);
    fake.fail(
        "launch",
        "launch failed: Remote \"\" is unknown or unreachable.\n",
        2,
    );
    let err = provider.create(&spec("a")).await.unwrap_err();
    match &err {
        ProviderError::Backend {
            kind,
            operation,
            message,
            code,
        } => {
            assert_eq!(*kind, SandboxKind::Multipass);
            assert_eq!(operation, "launch");
            assert!(message.contains("unknown or unreachable"), "{message}");
            assert_eq!(*code, Some(2));
        }
        other => panic!("unexpected {other}"),
    }
    // The stamp stays so the half-made VM can still be deleted by corral.
    assert!(
        fake.root
            .join("staging/corral-a/corral-stamp.json")
            .exists()
    );
}

#[tokio::test]
async fn already_existing_foreign_vm_is_not_stamped() {
    let fake = Fake::new();
    let provider = local(&fake);
    fake.fail(
        "launch",
        "launch failed: instance \"corral-a\" already exists\n",
        2,
    );
    let err = provider.create(&spec("a")).await.unwrap_err();
    assert!(matches!(err, ProviderError::AlreadyExists { .. }), "{err}");
    assert!(!fake.root.join("staging/corral-a").exists());
}

#[tokio::test]
async fn timeout_is_typed() {
    let fake = Fake::new();
    let mut c = config(&fake);
    c.timeouts.command = Duration::from_millis(300);
    let provider =
        MultipassProvider::with_runner(c, Arc::new(fake.runner()), SandboxKind::Multipass).unwrap();
    let sandbox = provider.create(&spec("a")).await.unwrap();
    fake.info_state("corral-a", "Running");
    fake.sleep("info", 5);
    let started = std::time::Instant::now();
    let err = sandbox.info().await.unwrap_err();
    assert!(matches!(err, ProviderError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(3));
    // An exec timeout comes from the request.
    fake.sleep("exec", 5);
    let err = sandbox
        .exec(&ExecRequest::new(["true"]).with_timeout(Duration::from_millis(200)))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::Timeout { .. }), "{err}");
}

#[tokio::test]
async fn malformed_json_is_typed() {
    let fake = Fake::new();
    let provider = local(&fake);
    let sandbox = provider.create(&spec("a")).await.unwrap();
    fake.respond("info", "{\"info\": {\"corral-a\": {\"state\": ", 0);
    let err = sandbox.info().await.unwrap_err();
    assert!(matches!(err, ProviderError::Malformed { .. }), "{err}");
    fake.respond(
        "info",
        r#"{"errors":[],"info":{"other":{"state":"Running"}}}"#,
        0,
    );
    let err = sandbox.info().await.unwrap_err();
    assert!(err.to_string().contains("no entry for `corral-a`"), "{err}");
}

#[tokio::test]
async fn missing_multipass_is_an_io_error_and_leaves_nothing() {
    let fake = Fake::new();
    let runner = ProcessRunner::with_search_path(fake.root.join("nowhere").into_os_string());
    let provider =
        MultipassProvider::with_runner(config(&fake), Arc::new(runner), SandboxKind::Multipass)
            .unwrap();
    let err = provider.create(&spec("a")).await.unwrap_err();
    assert!(matches!(err, ProviderError::Io { .. }), "{err}");
    assert!(err.to_string().contains("on PATH"), "{err}");
    assert!(!fake.root.join("staging/corral-a").exists());
}

#[tokio::test]
async fn container_specs_and_mounts_are_refused() {
    let fake = Fake::new();
    let provider = local(&fake);
    let mut s = spec("a");
    s.instance_type = InstanceType::Container;
    assert!(matches!(
        provider.create(&s).await,
        Err(ProviderError::InvalidSpec {
            field: "instance_type",
            ..
        })
    ));
    let mut s = spec("a");
    s.mounts.push(corral_sandbox_core::sandbox::MountSpec {
        source: "/home".into(),
        target: "/mnt".into(),
        read_only: true,
    });
    assert!(matches!(
        provider.create(&s).await,
        Err(ProviderError::Mount { .. })
    ));
    assert_eq!(fake.count(), 0);
}

fn remote(fake: &Fake) -> MultipassProvider {
    let ssh = SshRunner::with_local(SshTarget::new("ops@exec-1").unwrap(), fake.runner());
    MultipassProvider::remote(config(fake), ssh).unwrap()
}

#[tokio::test]
async fn remote_over_ssh_keeps_hostile_arguments_intact() {
    let fake = Fake::new();
    let provider = remote(&fake);
    assert_eq!(provider.kind(), SandboxKind::MultipassRemote);
    let sandbox = provider.create(&spec("agent-1")).await.unwrap();
    assert_eq!(fake.ssh_target(), "ops@exec-1");
    // User-data travels over stdin: the staging dir is not on the executor.
    let launch = &fake.calls()[0];
    assert_eq!(
        launch[launch.len() - 4..],
        sv(&["-", "--network", "name=cb-dev,mode=auto", "24.04"])
    );
    let user_data = String::from_utf8(fake.stdin(1)).unwrap();
    assert!(user_data.starts_with("#cloud-config\n"), "{user_data}");
    assert!(
        !fake
            .root
            .join("staging/corral-agent-1/cloud-init.yaml")
            .exists()
    );

    let hostile = [
        "it's",
        "$(touch /tmp/corral-mp-pwned)",
        "a; rm -rf /",
        "line\nbreak",
        "`id`",
        "",
        "*",
        "\"q\"",
        "\\",
    ];
    fake.run_exec();
    let before = fake.count();
    let mut argv = vec!["printf", "%s\\0"];
    argv.extend(hostile);
    let out = sandbox.exec(&ExecRequest::new(argv.clone())).await.unwrap();
    assert_eq!(out.exit_code, 0, "{}", out.stderr_text());
    let printed: Vec<&str> = out.stdout_text().leak().split('\0').collect();
    assert_eq!(printed[..hostile.len()], hostile);
    let mut expected = sv(&["exec", "corral-agent-1", "--"]);
    expected.extend(argv.iter().map(|a| (*a).to_owned()));
    assert_eq!(fake.calls()[before], expected);
    assert!(!Path::new("/tmp/corral-mp-pwned").exists());
}

#[tokio::test]
async fn a_stamp_for_another_location_does_not_count() {
    let fake = Fake::new();
    local(&fake).create(&spec("a")).await.unwrap();
    let provider = remote(&fake);
    fake.info_state("corral-a", "Stopped");
    let err = provider.open(&"a".parse().unwrap()).await.unwrap_err();
    assert!(matches!(err, ProviderError::NotOwned { .. }), "{err}");
    assert!(err.to_string().contains("ssh:ops@exec-1"), "{err}");
}

#[tokio::test]
async fn ssh_failure_is_reported_as_such() {
    let fake = Fake::new();
    let provider = remote(&fake);
    let sandbox = provider.create(&spec("a")).await.unwrap();
    fake.ssh_fails();
    let err = provider.list().await.unwrap_err();
    match &err {
        ProviderError::Backend { message, code, .. } => {
            assert!(message.contains("ssh to ops@exec-1 failed"), "{message}");
            assert_eq!(*code, Some(255));
        }
        other => panic!("unexpected {other}"),
    }
    // exec over ssh: 255 is ssh's failure, not the command's exit code.
    let err = sandbox.exec(&ExecRequest::new(["true"])).await.unwrap_err();
    assert!(
        matches!(
            err,
            ProviderError::Backend {
                code: Some(255),
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test]
async fn an_api_callers_file_image_never_reaches_multipass() {
    let fake = Fake::new();
    let provider = local(&fake);
    let before = fake.count();
    let mut s = spec("img");
    s.image = "file:///etc/shadow".into();
    let err = provider.create(&s).await.err();
    assert!(
        matches!(err, Some(ProviderError::InvalidSpec { field: "image", .. })),
        "{err:?}"
    );
    assert_eq!(fake.count(), before, "multipass was called");
}
