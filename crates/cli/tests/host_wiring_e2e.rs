//! Teardown safety and `host status`'s sandboxes, end to end: the real
//! `corral` binary, a profiled sandbox on the real Incus daemon in the
//! HOST network namespace (held under the host lock by
//! `corral_tests::hostlab`), tampered with through Incus's own API.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::sandboxes::{Cleanup, in_lab, incus, instance, runtime, unique};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_tests::hostlab::HostLab;
use http::Method;
use serde_json::json;

#[test]
fn teardown_refuses_while_sandboxes_are_attached_and_status_lists_them() {
    let Some(client) = incus() else { return };
    if !corral_test_support::gate::root() {
        return;
    }
    let lab = HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let bridge = lab.profile.bridge.to_string();
    let name = unique("wired");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    in_lab(
        &lab,
        &[
            "new",
            &name,
            "--profile",
            "e2e",
            "--image",
            TEST_IMAGE_ALIAS,
        ],
    )
    .expect_code(0);

    // Attached: listed, by JSON and for people.
    let status = in_lab(&lab, &["host", "status", "--json"])
        .expect_code(0)
        .json();
    common::schema::check(&status);
    let mine = |list: &serde_json::Value| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name.as_str())
            .cloned()
    };
    let attached = mine(&status["sandboxes"]["attached"]).unwrap_or_else(|| panic!("{status}"));
    assert_eq!(attached["bridge"], bridge.as_str(), "{status}");
    assert_eq!(attached["profile"], "e2e");
    assert_eq!(attached["owned"], true);
    assert_eq!(attached["state"], "running");
    assert!(mine(&status["sandboxes"]["detached"]).is_none(), "{status}");
    let human = in_lab(&lab, &["host", "status"]).expect_code(0);
    assert!(
        human
            .stdout
            .lines()
            .any(|l| l.contains(&name) && l.contains(&bridge) && l.contains("running")),
        "{}",
        human.stdout
    );

    // Teardown refuses, names the sandbox and its bridge, changes nothing.
    let run = in_lab(&lab, &["host", "teardown"]).expect_code(1);
    assert!(
        run.stderr.contains(&format!("{name} on {bridge}")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--force"), "{}", run.stderr);
    let bridge_present = || {
        let status = in_lab(&lab, &["host", "status", "--json"])
            .expect_code(0)
            .json();
        status["bridges"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["name"] == bridge.as_str() && b["present"] == true)
    };
    assert!(bridge_present(), "refused, yet the bridge is gone");

    // --force goes ahead and says whom it cut off.
    let forced = in_lab(&lab, &["host", "teardown", "--force", "--json"])
        .expect_code(0)
        .json();
    common::schema::check(&forced);
    assert_eq!(forced["forced_past"][0]["name"], name.as_str(), "{forced}");
    assert!(!bridge_present(), "{forced}");
    in_lab(&lab, &["host", "apply"]).expect_code(0);

    // The sandbox's NIC removed behind corral's back: it should be on its
    // profile's bridge and is not.
    runtime().block_on(async {
        let path = format!("/1.0/instances/{name}");
        let stop = json!({"action": "stop", "force": true});
        client
            .run(
                Method::PUT,
                &format!("{path}/state"),
                Some(&stop),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
    });
    let inst = instance(&client, &name).unwrap();
    let mut devices = inst.devices.clone();
    devices.retain(|_, d| d.get("type").map(String::as_str) != Some("nic"));
    runtime().block_on(async {
        client
            .run(
                Method::PUT,
                &format!("/1.0/instances/{name}"),
                Some(&inst.put_body(&inst.config, &devices)),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
    });
    let status = in_lab(&lab, &["host", "status", "--json"])
        .expect_code(0)
        .json();
    assert!(mine(&status["sandboxes"]["attached"]).is_none(), "{status}");
    let detached = mine(&status["sandboxes"]["detached"]).unwrap_or_else(|| panic!("{status}"));
    assert_eq!(detached["expected"], bridge.as_str(), "{status}");
    assert_eq!(detached["actual"], json!([]), "{status}");
    let human = in_lab(&lab, &["host", "status"]).expect_code(0);
    assert!(
        human.stdout.contains(&format!(
            "`{name}` (profile e2e, stopped) should be on {bridge} but is on no bridge"
        )),
        "{}",
        human.stdout
    );
    // Nothing attached any more: teardown needs no --force.
    in_lab(&lab, &["host", "teardown"]).expect_code(0);
}
