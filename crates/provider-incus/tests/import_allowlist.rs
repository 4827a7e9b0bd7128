//! A crafted backup (an exported corral sandbox whose records gained
//! `raw.lxc`) is refused before upload, against the real daemon; the
//! project keeps `restricted.containers.lowlevel=block` and no instance is
//! left. Control: the untouched export imports.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use common::{ok, provider, spec, unique};
use corral_sandbox_core::sandbox::{ProviderError, SandboxProvider};
use serde_json::Value;

/// The tests here read the project's restriction, which an import lifts
/// for its upload: one at a time.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Adds `raw.lxc` to every instance record of the backup at `from`.
fn craft(from: &Path, to: &Path, work: &Path) {
    let tree = work.join("tree");
    std::fs::create_dir(&tree).unwrap();
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(Command::new("tar")
        .arg("-xzf")
        .arg(from)
        .arg("-C")
        .arg(&tree));
    for record in ["backup/index.yaml", "backup/container/backup.yaml"] {
        let path = tree.join(record);
        let text = std::fs::read_to_string(&path).unwrap();
        let mut out = String::new();
        let mut done = false;
        for line in text.lines() {
            let key = line.trim_start();
            if !done && key.starts_with("image.os:") {
                let indent = &line[..line.len() - key.len()];
                out.push_str(&format!(
                    "{indent}raw.lxc: lxc.apparmor.profile=unconfined\n"
                ));
                done = true;
            }
            out.push_str(line);
            out.push('\n');
        }
        assert!(done, "no config in {record}");
        std::fs::write(&path, out).unwrap();
    }
    run(Command::new("tar")
        .arg("-czf")
        .arg(to)
        .arg("-C")
        .arg(&tree)
        .arg("backup"));
}

#[tokio::test]
async fn a_backup_with_raw_settings_never_reaches_the_daemon() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(p) = provider().await else { return };
    let name = unique("rawbk");
    let control = unique("okbk");
    let evil = unique("evilbk");
    let _cleanup = common::Cleanup::new(&p, &[&name, &control, &evil]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("good.tar.gz");
    ok(sb.export(&file).await, "export");

    // Control: the export as corral wrote it imports.
    let imported = ok(
        p.import(&file, &control).await,
        "import the untouched backup",
    );
    ok(imported.delete().await, "delete the control");

    let crafted = tmp.path().join("evil.tar.gz");
    craft(&file, &crafted, tmp.path());
    let err = p.import(&crafted, &evil).await.err();
    match &err {
        Some(ProviderError::InvalidSpec {
            field: "backup",
            reason,
        }) => {
            assert!(reason.contains("raw.lxc"), "{reason}");
        }
        other => panic!("the crafted backup was not refused: {other:?}"),
    }
    let project: Value = ok(p.client().get("/1.0/projects/corral").await, "project");
    assert_eq!(
        project["config"]["restricted.containers.lowlevel"], "block",
        "the project must stay restricted"
    );
    assert!(
        p.client()
            .get::<Value>(&format!("/1.0/instances/{evil}"))
            .await
            .is_err(),
        "the crafted instance exists"
    );
}

/// What Incus makes of an archive uploaded as it is, bypassing corral's
/// check (the project's restriction lifted for the upload alone, as
/// corral's import does): its error text, or `None` when it imported.
async fn upload_raw(
    p: &corral_provider_incus::IncusProvider,
    file: &Path,
    name: &str,
) -> Option<String> {
    use corral_provider_incus::project::set_lowlevel;
    let headers = [
        ("X-Incus-name", name.to_owned()),
        ("X-Incus-pool", p.config().storage_pool.clone()),
    ];
    let project = p.config().project.as_str().to_owned();
    set_lowlevel(p.client(), &project, "allow").await.unwrap();
    let uploaded = p
        .client()
        .upload(
            "/1.0/instances",
            &headers,
            file,
            p.config().operation_timeout,
        )
        .await;
    set_lowlevel(p.client(), &project, "block").await.unwrap();
    uploaded.err().map(|e| e.to_string())
}

/// A local user who may import (a granted corrald user) builds, as itself,
/// a backup whose `backup/container/backup.yaml` is a symlink to a root-only
/// file. corral refuses it naming the entry, before a byte reaches Incus:
/// no instance, the project still restricted. Control: the same archive
/// uploaded straight to Incus makes it read the root-only file and quote
/// it in its error (what corral's 502 used to pass on).
#[tokio::test]
async fn a_users_backup_whose_record_links_to_a_root_file_is_refused_before_upload() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let Some(p) = provider().await else { return };
    let Some(user) = corral_test_support::TestUser::create() else {
        return;
    };
    let name = unique("linkbk");
    let evil = unique("evillink");
    let raw = unique("rawlink");
    let _cleanup = common::Cleanup::new(&p, &[&name, &evil, &raw]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    let tmp = tempfile::tempdir().unwrap();
    let good = tmp.path().join("good.tar.gz");
    ok(sb.export(&good).await, "export");

    // The host's secret: root's, 0600, in a root-only directory.
    let vault = tempfile::tempdir().unwrap();
    let secret = vault.path().join("secret");
    // Go's YAML errors quote a value of up to 10 bytes whole.
    let canary = format!("k{:08}", std::process::id() % 100_000_000);
    std::fs::write(&secret, &canary).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();

    // The user's workspace, the export unpacked into it (root unpacks: the
    // guest's tree has device nodes) and handed over.
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = |cmd: &mut Command| {
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(Command::new("tar")
        .arg("-xzf")
        .arg(&good)
        .arg("-C")
        .arg(&work));
    run(Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", user.uid, user.gid))
        .arg(&work));
    assert!(
        !user
            .command("/bin/cat")
            .arg(&secret)
            .output()
            .unwrap()
            .status
            .success(),
        "the user can read the secret itself"
    );
    user.sh(&format!(
        "cd '{}' && chmod -R u+rwX backup && rm backup/container/backup.yaml && ln -s '{}' backup/container/backup.yaml && tar -czf evil.tar.gz backup",
        work.display(),
        secret.display()
    ));
    let crafted = work.join("evil.tar.gz");

    let err = p.import(&crafted, &evil).await.err();
    match &err {
        Some(ProviderError::InvalidSpec {
            field: "backup",
            reason,
        }) => {
            assert!(
                reason.contains("entry backup/container/backup.yaml is a symlink"),
                "{reason}"
            );
            assert!(!reason.contains(&canary), "{reason}");
        }
        other => panic!("the linked record was not refused: {other:?}"),
    }
    assert!(
        p.client()
            .get::<Value>(&format!("/1.0/instances/{evil}"))
            .await
            .is_err(),
        "the refused import left an instance"
    );
    let project: Value = ok(p.client().get("/1.0/projects/corral").await, "project");
    assert_eq!(project["config"]["restricted.containers.lowlevel"], "block");

    // Control: Incus itself follows the link and says what it found.
    let said = upload_raw(&p, &crafted, raw.as_str()).await;
    let said = said.unwrap_or_else(|| panic!("Incus imported the linked backup"));
    assert!(
        said.contains(&canary),
        "Incus did not read the linked file: {said}"
    );
}

/// A backup a second user owns may be rewritten by that user between
/// corral's check and the upload; what the import reads is a private copy
/// made when it started, which the user's rewrite does not reach. Control:
/// the user's rewrite does reach the file itself.
#[test]
fn a_users_backup_is_read_from_a_copy_the_user_cannot_rewrite() {
    let Some(user) = corral_test_support::TestUser::create() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(tmp.path(), Some(user.uid), Some(user.gid)).unwrap();
    let file = tmp.path().join("box.tar.gz");
    user.sh(&format!(
        "umask 022 && printf checked > '{}'",
        file.display()
    ));
    let held = corral_provider_incus::backup_source::hold(&file).unwrap();
    assert!(
        held.is_copy(),
        "a file another user can write was used in place"
    );
    user.sh(&format!("printf swapped > '{}'", file.display()));
    // Control: the rewrite happened.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "swapped");
    assert_eq!(std::fs::read_to_string(held.path()).unwrap(), "checked");
    assert!(
        !user
            .command("/bin/cat")
            .arg(held.path())
            .output()
            .unwrap()
            .status
            .success(),
        "the user can read the private copy"
    );
}
