//! One shape per object, both front-ends: the real `corral` binary and a
//! real corrald, on one state directory and the REAL Incus daemon, asked
//! for the same reads and made to do the same actions; every answer pair
//! must have the same keys, the same JSON types and the same schema id.
//! Values that differ by nature (names, timestamps, addresses) are
//! compared by type; a `null` stands for any type, as an object that is
//! "X or null" is null on one side when its sandbox has not got there yet
//! (a created-not-started sandbox has no readiness). A failed start, stop
//! and rm of one sandbox is the error body in both, with the same code.
//! The control: the same comparison of two different objects reports the
//! difference, and of the CLI's result rows (several names) and corrald's
//! error body too.
//! Without a daemon the test fails under `CI=true` and skips otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use common::incus::{Cleanup, incus_socket, raw_client, unique};
use common::{Server, corral_bin};
use corral_provider_incus::TEST_IMAGE_ALIAS;
use serde_json::{Value, json};

/// Every difference of shape between `a` and `b` under `at`.
fn differences(at: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Null, _) | (_, Value::Null) => {}
        (Value::Object(x), Value::Object(y)) => {
            let kx: Vec<&String> = x.keys().collect();
            let ky: Vec<&String> = y.keys().collect();
            if kx != ky {
                out.push(format!("{at}: keys {kx:?} vs {ky:?}"));
            }
            for (k, v) in x {
                if let Some(w) = y.get(k) {
                    if k == "schema" && v != w {
                        out.push(format!("{at}.schema: {v} vs {w}"));
                    }
                    differences(&format!("{at}.{k}"), v, w, out);
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            if let (Some(v), Some(w)) = (x.first(), y.first()) {
                differences(&format!("{at}[0]"), v, w, out);
            }
        }
        (Value::String(_), Value::String(_))
        | (Value::Number(_), Value::Number(_))
        | (Value::Bool(_), Value::Bool(_)) => {}
        _ => out.push(format!("{at}: {a} vs {b}")),
    }
}

/// What `corral args… --json` on this state directory and Incus socket
/// printed on stdout, and its exit code.
fn cli(state: &std::path::Path, socket: &str, args: &[&str]) -> (i32, Value) {
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    all.extend(["--state-dir".to_owned(), state.display().to_string()]);
    all.extend(["--incus-socket".to_owned(), socket.to_owned()]);
    run(&all)
}

/// What `corral args… --json` printed on stdout, and its exit code.
fn run(args: &[String]) -> (i32, Value) {
    let out = Command::new(corral_bin())
        .args(args)
        .arg("--json")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "corral {args:?} --json printed no JSON ({e}):\n{stdout}\n--- stderr\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap_or(-1), json)
}

#[test]
fn cli_and_api_answer_every_object_in_one_shape() {
    let Some(socket) = incus_socket("cli_and_api_answer_every_object_in_one_shape") else {
        return;
    };
    let (by_cli, by_api) = (unique("shp-cli"), unique("shp-api"));
    let _guard = Cleanup {
        client: raw_client(&socket),
        names: vec![
            by_cli.clone(),
            by_api.clone(),
            format!("{by_cli}-r"),
            format!("{by_api}-r"),
        ],
    };
    let srv = Server::start(&["--listen", "127.0.0.1:0", "--incus-socket", &socket]);
    let state = srv.state.as_ref().unwrap().path().to_owned();
    let api_at = format!("/v1/sandboxes/{by_api}");
    let mut pairs: Vec<(&str, Value, Value)> = Vec::new();
    let ok = |what: &str, (code, v): (i32, Value)| {
        assert_eq!(code, 0, "corral {what}: {v}");
        v
    };
    let okay = |what: &str, want: u16, (s, v): (u16, Value)| {
        assert_eq!(s, want, "{what}: {v}");
        v
    };

    // `corral new` starts what it makes, `POST /v1/sandboxes` does not:
    // the API's sandbox is started before the next actions.
    let made = ok(
        "new",
        cli(
            &state,
            &socket,
            &["new", &by_cli, "--no-network", "--image", TEST_IMAGE_ALIAS],
        ),
    );
    let created = okay(
        "create",
        201,
        srv.call(
            "POST",
            "/v1/sandboxes",
            Some(&json!({"name": by_api, "image": TEST_IMAGE_ALIAS})),
        ),
    );
    pairs.push(("new / POST /v1/sandboxes", made, created));
    okay(
        "start",
        200,
        srv.call("POST", &format!("{api_at}/start"), None),
    );
    let snap_cli = ok("snapshot", cli(&state, &socket, &["snapshot", &by_cli]));
    let snap_api = okay(
        "snapshot",
        201,
        srv.call("POST", &format!("{api_at}/snapshots"), None),
    );
    pairs.push(("snapshot", snap_cli, snap_api));
    let back_cli = ok(
        "restore",
        cli(&state, &socket, &["restore", &by_cli, "snap0", "--force"]),
    );
    let back_api = okay(
        "restore",
        200,
        srv.call(
            "POST",
            &format!("{api_at}/restore"),
            Some(&json!({"snapshot": "snap0"})),
        ),
    );
    pairs.push(("restore", back_cli, back_api));
    // A failed action on one sandbox: both running, so a start fails.
    let start_err_api = failed_action(
        &mut pairs,
        "start (running)",
        "invalid_state",
        cli(&state, &socket, &["start", &by_cli]),
        srv.call("POST", &format!("{api_at}/start"), None),
    );
    // Several names: a row each, the command failed.
    let (code, rows_cli) = cli(&state, &socket, &["start", &by_cli, &unique("shp-none")]);
    assert_eq!(code, 1, "{rows_cli}");
    assert_eq!(
        rows_cli["results"][1]["error"]["code"], "not_found",
        "{rows_cli}"
    );

    // Reads.
    let listed_cli = ok("ls", cli(&state, &socket, &["ls"]));
    let listed_api = okay("list", 200, srv.get("/v1/sandboxes"));
    for l in [&listed_cli, &listed_api] {
        let names: Vec<&str> = l["sandboxes"]
            .as_array()
            .unwrap_or_else(|| panic!("{l}"))
            .iter()
            .filter_map(|s| s["name"].as_str())
            .collect();
        assert!(
            names.contains(&by_cli.as_str()) && names.contains(&by_api.as_str()),
            "both sandboxes listed: {l}"
        );
    }
    pairs.push(("ls / GET /v1/sandboxes", listed_cli.clone(), listed_api));
    let one_cli = ok("info", cli(&state, &socket, &["info", &by_cli]));
    let one_api = okay("get", 200, srv.get(&api_at));
    assert_eq!(one_api["snapshots"][0]["name"], "snap0", "{one_api}");
    pairs.push(("info / GET /v1/sandboxes/{name}", one_cli.clone(), one_api));
    let profiles_cli = ok("profiles", run(&["profiles".to_owned()]));
    let profiles_api = okay("profiles", 200, srv.get("/v1/profiles"));
    pairs.push(("profiles", profiles_cli, profiles_api));
    let templates_cli = ok("templates", run(&["templates".to_owned()]));
    let templates_api = okay("templates", 200, srv.get("/v1/templates"));
    pairs.push(("templates", templates_cli, templates_api));
    let events_cli = ok("events", cli(&state, &socket, &["events"]));
    let events_api = okay("events", 200, srv.get("/v1/events"));
    assert!(
        events_api["events"]
            .as_array()
            .is_some_and(|e| !e.is_empty()),
        "the creates are on record: {events_api}"
    );
    pairs.push(("events", events_cli, events_api));
    let gate_cli = ok("gate", cli(&state, &socket, &["gate"]));
    let gate_api = okay("verification", 200, srv.get("/v1/verification"));
    pairs.push(("gate / GET /v1/verification", gate_cli, gate_api));

    // Errors: the same body, the same code, the exit code unchanged.
    let missing = unique("shp-none");
    let (code, err_cli) = cli(&state, &socket, &["info", &missing]);
    assert_eq!(code, 1, "{err_cli}");
    let err_api = okay("missing", 404, srv.get(&format!("/v1/sandboxes/{missing}")));
    assert_eq!(err_cli["error"]["code"], "not_found", "{err_cli}");
    assert_eq!(err_cli["error"]["code"], err_api["error"]["code"]);
    pairs.push(("error (no such sandbox)", err_cli, err_api));

    // More actions: stop, rename (stopped), start, rm.
    let stopped_cli = ok("stop", cli(&state, &socket, &["stop", &by_cli, "--force"]));
    let stopped_api = okay(
        "stop",
        200,
        srv.call(
            "POST",
            &format!("{api_at}/stop"),
            Some(&json!({"force": true})),
        ),
    );
    pairs.push(("stop", stopped_cli, stopped_api));
    failed_action(
        &mut pairs,
        "stop (stopped)",
        "invalid_state",
        cli(&state, &socket, &["stop", &by_cli, "--force"]),
        srv.call(
            "POST",
            &format!("{api_at}/stop"),
            Some(&json!({"force": true})),
        ),
    );
    let (cli_new, api_new) = (format!("{by_cli}-r"), format!("{by_api}-r"));
    let renamed_cli = ok(
        "rename",
        cli(&state, &socket, &["rename", &by_cli, &cli_new]),
    );
    let renamed_api = okay(
        "rename",
        200,
        srv.call(
            "POST",
            &format!("{api_at}/rename"),
            Some(&json!({"name": api_new})),
        ),
    );
    pairs.push(("rename", renamed_cli, renamed_api));
    let (by_cli, api_at) = (cli_new, format!("/v1/sandboxes/{api_new}"));
    let started_cli = ok("start", cli(&state, &socket, &["start", &by_cli]));
    let started_api = okay(
        "start",
        200,
        srv.call("POST", &format!("{api_at}/start"), None),
    );
    pairs.push(("start", started_cli, started_api));
    let restarted_cli = ok(
        "restart",
        cli(&state, &socket, &["restart", &by_cli, "--force"]),
    );
    let restarted_api = okay(
        "restart",
        200,
        srv.call(
            "POST",
            &format!("{api_at}/restart"),
            Some(&json!({"force": true})),
        ),
    );
    assert_eq!(restarted_api["action"], "restart", "{restarted_api}");
    pairs.push(("restart", restarted_cli, restarted_api));
    let removed_cli = ok("rm", cli(&state, &socket, &["rm", &by_cli, "--force"]));
    let removed_api = okay("delete", 200, srv.call("DELETE", &api_at, None));
    pairs.push(("rm / DELETE /v1/sandboxes/{name}", removed_cli, removed_api));
    failed_action(
        &mut pairs,
        "rm / DELETE (gone)",
        "not_found",
        cli(&state, &socket, &["rm", &by_cli, "--force"]),
        srv.call("DELETE", &api_at, None),
    );

    let mut all = Vec::new();
    for (what, a, b) in &pairs {
        assert!(
            a["schema"].is_string() || a["error"].is_object(),
            "{what}: {a}"
        );
        eprintln!("{what}:\n  corral  {a}\n  corrald {b}");
        differences(what, a, b, &mut all);
    }
    assert!(all.is_empty(), "shapes differ:\n{}", all.join("\n"));
    eprintln!("{} objects compared, one shape each", pairs.len());

    // Control: the comparison sees a difference where there is one (the
    // list and one sandbox are different objects).
    let mut control = Vec::new();
    differences("control", &listed_cli, &one_cli, &mut control);
    assert!(!control.is_empty(), "the comparison cannot fail");
    // Control for the failed actions: result rows (what `corral start
    // NAME --json` printed for one failed name before) are not the error
    // body, and the comparison says so; a failed row carries the same
    // error object, code included.
    let mut control = Vec::new();
    differences("control", &rows_cli, &start_err_api, &mut control);
    assert!(!control.is_empty(), "rows and the error body compare equal");
    let row_error = &rows_cli["results"][0]["error"];
    assert_eq!(
        row_error["code"], start_err_api["error"]["code"],
        "{rows_cli}"
    );
    let mut same = Vec::new();
    differences("row error", row_error, &start_err_api["error"], &mut same);
    assert!(same.is_empty(), "{}", same.join("\n"));
}

/// A failed action on one sandbox: the CLI exits 1 and corrald answers
/// `code`'s status, both with the error body of `code`; the pair is
/// compared with the others. Returns corrald's answer.
fn failed_action(
    pairs: &mut Vec<(&str, Value, Value)>,
    what: &'static str,
    code: &str,
    (exit, by_cli): (i32, Value),
    (status, by_api): (u16, Value),
) -> Value {
    assert_eq!(exit, 1, "corral {what}: {by_cli}");
    assert_eq!(by_cli["error"]["code"], code, "corral {what}: {by_cli}");
    let want = match code {
        "not_found" => 404,
        _ => 409,
    };
    assert_eq!(status, want, "corrald {what}: {by_api}");
    assert_eq!(by_api["error"]["code"], code, "corrald {what}: {by_api}");
    pairs.push((what, by_cli, by_api.clone()));
    by_api
}
