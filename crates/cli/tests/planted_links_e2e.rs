//! A real second Unix user plants dangling symlinks where root's `corral
//! pull` and `corral export` will write (a directory that user owns and
//! root was told to write into), pointing into a directory only root can
//! enter. corral, against the real Incus daemon, refuses both without
//! writing through the links or removing them. Control: the same link
//! followed by a plain write as root (what the pull did) creates the
//! target.
//!
//! And the same user races a file into the place of root's export *during*
//! it (after corral's existence check, while Incus builds the backup):
//! corral fails on its exclusive create and leaves the user's file as it
//! was. Control: the old path (check, build, create, and on failure remove
//! the destination) raced the same way deletes the user's file.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::sandboxes::{Cleanup, in_state, incus, no_terminal, plain, unique};
use corral_test_support::TestUser;

#[test]
fn pull_and_export_never_write_through_a_link_another_user_planted() {
    let Some(client) = incus() else { return };
    let Some(user) = TestUser::create() else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let name = unique("planted");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    plain(s, &name);

    // Root's: a directory nobody else may enter, where the links point.
    let vault = tempfile::tempdir().unwrap();
    let (victim, victim_bk, victim_ctl) = (
        vault.path().join("anything"),
        vault.path().join("backup"),
        vault.path().join("control"),
    );
    // The user's: a drop directory it owns, reachable by everyone.
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let drop = top.path().join("drop");
    std::fs::create_dir(&drop).unwrap();
    std::os::unix::fs::chown(&drop, Some(user.uid), Some(user.gid)).unwrap();
    let (report, backup, ctl) = (
        drop.join("report.txt"),
        drop.join("box.tar.gz"),
        drop.join("control.txt"),
    );
    user.sh(&format!(
        "ln -s '{}' '{}' && ln -s '{}' '{}' && ln -s '{}' '{}'",
        victim.display(),
        report.display(),
        victim_bk.display(),
        backup.display(),
        victim_ctl.display(),
        ctl.display()
    ));
    let is_link = |p: &std::path::Path| {
        std::fs::symlink_metadata(p)
            .unwrap()
            .file_type()
            .is_symlink()
    };

    // Control: root following the planted link, as a plain write does,
    // writes into the vault.
    std::fs::write(&ctl, "through the link").unwrap();
    assert_eq!(
        std::fs::read_to_string(&victim_ctl).unwrap(),
        "through the link"
    );

    let run = no_terminal(&[
        "pull",
        &name,
        "/etc/hostname",
        report.to_str().unwrap(),
        "--state-dir",
        s.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(!victim.exists(), "the pull wrote through the user's link");
    assert!(is_link(&report), "the pull removed the user's link");

    let run = in_state(s, &["export", &name, backup.to_str().unwrap()]).expect_code(1);
    // A dangling link passes `exists()`; the exclusive create refuses it.
    assert!(
        run.stderr.contains("already exists") || run.stderr.contains("File exists"),
        "{}",
        run.stderr
    );
    assert!(
        !victim_bk.exists(),
        "the export wrote through the user's link"
    );
    assert!(is_link(&backup), "the export removed the user's link");
}

/// What the second user writes into its file.
const MINE: &str = "the second user's own file";

/// How one export ended against the racer.
enum Raced {
    /// It refused before the backup was built: the file was there first.
    TooEarly,
    /// It wrote its backup: the user's create came after it.
    TooLate,
    /// Its create met the user's file: the interleaving the test is for.
    Hit,
}

/// Run `export` while the second user, after `delay`, creates `dest`
/// (`set -C`: never over a file already there). Bounded: at most
/// `tries` attempts, the delay sweeping 0–280 ms, until one lands between
/// the existence check and the create.
fn race(
    user: &TestUser,
    dest: &Path,
    tries: u32,
    mut export: impl FnMut() -> Raced,
) -> Option<Duration> {
    for attempt in 0..tries {
        let _ = std::fs::remove_file(dest);
        let delay = Duration::from_millis(u64::from(attempt % 15) * 20);
        let mut racer = user
            .command("/bin/sh")
            .arg("-c")
            .arg(format!(
                "sleep {}; set -C; printf %s \"{MINE}\" > '{}'",
                delay.as_secs_f64(),
                dest.display()
            ))
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let raced = export();
        racer.wait().unwrap();
        if let Raced::Hit = raced {
            return Some(delay);
        }
    }
    None
}

/// The export as it was before the fix: check, build, create; on a failed
/// create remove the destination.
fn old_export(dest: &Path) -> Raced {
    if dest.exists() {
        return Raced::TooEarly;
    }
    // Incus building the backup, as long as it takes here.
    std::thread::sleep(Duration::from_millis(150));
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
        .and_then(|mut f| f.write_all(b"backup"));
    match created {
        Ok(()) => Raced::TooLate,
        Err(_) => {
            let _ = std::fs::remove_file(dest);
            Raced::Hit
        }
    }
}

#[test]
fn an_export_never_deletes_a_file_another_user_made_during_it() {
    let Some(client) = incus() else { return };
    let Some(user) = TestUser::create() else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let name = unique("race");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    plain(s, &name);
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let drop = top.path().join("drop");
    std::fs::create_dir(&drop).unwrap();
    std::os::unix::fs::chown(&drop, Some(user.uid), Some(user.gid)).unwrap();
    let dest = drop.join("box.tar.gz");

    // Control: the old path, raced the same way, deletes the user's file.
    let hit = race(&user, &dest, 60, || old_export(&dest));
    assert!(hit.is_some(), "the race never landed against the old path");
    assert!(!dest.exists(), "the old path kept the user's file");

    let mut last = String::new();
    let hit = race(&user, &dest, 60, || {
        let run = in_state(s, &["export", &name, dest.to_str().unwrap()]);
        last = format!("{run:?}");
        match run.code {
            Some(0) => Raced::TooLate,
            Some(1) if run.stderr.contains("already exists") => Raced::TooEarly,
            // The download's exclusive create met the user's file.
            Some(1)
                if run.stderr.contains("cannot create") && run.stderr.contains("File exists") =>
            {
                Raced::Hit
            }
            _ => panic!("unexpected export: {run:?}"),
        }
    });
    let delay = hit.unwrap_or_else(|| panic!("the race never landed in 60 exports; last: {last}"));
    eprintln!("the user's file landed {delay:?} into the export");
    let meta = std::fs::symlink_metadata(&dest).expect("the export deleted the user's file");
    assert!(meta.file_type().is_file());
    assert_eq!(meta.uid(), user.uid, "the file is not the user's");
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), MINE);
}
