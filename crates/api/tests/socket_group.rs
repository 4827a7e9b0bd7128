//! `--socket-group G` lets G's members reach corrald and nobody else, with
//! two real Unix users (a member and an outsider) and the real binary: in
//! a socket directory corrald makes, in the one systemd makes for it
//! (`$RUNTIME_DIRECTORY`), and under the shipped unit's bounding set.
//! Control: the directory as corrald used to leave it (0750 root:root)
//! keeps the member out.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;
use std::process::Command;

use common::Server;
use corral_test_support::TestUser;

/// A directory every user may traverse (a temp dir is 0700).
fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Whether `user` gets an HTTP answer on `sock` (curl, a real client
/// process under that uid); curl's error when it does not.
fn connects(user: &TestUser, sock: &Path) -> Result<u16, String> {
    let out = user
        .command("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--unix-socket",
        ])
        .arg(sock)
        .arg("http://localhost/v1/health")
        .output()
        .unwrap();
    let code: u16 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    if out.status.success() && code != 0 {
        Ok(code)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

fn owner_mode(path: &Path) -> (u32, u32, u32) {
    let m = std::fs::metadata(path).unwrap();
    (m.uid(), m.gid(), m.permissions().mode() & 0o7777)
}

/// Two users: the socket group is the member's own group.
fn users() -> Option<(TestUser, TestUser)> {
    if !corral_test_support::gate::tool("curl", "curl") {
        return None;
    }
    Some((TestUser::create()?, TestUser::create()?))
}

#[test]
fn a_member_reaches_the_socket_in_the_directory_corrald_makes_and_an_outsider_does_not() {
    let Some((member, outsider)) = users() else {
        return;
    };
    let top = open_dir();
    let run = top.path().join("run/corral");
    let sock = run.join("corrald.sock");
    let srv = Server::start(&[
        "--socket",
        &sock.display().to_string(),
        "--socket-group",
        &member.name,
    ]);
    for d in [top.path().join("run"), run.clone()] {
        assert_eq!(owner_mode(&d), (0, member.gid, 0o750), "{}", d.display());
    }
    let code = connects(&member, &sock).unwrap_or_else(|e| panic!("the member is kept out: {e}"));
    assert!(code >= 200, "{code}");
    let e = connects(&outsider, &sock).expect_err("an outsider reached the socket");
    assert!(
        e.contains("ermission denied") || e.contains("connect"),
        "{e}"
    );

    // Control: the directory as corrald made it before (root:root 0750)
    // keeps the member out, though the socket itself is the member's
    // group's.
    std::os::unix::fs::chown(&run, Some(0), Some(0)).unwrap();
    let e = connects(&member, &sock).expect_err("root:root 0750 let the member in");
    assert!(
        e.contains("ermission denied") || e.contains("connect"),
        "{e}"
    );
    drop(srv);
}

#[test]
fn the_directory_systemd_makes_is_given_to_the_group_and_any_other_unreachable_one_refused() {
    let Some((member, outsider)) = users() else {
        return;
    };
    let top = open_dir();
    let run = top.path().join("corral");
    // As systemd makes `RuntimeDirectory=corral` without `Group=`.
    std::fs::create_dir(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o750)).unwrap();
    let sock = run.join("corrald.sock");
    let args = [
        "--socket".to_owned(),
        sock.display().to_string(),
        "--socket-group".to_owned(),
        member.name.clone(),
    ];

    // Control: an existing directory that is not corrald's is left alone,
    // and corrald refuses to serve a socket its group cannot reach.
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_corrald"))
        .args(&args)
        .arg("--state-dir")
        .arg(state.path())
        .env_remove("RUNTIME_DIRECTORY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "members of --socket-group `{}` cannot enter {}",
            member.name,
            run.display()
        )),
        "{stderr}"
    );
    assert_eq!(owner_mode(&run), (0, 0, 0o750));

    let mut with_state = args.to_vec();
    with_state.extend(["--state-dir".to_owned(), state.path().display().to_string()]);
    let run_var = run.display().to_string();
    let srv = Server::start_with(&with_state, &[("RUNTIME_DIRECTORY", &run_var)], None);
    assert_eq!(owner_mode(&run), (0, member.gid, 0o750));
    connects(&member, &sock).unwrap_or_else(|e| panic!("the member is kept out: {e}"));
    connects(&outsider, &sock).expect_err("an outsider reached the socket");
    drop(srv);
}

#[test]
fn under_the_units_bounding_set_the_group_set_by_systemd_is_enough() {
    if !corral_test_support::gate::tool("setpriv", "util-linux") {
        return;
    }
    let Some((member, outsider)) = users() else {
        return;
    };
    let top = open_dir();
    let run = top.path().join("corral");
    // As systemd makes it with `Group=<the socket group>`.
    std::fs::create_dir(&run).unwrap();
    std::os::unix::fs::chown(&run, Some(0), Some(member.gid)).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o750)).unwrap();
    let sock = run.join("corrald.sock");
    let state = tempfile::tempdir().unwrap();
    let args = vec![
        "--socket".to_owned(),
        sock.display().to_string(),
        "--socket-group".to_owned(),
        member.name.clone(),
        "--state-dir".to_owned(),
        state.path().display().to_string(),
    ];
    let unit = corral_test_support::unit::as_unit("corrald.service");
    let (program, rest) = unit.split_first().unwrap();

    // Control: without the unit's group the socket is born root's, and
    // the bounding set (no CAP_CHOWN) cannot give it away: corrald says so.
    let out = Command::new(program)
        .args(rest)
        .arg(env!("CARGO_BIN_EXE_corrald"))
        .args(&args)
        .env("CORRALD_NO_KERNEL_WATCH", "true")
        .env("CORRALD_NO_SUPERVISE", "true")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("to group `{}`", member.name)),
        "{stderr}"
    );

    // systemd's `Group=`: corrald runs with the group (setpriv --regid,
    // before the bounding set is applied).
    let mut wrapper = vec![
        "setpriv".to_owned(),
        format!("--regid={}", member.gid),
        "--clear-groups".to_owned(),
    ];
    wrapper.extend(rest.iter().cloned());
    let srv = Server::start_under(&wrapper, &args, &[], None);
    assert_eq!(std::fs::metadata(&sock).unwrap().gid(), member.gid);
    connects(&member, &sock).unwrap_or_else(|e| panic!("the member is kept out: {e}"));
    connects(&outsider, &sock).expect_err("an outsider reached the socket");
    drop(srv);
}
