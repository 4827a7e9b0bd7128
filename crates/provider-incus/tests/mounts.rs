//! Host mounts on a real container: read-only mounts are staged copies,
//! read-write mounts are the resolved source, escapes are refused.
//!
//! Runs in its own project (`corral-mounts`, prepared by
//! scripts/incus-image.sh), because the disk-path allowlist is project-wide
//! and the other tests converge `corral` to "no host disks".

mod common;

use std::fs;
use std::path::Path;

use common::{ok, provider_with, unique};
use corral_provider_incus::{IncusConfig, MountPolicy, TEST_IMAGE_ALIAS};
use corral_sandbox_core::sandbox::{
    ExecRequest, MountSpec, ProviderError, SandboxProvider, SandboxSpec,
};

fn mount(source: &Path, target: &str, read_only: bool) -> MountSpec {
    MountSpec {
        source: source.to_owned(),
        target: target.into(),
        read_only,
    }
}

#[tokio::test]
async fn mounts_on_a_real_container() {
    // Fixed roots: the project's disk-path allowlist names them, so a run
    // that died half-way leaves instances the next run can still converge
    // around. Each run works in its own subdirectory.
    let base = Path::new("/var/lib/corral/mount-test");
    let staging_root = Path::new("/var/lib/corral/mount-test-staging");
    ok(fs::create_dir_all(base), "mkdir base");
    let run = unique("run");
    let roots = base.join(run.as_str());
    ok(fs::create_dir_all(roots.join("repo")), "mkdir repo");
    // Read-write sources must be on a nosuid filesystem.
    let rw_fs = corral_test_support::Tmpfs::mount(&roots, true);
    ok(
        std::os::unix::fs::symlink(rw_fs.path(), roots.join("rw")),
        "link rw",
    );
    // The container's root is an unprivileged host id: let it write here.
    ok(
        fs::set_permissions(
            rw_fs.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o777),
        ),
        "chmod rw",
    );
    ok(fs::write(roots.join("repo/file"), b"hello"), "write");
    let mut config = IncusConfig::local();
    config.project = "corral-mounts".into();
    config.mounts = MountPolicy {
        allowed_roots: vec![base.to_owned()],
        staging_root: staging_root.to_owned(),
        ..MountPolicy::default()
    };
    let Some(p) = provider_with(config).await else {
        return;
    };

    // An escape through a symlink is refused before anything is created.
    let link = roots.join("escape");
    ok(std::os::unix::fs::symlink("/etc", &link), "symlink");
    let name = unique("mnt");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let mut spec = SandboxSpec::new(name.clone(), TEST_IMAGE_ALIAS);
    spec.mounts = vec![mount(&link, "/mnt/etc", true)];
    let err = p.create(&spec).await.err();
    assert!(matches!(err, Some(ProviderError::Mount { .. })), "{err:?}");
    assert!(matches!(
        p.open(&name).await,
        Err(ProviderError::NotFound { .. })
    ));

    spec.mounts = vec![
        mount(&roots.join("repo"), "/mnt/ro", true),
        mount(&roots.join("rw"), "/mnt/rw", false),
    ];
    let sb = ok(p.create(&spec).await, "create with mounts");
    ok(sb.start().await, "start");
    // The read-only mount is a snapshot: later host edits do not show.
    ok(fs::write(roots.join("repo/file"), b"changed"), "rewrite");
    let sh = |script: &str| ExecRequest::new(["sh", "-c", script]);
    let out = ok(sb.exec(&sh("cat /mnt/ro/file")).await, "cat");
    assert_eq!(out.stdout, b"hello");
    let out = ok(sb.exec(&sh("echo x > /mnt/ro/new")).await, "write ro");
    assert_ne!(out.exit_code, 0, "a read-only mount was writable");
    let out = ok(sb.exec(&sh("echo written > /mnt/rw/out")).await, "write rw");
    assert!(out.success(), "{}", out.stderr_text());
    assert_eq!(
        ok(fs::read(roots.join("rw/out")), "read back"),
        b"written\n"
    );
    // Without `shift` (refused under a disk-path allowlist) the guest's
    // root writes as its mapped host id, not as this process.
    use std::os::unix::fs::MetadataExt;
    let meta = ok(fs::metadata(roots.join("rw/out")), "stat");
    assert_ne!(meta.uid(), corral_provider_incus::mounts::effective_ids().0);

    let inst: corral_provider_incus::api::Instance = ok(
        p.client().get(&format!("/1.0/instances/{name}")).await,
        "raw get",
    );
    let id = inst
        .config
        .get("user.corral.id")
        .cloned()
        .unwrap_or_default();
    let staged = staging_root.join(&id);
    assert!(
        staged.join("0/file").is_file(),
        "no staged copy at {}",
        staged.display()
    );
    ok(sb.delete().await, "delete");
    assert!(!staged.exists(), "staged copies outlived their sandbox");
    drop(rw_fs);
    let _ = fs::remove_dir_all(&roots);
}

/// The guest's root plants a setuid copy of a program in a read-write
/// mount; a real local user runs it. corral refuses read-write sources
/// that honour setuid bits, and on the nosuid source it accepts, the
/// planted file runs as the user, not as the container's host uid.
/// Control: the same file on a filesystem that honours setuid runs as the
/// container's host uid.
#[tokio::test]
async fn a_setuid_file_planted_in_a_read_write_mount_gains_a_local_user_nothing() {
    let Some(user) = corral_test_support::TestUser::create() else {
        return;
    };
    let base = Path::new("/var/lib/corral/mount-test");
    ok(fs::create_dir_all(base), "mkdir base");
    let run = unique("suid");
    let roots = base.join(run.as_str());
    ok(fs::create_dir_all(&roots), "mkdir roots");
    let chmod = |p: &Path, mode: u32| {
        ok(
            fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(mode)),
            "chmod",
        )
    };
    // The user must be able to reach the mounts, as on a real host.
    for dir in [Path::new("/var/lib/corral"), base, roots.as_path()] {
        chmod(dir, 0o755);
    }
    let suid_fs = corral_test_support::Tmpfs::mount(&roots, false);
    let nosuid_fs = corral_test_support::Tmpfs::mount(&roots, true);
    chmod(suid_fs.path(), 0o777);
    chmod(nosuid_fs.path(), 0o777);
    let mut config = IncusConfig::local();
    config.project = "corral-mounts".into();
    config.mounts = MountPolicy {
        allowed_roots: vec![base.to_owned()],
        staging_root: Path::new("/var/lib/corral/mount-test-staging").to_owned(),
        ..MountPolicy::default()
    };
    let Some(p) = provider_with(config).await else {
        return;
    };
    let name = unique("plant");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let mut spec = SandboxSpec::new(name.clone(), TEST_IMAGE_ALIAS);

    // A read-write source that honours setuid bits is refused.
    spec.mounts = vec![mount(suid_fs.path(), "/mnt/rw", false)];
    let err = p.create(&spec).await.err();
    assert!(
        matches!(&err, Some(ProviderError::Mount { reason, .. }) if reason.contains("nosuid")),
        "{err:?}"
    );

    spec.mounts = vec![mount(nosuid_fs.path(), "/mnt/rw", false)];
    let sb = ok(p.create(&spec).await, "create");
    ok(sb.start().await, "start");
    // The guest's root plants a setuid copy of the host's `id`.
    let id_bin = ok(fs::read("/usr/bin/id"), "read /usr/bin/id");
    ok(sb.push_file("/mnt/rw/id", &id_bin, 0o755).await, "push");
    let out = ok(
        sb.exec(&ExecRequest::new(["chmod", "4755", "/mnt/rw/id"]))
            .await,
        "chmod",
    );
    assert!(out.success(), "{}", out.stderr_text());
    let planted = nosuid_fs.path().join("id");
    use std::os::unix::fs::MetadataExt;
    let meta = ok(fs::metadata(&planted), "stat planted");
    assert_eq!(meta.mode() & 0o7777, 0o4755);
    let container_root = meta.uid();
    assert!(container_root != 0 && container_root != user.uid);

    // Control: on a filesystem that honours setuid, the planted file runs
    // as the container's host uid.
    let copy = suid_fs.path().join("id");
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(&planted)
        .arg(&copy)
        .status();
    assert!(cp.is_ok_and(|s| s.success()), "cp -a");
    let control = user.sh(&format!("{} -u", copy.display()));
    assert_eq!(
        control.trim(),
        container_root.to_string(),
        "control: the setuid file did not run as the container's uid"
    );
    // Where corral mounts it: nosuid, so it runs as the user.
    let got = user.sh(&format!("{} -u", planted.display()));
    assert_eq!(got.trim(), user.uid.to_string(), "setuid took effect");

    ok(
        sb.stop(corral_sandbox_core::sandbox::StopOptions {
            force: true,
            timeout: None,
        })
        .await,
        "stop",
    );
    ok(sb.delete().await, "delete");
    drop(suid_fs);
    drop(nosuid_fs);
    let _ = fs::remove_dir_all(&roots);
}
