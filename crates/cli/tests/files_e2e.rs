//! Moving files in and out of a sandbox and entering it, end to end with the
//! real `corral` binary against the real Incus daemon: `push` and `pull`, and
//! `shell` (which needs a terminal and hands it to the backend's client).
//! Instances are force-deleted by a guard when the test ends.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::sandboxes::{Cleanup, in_state, incus, no_terminal, plain, unique};
use common::{CORRAL, corral, schema};
use std::process::{Command, Stdio};

#[test]
fn push_and_pull_files() {
    let Some(client) = incus() else { return };
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let name = unique("files");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    plain(s, &name);
    let local = s.join("in.bin");
    let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    std::fs::write(&local, &bytes).unwrap();
    let pushed = in_state(
        s,
        &[
            "push",
            &name,
            local.to_str().unwrap(),
            "/opt/new/dir/f.bin",
            "--mode",
            "600",
            "--json",
        ],
    )
    .expect_code(0)
    .json();
    schema::check(&pushed);
    assert_eq!(pushed["bytes"], 70_000);
    let ls = corral(&["exec", &name, "--", "ls", "-l", "/opt/new/dir/f.bin"]).expect_code(0);
    assert!(ls.stdout.starts_with("-rw-------"), "{}", ls.stdout);
    let out = s.join("out.bin");
    let pulled = in_state(
        s,
        &[
            "pull",
            &name,
            "/opt/new/dir/f.bin",
            out.to_str().unwrap(),
            "--json",
        ],
    )
    .expect_code(0)
    .json();
    schema::check(&pulled);
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    // Replacing a local file is destructive.
    let run = no_terminal(&[
        "pull",
        &name,
        "/etc/hostname",
        out.to_str().unwrap(),
        "--state-dir",
        s.to_str().unwrap(),
    ]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    // A dangling symlink planted where the pull writes (by anyone who can
    // write the directory) is never followed: `exists()` says no for it,
    // so before this the pull wrote the guest's bytes to its target.
    let victim = s.join("victim");
    let planted = s.join("planted.txt");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let pull_to = |extra: &[&str]| {
        let mut args = vec![
            "pull",
            &name,
            "/etc/hostname",
            planted.to_str().unwrap(),
            "--state-dir",
            s.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        no_terminal(&args)
    };
    let run = pull_to(&[]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(!victim.exists(), "the pull followed a dangling symlink");
    // Asked to replace it, the link itself is replaced, never its target.
    let run = pull_to(&["--force"]);
    assert_eq!(run.code, Some(0), "{run:?}");
    assert!(!victim.exists(), "the replacing pull followed the symlink");
    assert!(
        std::fs::symlink_metadata(&planted)
            .unwrap()
            .file_type()
            .is_file()
    );
    // Standard input and output.
    let mut child = Command::new(CORRAL)
        .args(["push", &name, "-", "/tmp/from-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        child.stdin.take().unwrap().write_all(b"piped in").unwrap();
    }
    assert!(child.wait().unwrap().success());
    let run = corral(&["pull", &name, "/tmp/from-stdin", "-"]).expect_code(0);
    assert_eq!(run.stdout, "piped in");
    // Missing directories are made; one that exists is left as it is.
    corral(&["push", &name, local.to_str().unwrap(), "/tmp/made/here/f"]).expect_code(0);
    let ls = corral(&["exec", &name, "--", "ls", "-ld", "/tmp", "/tmp/made"]).expect_code(0);
    assert!(
        ls.stdout.contains("drwxrwxrwt"),
        "/tmp keeps its mode: {}",
        ls.stdout
    );
    assert!(ls.stdout.contains("drwxr-xr-x"), "{}", ls.stdout);
    let run = corral(&["push", &name, local.to_str().unwrap(), "/etc/hostname/x"]).expect_code(1);
    assert!(run.stderr.contains("not a directory"), "{}", run.stderr);
    // Bad input.
    corral(&["push", &name, local.to_str().unwrap(), "relative/path"]).expect_code(2);
    corral(&[
        "push",
        &name,
        local.to_str().unwrap(),
        "/tmp/x",
        "--mode",
        "9z",
    ])
    .expect_code(2);
    let run = corral(&["pull", &name, "/no/such/file", "-"]).expect_code(1);
    assert!(run.stderr.contains("does not exist"), "{}", run.stderr);
    let run = corral(&["pull", &name, "/tmp", "-"]).expect_code(2);
    assert!(run.stderr.contains("not a regular file"), "{}", run.stderr);
}

#[test]
fn shell_needs_a_terminal_and_hands_it_to_the_backend_client() {
    let Some(client) = incus() else { return };
    if !corral_test_support::gate::tool("script", "bsdutils") {
        return;
    }
    let state = tempfile::tempdir().unwrap();
    let s = state.path();
    let name = unique("shell");
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    plain(s, &name);
    let run = no_terminal(&["shell", &name]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stderr.contains("needs a terminal"), "{}", run.stderr);
    // `script` gives corral a pseudo-terminal; the shell reads the lines.
    let command = format!("{CORRAL} shell {name} --state-dir {}", s.to_str().unwrap());
    let mut child = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"echo marker-$((6*7)); exit 3\n")
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("marker-42"), "{text}");
    assert_eq!(
        out.status.code(),
        Some(3),
        "the shell's exit status: {text}"
    );
    let events = in_state(s, &["events", "--sandbox", &name, "--json"])
        .expect_code(0)
        .json();
    assert!(
        events["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "shell"),
        "{events}"
    );
    // Stopped: refused before the terminal is handed over.
    in_state(s, &["stop", "--force", &name]).expect_code(0);
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("start it first"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
