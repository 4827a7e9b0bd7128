//! `start --all` and `stop --all` act on the sandboxes of the state
//! directory they run with, not on every corral instance the Incus daemon
//! holds: before, a `start --all` through one state directory restarted a
//! sandbox another had stopped on purpose. And `--all` is the caller's: a
//! real second Unix user who can reach the Incus socket (its group) never
//! stops root's sandbox with it. Real `corral` binary, real Incus.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::Path;

use common::sandboxes::{Cleanup, in_state, incus, incus_status, plain, unique};
use common::{CORRAL, Run};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_provider_incus::client::DEFAULT_SOCKET;
use corral_test_support::TestUser;

fn names(run: &serde_json::Value) -> Vec<String> {
    run["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn all_means_this_state_directorys_sandboxes() {
    let Some(client) = incus() else { return };
    let (mine, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let name = unique("all");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    plain(mine.path(), &name);
    in_state(mine.path(), &["stop", &name]).expect_code(0);

    let started = in_state(other.path(), &["start", "--all", "--json"])
        .expect_code(0)
        .json();
    assert!(!names(&started).contains(&name), "{started}");
    let info = in_state(mine.path(), &["info", &name, "--json"])
        .expect_code(0)
        .json();
    assert_eq!(
        info["state"], "stopped",
        "another state directory started it"
    );

    // Control: through its own state directory `--all` reaches it.
    let started = in_state(mine.path(), &["start", "--all", "--json"])
        .expect_code(0)
        .json();
    assert!(names(&started).contains(&name), "{started}");
    let stopped = in_state(other.path(), &["stop", "--all", "--json"])
        .expect_code(0)
        .json();
    assert!(!names(&stopped).contains(&name), "{stopped}");
    let stopped = in_state(mine.path(), &["stop", "--all", "--json"])
        .expect_code(0)
        .json();
    assert!(names(&stopped).contains(&name), "{stopped}");
}

/// `corral ARGS…` as `user`, with the Incus socket's group as its group
/// (how a non-root caller reaches the daemon: `incus-admin` on a packaged
/// install, whatever group incusd was given here) and its own home.
fn as_user(user: &TestUser, group: u32, home: &Path, args: &[&str]) -> Run {
    user.command(CORRAL)
        .gid(group)
        .args(args)
        .env("HOME", home)
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
        .into()
}

#[test]
fn another_users_all_never_reaches_roots_sandboxes() {
    let Some(client) = incus() else { return };
    let Some(user) = TestUser::create() else {
        return;
    };
    let socket = std::fs::metadata(DEFAULT_SOCKET).unwrap();
    let roots = tempfile::tempdir().unwrap();
    let (theirs, mine) = (unique("root-all"), unique("user-all"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![theirs.clone(), mine.clone()],
    };
    plain(roots.path(), &theirs);
    let root_state = roots.path().to_str().unwrap();
    let running = |name: &str| incus_status(&client, name).as_deref() == Some("Running");
    assert!(running(&theirs));

    // The user's own directory (its home and state directory), 0700.
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let home = top.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::set_permissions(&home, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&home, Some(user.uid), Some(user.gid)).unwrap();
    let user_state = home.join("state");
    let user_state = user_state.to_str().unwrap();
    let group = socket.gid();

    // Root's state directory, readable by everyone so that the refusal is
    // corral's own (a state directory must be the caller's, or anyone could
    // plant records in it), not the kernel's: the user's `--all` through it
    // is refused before any sandbox is touched.
    std::fs::set_permissions(roots.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let run = as_user(
        &user,
        group,
        &home,
        &["stop", "--all", "--json", "--state-dir", root_state],
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(
        run.stderr.contains("it belongs to another user"),
        "{}",
        run.stderr
    );
    assert!(
        running(&theirs),
        "another user's --all stopped root's sandbox"
    );

    if socket.mode() & 0o060 != 0o060 {
        // A daemon whose socket's group cannot connect: a non-root caller
        // cannot reach Incus at all, so that refusal is all there is.
        let run = as_user(
            &user,
            group,
            &home,
            &["stop", "--all", "--json", "--state-dir", user_state],
        );
        assert_eq!(run.code, Some(1), "{run:?}");
        assert!(running(&theirs));
        eprintln!("the Incus socket is not group-writable: only the refusal was tested");
        return;
    }

    // Through the user's own state directory, the user's sandbox is all
    // `--all` names.
    as_user(
        &user,
        group,
        &home,
        &[
            "new",
            &mine,
            "--no-network",
            "--image",
            TEST_IMAGE_ALIAS,
            "--state-dir",
            user_state,
        ],
    )
    .expect_code(0);
    assert!(running(&mine));
    let stopped = as_user(
        &user,
        group,
        &home,
        &["stop", "--all", "--json", "--state-dir", user_state],
    )
    .expect_code(0)
    .json();
    assert_eq!(names(&stopped), vec![mine.clone()], "{stopped}");
    assert!(
        !running(&mine),
        "the user's --all left its own sandbox running"
    );
    assert!(running(&theirs), "the user's --all stopped root's sandbox");

    // Control: root's own `--all` stops it (and not the user's, already
    // stopped and not in root's store).
    let stopped = in_state(roots.path(), &["stop", "--all", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(names(&stopped), vec![theirs.clone()], "{stopped}");
    assert!(
        !running(&theirs),
        "root's --all did not stop root's sandbox"
    );
}
