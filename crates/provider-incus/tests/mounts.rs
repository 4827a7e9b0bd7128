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
    ok(fs::create_dir_all(roots.join("rw")), "mkdir rw");
    // The container's root is an unprivileged host id: let it write here.
    ok(
        fs::set_permissions(
            roots.join("rw"),
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
    let _ = fs::remove_dir_all(&roots);
}
