//! What a sandbox's work exposes on the host, against the real daemon:
//! secrets in an exec's environment must not appear on any host process's
//! command line (world-readable through `ps`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{ok, provider, spec, unique};
use corral_sandbox_core::sandbox::{ExecRequest, SandboxProvider};

/// Every host process's command line, NULs turned into spaces.
fn host_cmdlines() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .collect()
}

#[tokio::test]
async fn exec_environment_never_reaches_a_host_command_line() {
    let Some(p) = provider().await else { return };
    let name = unique("envps");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    ok(sb.start().await, "start");

    let nonce = format!("{}-{}", std::process::id(), name);
    let secret = format!("hunter2-secret-{nonce}");
    let token = format!("argv-token-{nonce}");
    let mut req = ExecRequest::new([
        "sh",
        "-c",
        "while [ ! -e /tmp/go ]; do sleep 0.1; done; printf %s \"$SECRET\"",
        token.as_str(),
    ]);
    req.env = BTreeMap::from([("SECRET".to_owned(), secret.clone())]);
    req.timeout = Some(Duration::from_secs(120));

    let watch = async {
        let mut secret_seen = false;
        // Control: the command's own argv shows on the host (Incus's
        // forkexec helper), so the scan sees what a local user's `ps` sees.
        loop {
            let lines = host_cmdlines();
            secret_seen |= lines.iter().any(|l| l.contains(&secret));
            if lines.iter().any(|l| l.contains(&token)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        secret_seen |= host_cmdlines().iter().any(|l| l.contains(&secret));
        ok(
            sb.exec(&ExecRequest::new(["touch", "/tmp/go"])).await,
            "release",
        );
        secret_seen
    };
    let (out, secret_seen) = tokio::join!(sb.exec(&req), watch);
    let out = ok(out, "exec");
    assert_eq!(
        out.stdout_text(),
        secret,
        "the variable must still reach the command"
    );
    assert!(!secret_seen, "the secret was on a host command line");
}
