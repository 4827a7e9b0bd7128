//! Who may touch a running gateway's files, with a real dnsmasq, a real
//! second Unix user and dnsmasq's own `nobody`: the leases and the log are
//! root's (0600, 0640), the reservations 0640 root:`nogroup`; the user reads
//! none of them, `nobody` cannot write the log the audit trail trusts, and
//! dnsmasq still logs to it. Files an older corral left (world-readable, a
//! log dnsmasq took over) are put right by the next `ensure`. Control: a
//! dnsmasq given its log by path, as corral used to, hands it to `nobody`,
//! who then forges a record in it.

// Test helpers outside #[test] fns unwrap too: a failed setup is a failed test.
#![allow(clippy::unwrap_used)]

mod gateway_lab;

use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use corral_egress::netns::Netns;
use corral_gateway::wire::TYPE_A;
use corral_gateway::{Change, DnsTiming, GatewaySpec};
use corral_test_support::TestUser;
use gateway_lab::{UPSTREAM, allowlist_profile, ask, env};

/// The uid or gid `name` has in `/etc/passwd` or `/etc/group`.
fn id_of(db: &str, name: &str) -> u32 {
    std::fs::read_to_string(db)
        .unwrap()
        .lines()
        .find_map(|l| {
            let mut f = l.split(':');
            (f.next() == Some(name)).then(|| f.nth(1).unwrap().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no {name} in {db}"))
}

/// Runs `sh -c script` as `uid`:`gid` (no supplementary groups); true when
/// it succeeded.
fn sh_as(uid: u32, gid: u32, script: &str) -> bool {
    Command::new("/bin/sh")
        .arg("-c")
        .arg(script)
        .uid(uid)
        .gid(gid)
        .current_dir("/")
        .output()
        .unwrap()
        .status
        .success()
}

fn owner_mode(path: &Path) -> (u32, u32, u32) {
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.uid(), m.gid(), m.mode() & 0o7777)
}

fn q(path: &Path) -> String {
    format!("'{}'", path.display())
}

#[test]
fn a_second_user_reads_no_gateway_file_and_nobody_cannot_forge_the_log() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let Some(user) = TestUser::create() else {
        return;
    };
    let nobody = id_of("/etc/passwd", "nobody");
    let nogroup = id_of("/etc/group", "nogroup");
    let env = env(vec![allowlist_profile()], DnsTiming::default());
    let gw = &env.gateways.0[0];
    let paths = gw.paths().clone();
    let sb = env.topo.sandbox("agent").unwrap();
    assert_eq!(
        ask(&sb.ns, sb.gateway_v4, "api.corral.test", TYPE_A)
            .unwrap()
            .answers
            .len(),
        1
    );

    assert_eq!(owner_mode(&paths.leases()), (0, 0, 0o600));
    assert_eq!(owner_mode(&paths.log()), (0, 0, 0o640));
    assert_eq!(owner_mode(&paths.conf()), (0, 0, 0o600));
    assert_eq!(owner_mode(&paths.reservations()), (0, nogroup, 0o640));
    // The directories let a user in (dnsmasq's must reach the
    // reservations), so only the files' modes keep the user out.
    assert!(sh_as(
        user.uid,
        user.gid,
        &format!("test -x {}", q(paths.dir()))
    ));
    for file in [
        paths.leases(),
        paths.reservations(),
        paths.log(),
        paths.conf(),
    ] {
        assert!(
            !sh_as(user.uid, user.gid, &format!("cat {} >/dev/null", q(&file))),
            "{} read {}",
            user.name,
            file.display()
        );
    }
    // dnsmasq's user reads what it re-reads on SIGHUP, and cannot write the
    // log it is handed.
    assert!(sh_as(
        nobody,
        nogroup,
        &format!("cat {} >/dev/null", q(&paths.reservations()))
    ));
    assert!(!sh_as(
        nobody,
        nogroup,
        &format!("echo forged >> {}", q(&paths.log()))
    ));
    // And the daemon still logs there (the audit trail's input).
    let deadline = Instant::now() + Duration::from_secs(2);
    let logged = loop {
        let text = std::fs::read_to_string(paths.log()).unwrap();
        if text.contains("query[A] api.corral.test") || Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(logged.contains("query[A] api.corral.test"), "{logged}");

    // What an older corral left: world-readable leases and reservations,
    // a log dnsmasq made its user's. The user reads them (control), and
    // `ensure` with an unchanged configuration restarts the daemon rather
    // than keep it, and puts the files right.
    std::fs::set_permissions(paths.leases(), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(paths.reservations(), std::fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::chown(paths.log(), Some(nobody), None).unwrap();
    std::fs::set_permissions(paths.log(), std::fs::Permissions::from_mode(0o660)).unwrap();
    assert!(sh_as(
        user.uid,
        user.gid,
        &format!("cat {} >/dev/null", q(&paths.leases()))
    ));
    assert!(sh_as(
        nobody,
        nogroup,
        &format!("echo old >> {}", q(&paths.log()))
    ));
    let p = env.profiles.get("agent").unwrap();
    let spec = GatewaySpec::from_profile(
        p,
        &[SocketAddr::new(UPSTREAM.into(), 53)],
        DnsTiming::default(),
    )
    .unwrap();
    let (_, change) = gw.ensure(&spec, false, Some(&env.topo.host)).unwrap();
    assert_eq!(change, Change::Restarted);
    assert_eq!(owner_mode(&paths.leases()), (0, 0, 0o600));
    assert_eq!(owner_mode(&paths.log()), (0, 0, 0o640));
    assert_eq!(owner_mode(&paths.reservations()), (0, nogroup, 0o640));
    assert!(!sh_as(
        user.uid,
        user.gid,
        &format!("cat {} >/dev/null", q(&paths.leases()))
    ));
    assert!(!sh_as(
        nobody,
        nogroup,
        &format!("echo forged >> {}", q(&paths.log()))
    ));
    // What was logged before is kept.
    assert!(
        std::fs::read_to_string(paths.log())
            .unwrap()
            .contains("query[A] api.corral.test")
    );
    // Now in order: kept as it runs.
    let (_, change) = gw.ensure(&spec, false, Some(&env.topo.host)).unwrap();
    assert_eq!(change, Change::Kept);
}

/// The control for the log: dnsmasq 2.90 given `--log-facility=<path>`
/// (what corral did) makes a root-made 0640 log `nobody`'s, and `nobody`
/// appends a line the audit trail would read as the gateway's.
#[test]
fn a_log_handed_to_dnsmasq_by_path_becomes_nobodys() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let nobody = id_of("/etc/passwd", "nobody");
    let nogroup = id_of("/etc/group", "nogroup");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let log = dir.path().join("dnsmasq.log");
    std::fs::write(&log, "").unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o640)).unwrap();
    let pid_file = dir.path().join("pid");
    let ns = Netns::new().unwrap();
    let mut cmd = Command::new(corral_gateway::DEFAULT_DNSMASQ);
    // DNS off, no DHCP: nothing listens, nothing is sent.
    cmd.args([
        "--conf-file=/dev/null",
        "--port=0",
        "--user=nobody",
        "--group=nogroup",
    ])
    .arg(format!("--pid-file={}", pid_file.display()))
    .arg(format!("--log-facility={}", log.display()));
    let out = ns.spawn(cmd).unwrap().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let taken = owner_mode(&log);
    let forged = sh_as(nobody, nogroup, &format!("echo forged >> {}", q(&log)));
    // The daemon is ours: its pid file was just written by it.
    let _ = Command::new("kill").arg(pid.to_string()).status();
    assert_eq!(taken.0, nobody, "dnsmasq left the log root's: {taken:?}");
    assert!(forged, "nobody could not write the log it owns");
}

/// The child of [`reservations_are_written_under_corralds_bounding_set`]:
/// run only through it (the parent sets the variable).
#[test]
#[ignore = "run by reservations_are_written_under_corralds_bounding_set"]
fn reservations_child() {
    let Some(state) = std::env::var_os("CORRAL_TEST_RESERVATIONS_STATE") else {
        return;
    };
    use corral_egress::plan::{MacAddr, PortBinding};
    use corral_sandbox_core::{BridgeName, InterfaceName};
    let bridge = BridgeName::new("cb-unit").unwrap();
    let b = PortBinding {
        port: InterfaceName::new("p-unit").unwrap(),
        bridge: bridge.clone(),
        mac: MacAddr([2, 0xc0, 10, 0, 0, 9]),
        v4: std::net::Ipv4Addr::new(10, 0, 0, 9),
        v6: None,
    };
    corral_gateway::Gateway::new(Path::new(&state), &bridge)
        .set_reservations(&[b])
        .unwrap();
}

/// corrald binds ports under its unit, whose bounding set has no
/// CAP_CHOWN: a reservations file an apply (root) gave to `nogroup` is
/// rewritten there and stays `nogroup`'s 0640. Control: a file that is not
/// `nogroup`'s yet is refused (a new one could not be given the group), and
/// says to apply.
#[test]
fn reservations_are_written_under_corralds_bounding_set() {
    if !corral_test_support::gate::root()
        || !corral_test_support::gate::tool("setpriv", "util-linux")
    {
        return;
    }
    let nogroup = id_of("/etc/group", "nogroup");
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("gateway/cb-unit/reservations");
    let child = |expect_ok: bool| {
        let unit = corral_test_support::unit::as_unit("corrald.service");
        let out = Command::new(&unit[0])
            .args(&unit[1..])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", "reservations_child", "--ignored", "--nocapture"])
            .env("CORRAL_TEST_RESERVATIONS_STATE", state.path())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.success(), expect_ok, "{text}");
        text
    };
    // As an apply leaves it: written by root with every capability.
    let bridge = corral_sandbox_core::BridgeName::new("cb-unit").unwrap();
    corral_gateway::Gateway::new(state.path(), &bridge)
        .set_reservations(&[])
        .unwrap();
    assert_eq!(owner_mode(&file), (0, nogroup, 0o640));
    child(true);
    assert_eq!(owner_mode(&file), (0, nogroup, 0o640));
    assert!(
        std::fs::read_to_string(&file).unwrap().contains("10.0.0.9"),
        "the child did not write"
    );
    // Control: not the group's yet.
    std::os::unix::fs::chown(&file, None, Some(0)).unwrap();
    std::fs::write(&file, "").unwrap();
    let said = child(false);
    assert!(said.contains("CAP_CHOWN"), "{said}");
}
