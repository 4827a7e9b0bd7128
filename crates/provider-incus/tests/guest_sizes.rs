//! Guest-controlled sizes on the host, against the real daemon: a pull is
//! type-checked and bounded, exec output is bounded per stream, and no
//! exec leaves its output logs under Incus's instance directory, even when
//! it timed out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{ok, provider_with, spec, unique};
use corral_provider_incus::IncusConfig;
use corral_sandbox_core::sandbox::{ExecRequest, ProviderError, SandboxProvider};
use serde_json::Value;

const LIMIT: u64 = 1 << 20;

fn config() -> IncusConfig {
    IncusConfig {
        max_pull_bytes: LIMIT,
        max_exec_output: LIMIT,
        ..IncusConfig::local()
    }
}

#[tokio::test]
async fn pulls_and_exec_output_are_bounded_and_logs_never_stay() {
    let Some(p) = provider_with(config()).await else {
        return;
    };
    let name = unique("sizes");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    ok(sb.start().await, "start");
    let setup = ok(
        sb.exec(&ExecRequest::new([
            "sh",
            "-c",
            "mkfifo /tmp/fifo && head -c 2097152 /dev/zero > /tmp/big && printf small > /tmp/small && mkdir /tmp/dir",
        ]))
        .await,
        "setup",
    );
    assert_eq!(setup.exit_code, 0, "{}", setup.stderr_text());

    // Control: a small file comes back whole.
    assert_eq!(ok(sb.pull_file("/tmp/small").await, "pull small"), b"small");
    // A FIFO is never opened (a GET of it hangs until the request times out).
    assert_eq!(ok(sb.pull_file("/tmp/fifo").await, "pull fifo"), b"");
    // Over the limit: refused, not buffered.
    let err = sb.pull_file("/tmp/big").await.err();
    assert!(
        matches!(&err, Some(ProviderError::InvalidSpec { field: "path", reason }) if reason.contains("limit")),
        "{err:?}"
    );
    assert!(matches!(
        sb.pull_file("/tmp/dir").await,
        Err(ProviderError::InvalidSpec { .. })
    ));

    // Exec output: at most the limit per stream, marked truncated.
    let out = ok(
        sb.exec(&ExecRequest::new([
            "sh",
            "-c",
            "head -c 3000000 /dev/zero; echo err >&2",
        ]))
        .await,
        "big exec",
    );
    assert_eq!(out.stdout.len() as u64, LIMIT);
    assert!(out.truncated);
    assert_eq!(out.stderr_text(), "err\n");
    let small = ok(
        sb.exec(&ExecRequest::new(["echo", "hi"])).await,
        "small exec",
    );
    assert!(!small.truncated);

    // A timed-out exec (and the kill corral runs after it) leaves no logs.
    let err = sb
        .exec(&ExecRequest::new(["sleep", "600"]).with_timeout(Duration::from_secs(1)))
        .await
        .err();
    assert!(
        matches!(err, Some(ProviderError::Timeout { .. })),
        "{err:?}"
    );
    let logs: Value = ok(
        p.client()
            .get(&format!("/1.0/instances/{name}/logs/exec-output"))
            .await,
        "list exec logs",
    );
    assert_eq!(logs, Value::Array(Vec::new()), "exec logs left behind");
}

#[tokio::test]
async fn an_exec_for_its_status_alone_reports_the_exit_code_and_keeps_no_output() {
    let Some(p) = provider_with(config()).await else {
        return;
    };
    let name = unique("status");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    ok(sb.start().await, "start");
    let probe = |argv: &[&str]| ExecRequest::new(argv.iter().copied());
    assert_eq!(ok(sb.exec_status(&probe(&["true"])).await, "true"), 0);
    // Control: a failing command is not reported as a success.
    assert_eq!(
        ok(
            sb.exec_status(&probe(&["sh", "-c", "head -c 100000 /dev/zero; exit 3"]))
                .await,
            "exit 3"
        ),
        3
    );
    let err = sb.exec_status(&probe(&["/no/such/program"])).await.err();
    assert!(
        matches!(err, Some(ProviderError::InvalidSpec { field: "argv", .. })),
        "{err:?}"
    );
    let err = sb
        .exec_status(&probe(&["sleep", "600"]).with_timeout(Duration::from_secs(1)))
        .await
        .err();
    assert!(
        matches!(err, Some(ProviderError::Timeout { .. })),
        "{err:?}"
    );
    // The timed-out command was killed: nothing is left sleeping.
    let left = ok(
        sb.exec(&ExecRequest::new([
            "sh",
            "-c",
            "ps | grep -c '[s]leep 600'",
        ]))
        .await,
        "ps",
    );
    assert_eq!(left.stdout_text().trim(), "0", "{}", left.stderr_text());
    let logs: Value = ok(
        p.client()
            .get(&format!("/1.0/instances/{name}/logs/exec-output"))
            .await,
        "list exec logs",
    );
    assert_eq!(logs, Value::Array(Vec::new()), "exec logs left behind");
}
