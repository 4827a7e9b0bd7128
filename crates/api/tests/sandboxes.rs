//! The sandbox routes against the REAL Incus daemon on this machine, through
//! the real corrald binary. Names are unique per run; a guard force-deletes
//! every instance a test named, even when an assertion fails. Without a
//! daemon the tests fail under `CI=true` and skip otherwise.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::Method;
use common::assert_error;
use common::incus::{Cleanup, incus_socket, raw_client, runtime, server, unique};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use corral_provider_incus::api::Instance;
use serde_json::json;
use std::collections::BTreeMap;
use std::time::Duration;

#[test]
fn lifecycle_and_exec_through_the_api() {
    let Some(socket) = incus_socket("lifecycle_and_exec_through_the_api") else {
        return;
    };
    let name = unique("life");
    let _guard = Cleanup {
        client: raw_client(&socket),
        names: vec![name.clone()],
    };
    let srv = server(&socket);
    let at = format!("/v1/sandboxes/{name}");
    let create = json!({"name": name, "image": TEST_IMAGE_ALIAS, "resources": {"cpus": 1}});

    let (s, info) = srv.call("POST", "/v1/sandboxes", Some(&create));
    assert_eq!(s, 201, "{info}");
    assert_eq!(info["schema"], "corral.sandbox-new.v1");
    assert_eq!(info["info"]["name"], name.as_str());
    assert_eq!(info["info"]["kind"], "incus");
    assert_eq!(info["info"]["state"], "stopped");
    assert_eq!(info["info"]["image"], TEST_IMAGE_ALIAS);

    let (s, body) = srv.call("POST", "/v1/sandboxes", Some(&create));
    assert_error(s, &body, 409, "already_exists");

    let (s, list) = srv.get("/v1/sandboxes");
    assert_eq!(s, 200, "{list}");
    assert!(
        list["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == name.as_str()),
        "{list}"
    );
    let (s, one) = srv.get(&at);
    assert_eq!(s, 200, "{one}");
    assert_eq!(one["state"], "stopped");
    assert_eq!(one["snapshots"], json!([]));

    let (s, body) = srv.call(
        "POST",
        &format!("{at}/exec"),
        Some(&json!({"argv": ["true"]})),
    );
    assert_error(s, &body, 409, "invalid_state");

    let (s, info) = srv.call("POST", &format!("{at}/start"), None);
    assert_eq!(s, 200, "{info}");
    assert_eq!(info["results"][0]["state"], "running");

    // Exact bytes, a non-UTF-8 byte, stderr, an exit code, env and cwd.
    let exec = json!({
        "argv": ["sh", "-c", "printf 'hi\\377'; echo \"$GREETING\" >&2; pwd >&2; exit 3"],
        "env": {"GREETING": "hello"},
        "cwd": "/tmp",
    });
    let (s, out) = srv.call("POST", &format!("{at}/exec"), Some(&exec));
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["exit_code"], 3, "{out}");
    assert_eq!(out["stdout_base64"], "aGn/", "{out}");
    assert_eq!(out["stdout"], "hi\u{fffd}");
    assert_eq!(out["stderr"], "hello\n/tmp\n", "{out}");

    let slow = json!({"argv": ["sleep", "30"], "timeout_secs": 1});
    let (s, body) = srv.call("POST", &format!("{at}/exec"), Some(&slow));
    assert_error(s, &body, 504, "timeout");

    let (s, body) = srv.call("POST", &format!("{at}/exec"), Some(&json!({"argv": []})));
    assert_error(s, &body, 400, "invalid_spec");

    let (s, info) = srv.call("POST", &format!("{at}/stop"), Some(&json!({"force": true})));
    assert_eq!(s, 200, "{info}");
    assert_eq!(info["results"][0]["state"], "stopped");

    let (s, body) = srv.call("DELETE", &at, None);
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["schema"], "corral.sandbox-action.v1", "{body}");
    assert_eq!(body["results"][0]["ok"], true, "{body}");
    let (s, body) = srv.get(&at);
    assert_error(s, &body, 404, "not_found");
    let (s, body) = srv.call("DELETE", &at, None);
    assert_error(s, &body, 404, "not_found");
}

#[test]
fn request_errors_have_one_shape() {
    let Some(socket) = incus_socket("request_errors_have_one_shape") else {
        return;
    };
    let srv = server(&socket);
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": unique("p"), "image": TEST_IMAGE_ALIAS, "profile": "nope"})),
    );
    assert_error(s, &body, 400, "unknown_profile");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("isolated, internet, allowlist"), "{msg}");

    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": "Not A Name!", "image": TEST_IMAGE_ALIAS})),
    );
    assert_error(s, &body, 400, "invalid_spec");
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"image": TEST_IMAGE_ALIAS})),
    );
    assert_error(s, &body, 400, "bad_request");
    let (s, body) = srv.call("POST", "/v1/sandboxes", None);
    assert_error(s, &body, 400, "bad_request");
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes/whatever/stop",
        Some(&json!({"forceful": true})),
    );
    assert_error(s, &body, 400, "bad_request");
    let (s, body) = srv.get(&format!("/v1/sandboxes/{}", unique("absent")));
    assert_error(s, &body, 404, "not_found");
    let (s, body) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": unique("img"), "image": "no-such-image-alias"})),
    );
    assert_error(s, &body, 404, "not_found");
}

#[test]
fn an_instance_corral_did_not_stamp_is_403() {
    let Some(socket) = incus_socket("an_instance_corral_did_not_stamp_is_403") else {
        return;
    };
    let name = unique("foreign");
    let client = raw_client(&socket);
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    let srv = server(&socket);
    let (s, info) = srv.call(
        "POST",
        "/v1/sandboxes",
        Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS})),
    );
    assert_eq!(s, 201, "{info}");

    // Strip corral's stamp behind its back.
    runtime().block_on(async {
        let path = format!("/1.0/instances/{name}");
        let inst: Instance = client.get(&path).await.unwrap();
        let config: BTreeMap<String, String> = inst
            .config
            .iter()
            .filter(|(k, _)| !k.starts_with("user.corral."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        client
            .run(
                Method::PUT,
                &path,
                Some(&inst.put_body(&config, &inst.devices)),
                Duration::from_secs(30),
            )
            .await
            .unwrap();
    });
    let at = format!("/v1/sandboxes/{name}");
    for (method, path) in [
        ("GET", at.clone()),
        ("POST", format!("{at}/start")),
        ("DELETE", at.clone()),
    ] {
        let (s, body) = srv.call(method, &path, None);
        assert_error(s, &body, 403, "not_owned");
    }
    let (_, list) = srv.get("/v1/sandboxes");
    assert!(
        !list["sandboxes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == name.as_str()),
        "{list}"
    );
}

#[test]
fn a_missing_daemon_is_502_and_other_routes_still_answer() {
    let dir = tempfile::tempdir().unwrap();
    let absent = dir.path().join("incus.sock");
    let srv = server(absent.to_str().unwrap());
    let (s, body) = srv.get("/v1/sandboxes");
    assert_error(s, &body, 502, "io");
    let (s, _) = srv.get("/v1/matrix");
    assert_eq!(s, 200);
}
