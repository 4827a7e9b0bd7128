//! A stale pid file may name a process a local user started and dressed up
//! as our dnsmasq (argv[0] `dnsmasq`, our `--conf-file=`): corral must not
//! take it for its daemon, nor signal it. A real second user runs it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::process::CommandExt as _;

use corral_gateway::{Gateway, GatewayStatus};
use corral_sandbox_core::BridgeName;
use corral_test_support::TestUser;

#[test]
fn a_local_users_lookalike_process_is_never_ours() {
    let Some(user) = TestUser::create() else {
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let gw = Gateway::new(state.path(), &BridgeName::new("cb-pidtest").unwrap());
    std::fs::create_dir_all(gw.paths().dir()).unwrap();
    let mut lookalike = user
        .command("/bin/sh")
        .arg0("dnsmasq")
        .args(["-c", "sleep 300; :"])
        .arg(format!("--conf-file={}", gw.paths().conf().display()))
        // Its own process group, so the test can end the shell and its
        // `sleep` together (the user cannot be deleted while either runs).
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = lookalike.id();
    // The shell has set up its argv once /proc shows it.
    while !std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .starts_with(b"dnsmasq\0")
    {
        std::thread::yield_now();
    }
    std::fs::write(gw.paths().pidfile(), format!("{pid}\n")).unwrap();

    let status = gw.status();
    let stopped = gw.stop();
    let alive = lookalike.try_wait().unwrap().is_none();
    // SAFETY: kill(2) with the negated pid of the group this test created.
    unsafe {
        libc::kill(-i32::try_from(pid).unwrap(), libc::SIGKILL);
    }
    let _ = lookalike.wait();
    match status {
        GatewayStatus::Stale { pid: p, reason } => {
            assert_eq!(p, pid);
            assert!(reason.contains("not the dnsmasq executable"), "{reason}");
        }
        other => panic!("a user's lookalike process was taken for our dnsmasq: {other:?}"),
    }
    assert_eq!(stopped.unwrap(), None);
    assert!(alive, "corral signalled a process that is not its dnsmasq");
}
