//! corrald's start gate with real enforcement: corral's rules and gateway
//! applied in the HOST namespace (Incus containers live there; see
//! `corral_tests::hostlab`), a real container, and the profile's tables
//! deleted behind corral's back. Create and start then answer 409
//! `not_enforced`, naming what is missing, and nothing runs.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::incus::{Cleanup, incus_socket, raw_client, status};
use common::{Server, assert_error};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_service::config::{ConfigSource, load};
use corral_service::host::plan_config;
use corral_service::{HostService, Target};
use corral_tests::hostlab::HostLab;
use serde_json::json;

#[test]
fn create_and_start_answer_409_while_the_profile_is_not_enforced() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(socket) = incus_socket("start_gate") else {
        return;
    };
    let client = raw_client(&socket);
    let lab = HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let pid = std::process::id();
    let (kept, refused) = (format!("t-gate-{pid}-a"), format!("t-gate-{pid}-b"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![kept.clone(), refused.clone()],
    };

    // Apply through the same service `corral host apply` calls.
    let loaded = load(&ConfigSource {
        config: Some(lab.config_path()),
        networks_conf: None,
    })
    .unwrap();
    let host = HostService::new(Target::open(None).unwrap(), lab.state_dir());
    host.apply(&plan_config(loaded).unwrap()).unwrap();

    let srv = Server::start_exact(&[
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--incus-socket".into(),
        socket.clone(),
        "--config".into(),
        lab.config_path().display().to_string(),
        "--state-dir".into(),
        lab.state_dir().display().to_string(),
    ]);
    let create = |name: &str| {
        srv.call(
            "POST",
            "/v1/sandboxes",
            Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS, "profile": "e2e"})),
        )
    };
    let (s, info) = create(&kept);
    assert_eq!(s, 201, "enforced: the create passes the gate: {info}");
    assert_eq!(info["info"]["profile"], "e2e");

    for family in ["inet", "bridge"] {
        let out = Command::new("nft")
            .args(["delete", "table", family, "corral"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    let (s, body) = srv.call("POST", &format!("/v1/sandboxes/{kept}/start"), None);
    assert_error(s, &body, 409, "not_enforced");
    let msg = body["error"]["message"].as_str().unwrap();
    for needle in [
        "profile `e2e` is not enforced",
        "table inet corral",
        "corral host apply",
    ] {
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    assert_eq!(status(&client, &kept).as_deref(), Some("Stopped"));

    let (s, body) = create(&refused);
    assert_error(s, &body, 409, "not_enforced");
    assert_eq!(
        status(&client, &refused),
        None,
        "a refused create made an instance"
    );

    // Restored: the start passes and answers once the sandbox is ready.
    host.apply(
        &plan_config(
            load(&ConfigSource {
                config: Some(lab.config_path()),
                networks_conf: None,
            })
            .unwrap(),
        )
        .unwrap(),
    )
    .unwrap();
    let (s, info) = srv.call("POST", &format!("/v1/sandboxes/{kept}/start"), None);
    assert_eq!(s, 200, "{info}");
    assert_eq!(info["results"][0]["state"], "running");
    drop(srv);
}
