//! A crafted backup (an exported corral sandbox whose records gained
//! `raw.lxc`) is refused before upload, against the real daemon; the
//! project keeps `restricted.containers.lowlevel=block` and no instance is
//! left. Control: the untouched export imports.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use common::{ok, provider, spec, unique};
use corral_sandbox_core::sandbox::{ProviderError, SandboxProvider};
use serde_json::Value;

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
