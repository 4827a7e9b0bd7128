//! `corral approvals`, `corral approve` and `corral deny` against a lookup
//! really held by `corral_gateway::approvals` (the resolver's holding
//! side), with the state directory a root-owned temporary one: the
//! operator's list shows it (JSON as docs/json-schema.md says), `approve`
//! lets it through, and a decision on an id nobody holds is a usage error
//! that changes nothing.

// Tests: a failed step should abort the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use common::{corral, schema};
use corral_gateway::approvals::{Approvals, Held};
use corral_state_files::StateDir;

const CONFIG: &str = r#"
[[profile]]
name = "dev"
bridge = "cb-dev"
subnet = "10.90.0.0/24"
mode = "allowlist"
dns = "corral"
approvals = "ask"
allow = ["192.0.2.1"]
"#;

#[test]
fn the_operator_lists_approves_and_cannot_decide_what_nobody_holds() {
    if !corral_test_support::gate::root() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("corral.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let state = tmp.path().join("state");
    let gateway_dir = StateDir::open(&state)
        .unwrap()
        .subdir("gateway")
        .unwrap()
        .subdir("cb-dev")
        .unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let approvals =
        Arc::new(Approvals::open(&gateway_dir, "dev", "cb-dev", Duration::from_secs(20)).unwrap());
    let asker: IpAddr = "10.90.0.5".parse().unwrap();
    let held = {
        let a = Arc::clone(&approvals);
        rt.spawn(async move { a.hold(asker, "pypi.org").await })
    };
    let ctx = [
        "--config",
        config.to_str().unwrap(),
        "--state-dir",
        state.to_str().unwrap(),
    ];
    let args = |verb: &[&str]| -> Vec<String> {
        verb.iter()
            .chain(ctx.iter())
            .map(|s| (*s).to_owned())
            .collect()
    };
    let run = |verb: &[&str]| {
        let a = args(verb);
        corral(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };

    let listed = (0..100)
        .find_map(|_| {
            let r = run(&["approvals", "--json"]).expect_code(0).json();
            if r["approvals"].as_array().is_some_and(|a| !a.is_empty()) {
                Some(r)
            } else {
                std::thread::sleep(Duration::from_millis(20));
                None
            }
        })
        .expect("the held lookup is listed");
    schema::check(&listed);
    assert_eq!(listed["schema"], "corral.approvals.v1");
    let request = &listed["approvals"][0];
    assert_eq!(request["name"], "pypi.org");
    assert_eq!(request["asker"], "10.90.0.5");
    assert_eq!(request["profile"], "dev");
    let id = request["id"].as_str().unwrap().to_owned();

    let text = run(&["approvals"]).expect_code(0);
    assert!(
        text.stdout.contains(&id) && text.stdout.contains("pypi.org"),
        "{}",
        text.stdout
    );

    // Control: an id nobody holds is refused, and the held lookup still
    // waits.
    let bad = run(&["deny", "0123456789abcdef"]).expect_code(2);
    assert!(
        bad.stderr.contains("no lookup waits for approval"),
        "{}",
        bad.stderr
    );
    assert!(!held.is_finished());

    let decided = run(&["approve", &id, "--json"]).expect_code(0).json();
    schema::check(&decided);
    assert_eq!(decided["decision"], "once");
    assert_eq!(rt.block_on(held).unwrap(), Held::Granted);
    let after = run(&["approvals", "--json"]).expect_code(0).json();
    assert_eq!(after["approvals"].as_array().unwrap().len(), 0, "{after}");
}
