//! A push makes the missing directories above its file, against the real
//! daemon: nearest first, root's and 0755; a directory that exists keeps
//! its owner and mode; a file in the way fails the push, saying so, and
//! is left as it was.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{ok, provider, spec, unique};
use corral_sandbox_core::sandbox::{ExecRequest, Sandbox, SandboxProvider};

async fn stat(sb: &dyn Sandbox, path: &str) -> String {
    let out = ok(
        sb.exec(&ExecRequest::new(["stat", "-c", "%u:%g %a %F", path]))
            .await,
        "stat",
    );
    assert_eq!(out.exit_code, 0, "{path}: {}", out.stderr_text());
    out.stdout_text().trim().to_owned()
}

#[tokio::test]
async fn a_push_makes_missing_directories_and_leaves_existing_ones_alone() {
    let Some(p) = provider().await else {
        return;
    };
    let name = unique("pushdirs");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    ok(sb.start().await, "start");
    let setup = ok(
        sb.exec(&ExecRequest::new([
            "sh",
            "-c",
            "mkdir -p /home/kept && chown 1000:1000 /home/kept && chmod 700 /home/kept && echo data > /home/plain",
        ]))
        .await,
        "setup",
    );
    assert_eq!(setup.exit_code, 0, "{}", setup.stderr_text());

    // Three levels missing under a directory that exists with its own
    // owner and mode.
    ok(
        sb.push_file("/home/kept/a/b/c/note", b"hello", 0o640).await,
        "push deep",
    );
    assert_eq!(
        ok(sb.pull_file("/home/kept/a/b/c/note").await, "pull"),
        b"hello"
    );
    assert_eq!(
        stat(sb.as_ref(), "/home/kept").await,
        "1000:1000 700 directory"
    );
    for dir in ["/home/kept/a", "/home/kept/a/b", "/home/kept/a/b/c"] {
        assert_eq!(stat(sb.as_ref(), dir).await, "0:0 755 directory", "{dir}");
    }
    assert_eq!(
        stat(sb.as_ref(), "/home/kept/a/b/c/note").await,
        "0:0 640 regular file"
    );

    // A file where a directory should be: refused, saying so, unchanged.
    for path in ["/home/plain/note", "/home/plain/x/y/note"] {
        let err = sb.push_file(path, b"x", 0o644).await.err();
        assert!(
            err.as_ref()
                .is_some_and(|e| e.to_string().contains("not a directory")),
            "{path}: {err:?}"
        );
    }
    assert_eq!(
        ok(sb.pull_file("/home/plain").await, "pull plain"),
        b"data\n"
    );
}
