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
    let tmp = ok(tempfile::tempdir(), "tempdir");
    let roots = tmp.path().join("roots");
    ok(fs::create_dir_all(roots.join("repo")), "mkdir repo");
    ok(fs::create_dir_all(roots.join("rw")), "mkdir rw");
    ok(fs::write(roots.join("repo/file"), b"hello"), "write");
    let mut config = IncusConfig::local();
    config.project = "corral-mounts".into();
    config.mounts = MountPolicy {
        allowed_roots: vec![roots.clone()],
        staging_root: tmp.path().join("staging"),
        ..MountPolicy::default()
    };
    let Some(p) = provider_with(config).await else {
        return;
    };

    // An escape through a symlink is refused before anything is created.
    let link = roots.join("escape");
    ok(std::os::unix::fs::symlink("/etc", &link), "symlink");
    let name = unique("mnt");
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
    let out = ok(
        sb.exec(&sh("echo written > /mnt/rw/out && stat -c %u /mnt/rw/out"))
            .await,
        "write rw",
    );
    assert!(out.success(), "{}", out.stderr_text());
    assert_eq!(
        ok(fs::read(roots.join("rw/out")), "read back"),
        b"written\n"
    );
    // Guest root is host root through `shift` (this process's ids).
    use std::os::unix::fs::MetadataExt;
    let meta = ok(fs::metadata(roots.join("rw/out")), "stat");
    assert_eq!(
        (meta.uid(), meta.gid()),
        corral_provider_incus::mounts::effective_ids()
    );

    let staged: Vec<_> = ok(fs::read_dir(tmp.path().join("staging")), "staging")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .collect();
    assert_eq!(staged.len(), 1);
    ok(sb.delete().await, "delete");
    let left: Vec<_> = ok(fs::read_dir(tmp.path().join("staging")), "staging")
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .collect();
    assert!(left.is_empty(), "staged copies outlived their sandbox");
}
