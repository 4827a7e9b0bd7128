//! Every lifecycle operation on real containers from the local busybox image.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{ok, provider, spec, unique};
use corral_sandbox_core::sandbox::{
    ExecRequest, ExecUser, ProviderError, SandboxProvider, SandboxState, StopOptions,
};

#[tokio::test]
async fn full_lifecycle_on_a_real_container() {
    let Some(p) = provider().await else { return };
    let name = unique("life");
    let to = unique("renamed");
    let _cleanup = common::Cleanup::new(&p, &[&name, &to]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    assert_eq!(ok(sb.info().await, "info").state, SandboxState::Stopped);
    assert!(
        p.list()
            .await
            .is_ok_and(|l| l.iter().any(|i| i.name == name))
    );

    ok(sb.start().await, "start");
    let info = ok(sb.info().await, "info");
    assert_eq!(info.state, SandboxState::Running);
    assert_eq!(
        info.image.as_deref(),
        Some(corral_provider_incus::TEST_IMAGE_ALIAS)
    );

    // argv intact (spaces, quotes, `$`), env, cwd, user, stdout, stderr, exit code.
    let mut req = ExecRequest::new([
        "sh",
        "-c",
        "printf '%s|' \"$1\" \"$GREETING\" \"$(pwd)\" \"$(id -u):$(id -g)\"; echo oops >&2; exit 7",
        "argv0",
        "a b 'c' $HOME",
    ]);
    req.env = BTreeMap::from([("GREETING".to_owned(), "hi there".to_owned())]);
    req.cwd = Some("/tmp".into());
    req.user = Some(ExecUser {
        uid: 65534,
        gid: 65534,
    });
    let out = ok(sb.exec(&req).await, "exec");
    assert_eq!(out.exit_code, 7);
    assert_eq!(
        out.stdout_text(),
        "a b 'c' $HOME|hi there|/tmp|65534:65534|"
    );
    assert_eq!(out.stderr_text(), "oops\n");

    // Standard input, with an argv that a shell would mangle.
    let mut req = ExecRequest::new(["grep", "-c", "a b; $x"]);
    req.stdin = Some(b"a b; $x\nnope\na b; $x\n".to_vec());
    req.user = Some(ExecUser {
        uid: 65534,
        gid: 65534,
    });
    let out = ok(sb.exec(&req).await, "exec with stdin");
    assert_eq!(
        (out.exit_code, out.stdout_text().as_str()),
        (0, "2\n"),
        "{}",
        out.stderr_text()
    );
    let tmp = ok(
        sb.exec(&ExecRequest::new(["ls", "-A", "/tmp"])).await,
        "ls /tmp",
    );
    assert!(
        !tmp.stdout_text().contains("corral-stdin"),
        "stdin file left behind"
    );

    // A timeout is reported and the command is killed in the guest.
    let started = Instant::now();
    let slow = ExecRequest::new(["sleep", "300"]).with_timeout(Duration::from_secs(1));
    let err = sb.exec(&slow).await.err();
    assert!(
        matches!(err, Some(ProviderError::Timeout { .. })),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    let ps = ok(sb.exec(&ExecRequest::new(["ps"])).await, "ps");
    assert!(
        !ps.stdout_text().contains("sleep 300"),
        "{}",
        ps.stdout_text()
    );

    // Files.
    ok(
        sb.push_file("/root/note", b"\x00binary\xffdata", 0o600)
            .await,
        "push",
    );
    assert_eq!(
        ok(sb.pull_file("/root/note").await, "pull"),
        b"\x00binary\xffdata"
    );
    let mode = ok(
        sb.exec(&ExecRequest::new(["stat", "-c", "%a", "/root/note"]))
            .await,
        "stat",
    );
    assert_eq!(mode.stdout_text().trim(), "600");
    assert!(matches!(
        sb.pull_file("/nonexistent").await,
        Err(ProviderError::NotFound { .. })
    ));

    // Snapshots: take, change, restore, list, delete.
    ok(sb.snapshot("s1").await, "snapshot");
    assert!(matches!(
        sb.snapshot("s1").await,
        Err(ProviderError::AlreadyExists { .. })
    ));
    ok(
        sb.push_file("/root/note", b"changed", 0o600).await,
        "push 2",
    );
    ok(sb.restore("s1").await, "restore");
    assert_eq!(
        ok(sb.pull_file("/root/note").await, "pull 2"),
        b"\x00binary\xffdata"
    );
    let snaps = ok(sb.snapshots().await, "snapshots");
    assert_eq!(
        snaps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["s1"]
    );
    ok(sb.delete_snapshot("s1").await, "delete snapshot");
    assert!(ok(sb.snapshots().await, "snapshots").is_empty());
    assert!(matches!(
        sb.delete_snapshot("s1").await,
        Err(ProviderError::NotFound { .. })
    ));

    // Restart keeps it running.
    if sb
        .info()
        .await
        .is_ok_and(|i| i.state != SandboxState::Running)
    {
        ok(sb.start().await, "start after restore");
    }
    ok(
        sb.restart(StopOptions {
            force: true,
            timeout: None,
        })
        .await,
        "restart",
    );
    assert_eq!(ok(sb.info().await, "info").state, SandboxState::Running);

    // Rename is refused while running, with the reason.
    let err = match sb.rename(&to).await {
        Ok(_) => panic!("rename of a running sandbox succeeded"),
        Err(e) => e,
    };
    assert!(err.to_string().contains("stop it first"), "{err}");
    let sb = ok(p.open(&name).await, "open");
    ok(
        sb.stop(StopOptions {
            force: false,
            timeout: Some(Duration::from_secs(20)),
        })
        .await,
        "stop",
    );
    assert_eq!(ok(sb.info().await, "info").state, SandboxState::Stopped);
    let sb = ok(sb.rename(&to).await, "rename");
    assert_eq!(sb.name(), &to);
    assert!(matches!(
        p.open(&name).await,
        Err(ProviderError::NotFound { .. })
    ));
    ok(sb.delete().await, "delete");
    assert!(matches!(
        p.open(&to).await,
        Err(ProviderError::NotFound { .. })
    ));
}

#[tokio::test]
async fn a_missing_image_is_named() {
    let Some(p) = provider().await else { return };
    let mut s = spec(&unique("noimg"));
    s.image = "no-such-image".into();
    let err = p.create(&s).await.err();
    assert!(
        matches!(&err, Some(ProviderError::ImageMissing { image, place, .. })
            if image == "no-such-image" && place.starts_with("Incus project")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_taken_name_is_refused() {
    let Some(p) = provider().await else { return };
    let name = unique("dup");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    let err = p.create(&spec(&name)).await.err();
    assert!(
        matches!(err, Some(ProviderError::AlreadyExists { .. })),
        "{err:?}"
    );
    ok(sb.delete().await, "delete");
}

#[tokio::test]
async fn resources_and_user_data_reach_the_instance() {
    let Some(p) = provider().await else { return };
    let name = unique("res");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let mut s = spec(&name);
    s.resources.cpus = Some(1);
    s.resources.memory_mib = Some(256);
    s.user_data = Some("#cloud-config\nhostname: agent\n".into());
    let sb = ok(p.create(&s).await, "create");
    let inst: corral_provider_incus::api::Instance = ok(
        p.client().get(&format!("/1.0/instances/{name}")).await,
        "raw get",
    );
    assert!(inst.profiles.is_empty());
    assert_eq!(inst.expanded_devices.keys().collect::<Vec<_>>(), ["root"]);
    assert_eq!(inst.config.get("limits.cpu").map(String::as_str), Some("1"));
    assert_eq!(
        inst.config.get("limits.memory").map(String::as_str),
        Some("256MiB")
    );
    assert_eq!(
        inst.config.get("cloud-init.user-data").map(String::as_str),
        Some("#cloud-config\nhostname: agent\n")
    );
    ok(sb.start().await, "start with limits");
    // The limit as Incus applied it (the busybox guest mounts no cgroup fs).
    let state: serde_json::Value = ok(
        p.client()
            .get(&format!("/1.0/instances/{name}/state"))
            .await,
        "state",
    );
    assert_eq!(state["memory"]["total"], serde_json::json!(256u64 << 20));
    ok(sb.delete().await, "delete running");
}
