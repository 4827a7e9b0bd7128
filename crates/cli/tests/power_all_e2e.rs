//! `start --all` and `stop --all` act on the sandboxes of the state
//! directory they run with, not on every corral instance the Incus daemon
//! holds: before, a `start --all` through one state directory restarted a
//! sandbox another had stopped on purpose. Real `corral` binary, real Incus.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::sandboxes::{Cleanup, in_state, incus, plain, unique};

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
