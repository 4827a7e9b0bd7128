//! The systemd units in dist/systemd pass `systemd-analyze verify` with the
//! real binary in place of /usr/local/bin/corral. (Their command lines are
//! also parsed by a unit test in src/args.rs.) The hardened units keep their
//! exposure under a bound (`systemd-analyze security --offline`), and a
//! refresh runs with only the capabilities its unit leaves it.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn units_pass_systemd_analyze_verify() {
    if !corral_test_support::gate::tool("systemd-analyze", "systemd") {
        return;
    }
    let dist = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/systemd");
    let dir = tempfile::tempdir().unwrap();
    let mut units = Vec::new();
    for name in [
        "corral-host.service",
        "corral-refresh.service",
        "corral-refresh.timer",
        "corral-watch.service",
        "corrald.service",
    ] {
        let text = std::fs::read_to_string(dist.join(name)).unwrap();
        // corrald is another package's binary: any existing executable
        // serves for verify; corral is the binary under test.
        let text = text
            .replace("/usr/local/bin/corrald", "/bin/true")
            .replace("/usr/local/bin/corral", common::CORRAL);
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        units.push(path);
    }
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .args(&units)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Units this host lacks (incus, multipass) are only ordering hints.
    let problems: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter(|l| !l.contains("incus") && !l.contains("multipass"))
        .collect();
    assert!(
        out.status.success() && problems.is_empty(),
        "systemd-analyze verify:\n{stderr}"
    );
}

/// Each hardened unit's most exposure (systemd's 0–100 scale), a little
/// above what it rated when hardened (corrald 24, refresh 20, host 82,
/// watch 19; corrald 30 once it had what a profiled sandbox's life needs
/// under it, `crates/api/tests/shipped_unit.rs`; watch 32 once its gateway
/// supervisor could run under it, [`watch_heals_and_restarts_gateways_under_its_unit`],
/// then 30 with the kernel tunables read-only but `/proc/sys/net`; both 32
/// once they could host corral's gateway, `CAP_NET_RAW` and `AF_PACKET`,
/// [`watch_hosts_corrals_gateway_under_its_unit`]; all three were 95–96
/// before), and lines the score alone could hide.
const HARDENED: [(&str, &str, &[&str]); 4] = [
    (
        "corral-watch.service",
        "32",
        &[
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ProtectKernelTunables=yes",
            "ProtectProc=invisible",
            "RestrictNamespaces=net",
            "CapabilityBoundingSet=CAP_NET_ADMIN CAP_SYS_PTRACE CAP_KILL CAP_SYS_ADMIN CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID CAP_NET_RAW",
        ],
    ),
    (
        "corrald.service",
        "32",
        &[
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "ProtectHome=yes",
            "PrivateTmp=yes",
            "ProtectProc=invisible",
            "RestrictNamespaces=net",
            "SystemCallFilter=@system-service",
            "CapabilityBoundingSet=CAP_NET_ADMIN CAP_SYS_PTRACE CAP_KILL CAP_SYS_ADMIN CAP_NET_BIND_SERVICE CAP_SETUID CAP_SETGID CAP_NET_RAW",
        ],
    ),
    (
        "corral-refresh.service",
        "25",
        &[
            "NoNewPrivileges=yes",
            "ProtectSystem=strict",
            "RestrictNamespaces=yes",
            "CapabilityBoundingSet=CAP_NET_ADMIN",
        ],
    ),
    (
        "corral-host.service",
        "85",
        &["NoNewPrivileges=yes", "ProtectHome=yes"],
    ),
];

#[test]
fn hardened_units_stay_hardened() {
    if !corral_test_support::gate::tool("systemd-analyze", "systemd") {
        return;
    }
    for (name, most, lines) in HARDENED {
        let path = corral_test_support::unit::unit_path(name);
        // `--offline` rates the file as written; no manager needs to run.
        let out = Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--threshold", most])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name} is more exposed than {most}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&path).unwrap();
        for line in lines {
            assert!(
                text.lines().any(|l| l == *line),
                "{name}: {line} is missing"
            );
        }
    }
}

#[test]
fn refresh_runs_with_only_its_units_capabilities() {
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("systemd-analyze", "systemd")
    {
        return;
    }
    let lab = corral_tests::hostlab::HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let config = lab.config_path().display().to_string();
    let state = lab.state_dir().display().to_string();
    let args = ["--config", config.as_str(), "--state-dir", state.as_str()];
    let applied = common::corral(&[&["host", "apply"][..], &args].concat());
    assert_eq!(applied.code, Some(0), "{}", applied.stderr);
    // Its bounding set, NoNewPrivileges=, RestrictNamespaces=,
    // RestrictAddressFamilies= and SystemCallFilter=, read from the unit.
    let mut cmd = Command::new(common::CORRAL);
    cmd.args(["host", "refresh"]).args(args);
    corral_test_support::unit::UnitSandbox::of_unit("corral-refresh.service").apply_to(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "refresh with only {:?}: {}",
        corral_test_support::unit::unit_capabilities("corral-refresh.service"),
        String::from_utf8_lossy(&out.stderr)
    );
    drop(lab);
}

/// A child killed (and reaped) when dropped.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `corral host watch ARGS` under what `unit` says, logging at info to
/// `log`.
fn watch_under_unit(unit: &str, args: &[&str], log: &Path, stdout: std::process::Stdio) -> Kill {
    let mut cmd = Command::new(common::CORRAL);
    cmd.args(["host", "watch"])
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(stdout)
        .stderr(std::fs::File::create(log).unwrap());
    corral_test_support::unit::UnitSandbox::of_unit(unit).apply_to(&mut cmd);
    Kill(cmd.spawn().unwrap())
}

/// `corral host watch` under what `corral-watch.service` says (its
/// bounding set, `NoNewPrivileges=`, `ProtectProc=`,
/// `ProtectKernelTunables=` with its `ReadWritePaths=`, `RestrictNamespaces=`,
/// `RestrictAddressFamilies=` and `SystemCallFilter=`, read from the file
/// and applied as systemd would; `corral_test_support::unit::UnitSandbox`)
/// heals a rule deleted and a sysctl changed behind corral's back and restarts a gateway killed
/// with SIGKILL (its supervisor), on a profile applied in the host
/// namespace.
#[test]
fn watch_heals_and_restarts_gateways_under_its_unit() {
    use std::io::BufRead as _;
    use std::time::{Duration, Instant};

    const UNIT: &str = "corral-watch.service";
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("nft", "nftables")
        || !corral_test_support::gate::tool("systemd-analyze", "systemd")
    {
        return;
    }
    let lab = corral_tests::hostlab::HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let config = lab.config_path().display().to_string();
    let state = lab.state_dir().display().to_string();
    let args = ["--config", config.as_str(), "--state-dir", state.as_str()];
    let applied = common::corral(&[&["host", "apply"][..], &args].concat());
    assert_eq!(applied.code, Some(0), "{}", applied.stderr);

    let log = lab.state_dir().with_file_name("watch.log");
    let mut watch = watch_under_unit(UNIT, &args, &log, std::process::Stdio::piped());
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    let stdout = watch.0.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let patience = Duration::from_secs(60);
    let wait_for = |what: &str| {
        let started = Instant::now();
        loop {
            match lines.recv_timeout(Duration::from_millis(500)) {
                Ok(l) if l.contains(what) => return,
                Ok(_) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(e) => panic!("the watch ended ({e}) before `{what}`:\n{}", logs()),
            }
            assert!(
                started.elapsed() < patience,
                "no `{what}` within {patience:?}:\n{}",
                logs()
            );
        }
    };
    wait_for("watching");
    let problems = corral_test_support::unit::UnitSandbox::of_unit(UNIT).check(watch.0.id());
    assert!(problems.is_empty(), "{problems:?}");

    // A rule deleted behind corral's back is healed, and with it a sysctl
    // changed behind corral's back: the heal writes /proc/sys/net, the one
    // tunable tree the unit leaves writable.
    let sysctl = format!(
        "/proc/sys/net/ipv4/conf/{}/arp_ignore",
        lab.profile.bridge.as_str().replace('.', "/")
    );
    assert_eq!(std::fs::read_to_string(&sysctl).unwrap().trim(), "1");
    std::fs::write(&sysctl, "0").unwrap();
    let chain = format!("{}-out", lab.profile.name);
    let listing = Command::new("nft")
        .args(["-a", "list", "chain", "inet", "corral", &chain])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&listing.stdout).into_owned();
    let handle = text
        .lines()
        .rev()
        .find_map(|l| l.split("# handle ").nth(1))
        .unwrap_or_else(|| panic!("no rule in {chain}: {text}"))
        .trim()
        .to_owned();
    let deleted = Command::new("nft")
        .args([
            "delete", "rule", "inet", "corral", &chain, "handle", &handle,
        ])
        .output()
        .unwrap();
    assert!(deleted.status.success(), "{deleted:?}");
    wait_for("drift healed");
    assert_eq!(
        std::fs::read_to_string(&sysctl).unwrap().trim(),
        "1",
        "the heal under the unit rewrites {sysctl}:\n{}",
        logs()
    );
    let verify = common::corral(&[&["host", "verify"][..], &args].concat());
    assert_eq!(verify.code, Some(0), "after the heal: {}", verify.stdout);

    // A gateway killed is restarted by the supervisor, and stays up.
    let bridge = corral_sandbox_core::BridgeName::new(lab.profile.bridge.as_str()).unwrap();
    let gateway = corral_gateway::Gateway::new(&lab.state_dir(), &bridge);
    let pid_now = || match gateway.status() {
        corral_gateway::GatewayStatus::Running { pid } => Some(pid),
        _ => None,
    };
    let old = pid_now().unwrap_or_else(|| {
        panic!(
            "the gateway runs after apply: {}\n{}",
            gateway.status(),
            logs()
        )
    });
    // SAFETY: a plain kill(2) of the gateway this test's apply started.
    let killed = unsafe { libc::kill(i32::try_from(old).unwrap(), libc::SIGKILL) };
    assert_eq!(killed, 0);
    let started = Instant::now();
    let new = loop {
        if let Some(p) = pid_now().filter(|p| *p != old) {
            std::thread::sleep(Duration::from_secs(1));
            if pid_now() == Some(p) {
                break p;
            }
        }
        assert!(
            started.elapsed() < patience,
            "the watch's supervisor did not restart the gateway of {bridge} within {patience:?}:\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    eprintln!(
        "gateway {bridge}: pid {old} killed, pid {new} running {} ms later",
        started.elapsed().as_millis()
    );
    drop(watch);
    drop(lab);
}

/// `corral host apply` (`corral-host.service`'s `ExecStart=`) under what
/// that unit says of the settings reproduced here (only
/// `NoNewPrivileges=`: it keeps every capability and names no namespace,
/// family or syscall filter): the apply succeeds and the profile's gateway
/// runs.
#[test]
fn apply_runs_under_its_unit() {
    const UNIT: &str = "corral-host.service";
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("systemd-analyze", "systemd")
    {
        return;
    }
    let lab = corral_tests::hostlab::HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let config = lab.config_path().display().to_string();
    let state = lab.state_dir().display().to_string();
    let mut cmd = Command::new(common::CORRAL);
    cmd.args([
        "--quiet",
        "host",
        "apply",
        "--config",
        &config,
        "--state-dir",
        &state,
    ]);
    corral_test_support::unit::UnitSandbox::of_unit(UNIT).apply_to(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "apply under {UNIT}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bridge = corral_sandbox_core::BridgeName::new(lab.profile.bridge.as_str()).unwrap();
    let status = corral_gateway::Gateway::new(&lab.state_dir(), &bridge).status();
    assert!(
        matches!(status, corral_gateway::GatewayStatus::Running { .. }),
        "the gateway after an apply under {UNIT}: {status}"
    );
    drop(lab);
}

/// `corral host watch` under what `corral-watch.service` says hosts
/// corral's gateway on a `dns = "corral"` bridge (no dnsmasq there): a
/// port bound as the lifecycle binds one gets its reservation from
/// corral's DHCP server and its IPv6 address from corral's router
/// advertisements, and its query for the listed name is answered and
/// opens the name's address. The DHCP server answers out of the asking
/// port with a packet socket and the advertiser listens on a raw ICMPv6
/// socket: the unit's address families and bounding set must allow both.
/// Control: before the watch runs nothing hosts the gateway, and the port
/// gets no lease.
#[test]
fn watch_hosts_corrals_gateway_under_its_unit() {
    use std::net::{IpAddr, SocketAddr};
    use std::time::{Duration, Instant};

    use corral_egress::link::Links;
    use corral_egress::netns::Netns;

    const UNIT: &str = "corral-watch.service";
    if !corral_test_support::gate::netns()
        || !corral_test_support::gate::tool("nft", "nftables")
        || !corral_test_support::gate::tool("systemd-analyze", "systemd")
    {
        return;
    }
    let lab = corral_tests::hostlab::HostLab::for_apply_on_corrals_gateway()
        .unwrap_or_else(|e| panic!("{e}"));
    let config = lab.config_path().display().to_string();
    let state = lab.state_dir().display().to_string();
    let args = ["--config", config.as_str(), "--state-dir", state.as_str()];
    let applied = common::corral(&[&["host", "apply"][..], &args].concat());
    assert_eq!(applied.code, Some(0), "{}", applied.stderr);
    let bridge = corral_sandbox_core::BridgeName::new(lab.profile.bridge.as_str()).unwrap();
    let status = corral_gateway::Gateway::new(&lab.state_dir(), &bridge).status();
    assert_eq!(status, corral_gateway::GatewayStatus::Hosted, "{status}");

    // A guest on a port bound as the lifecycle binds one.
    let (binding, claim) =
        corral_service::ports::bind_new(None, &lab.state_dir(), &lab.profile.name, &[])
            .unwrap_or_else(|e| panic!("{e}"));
    drop(claim);
    let guest = corral_egress::link::guest::guest_on_bridge(
        &Netns::current().unwrap(),
        bridge.as_str(),
        binding.port.as_str(),
        binding.mac.octets(),
    );
    let dir = tempfile::tempdir().unwrap();
    let client = corral_test_support::Udhcpc::in_dir(dir.path());
    let lease = |tries| {
        guest
            .spawn(client.command("eth0", tries))
            .unwrap()
            .wait()
            .unwrap();
        client.bound()
    };
    // The control: nothing hosts corral's gateway yet.
    assert_eq!(
        lease(2),
        None,
        "a lease came before anything hosted the gateway"
    );

    let log = lab.state_dir().with_file_name("watch.log");
    let watch = watch_under_unit(UNIT, &args, &log, std::process::Stdio::null());
    let logs = || std::fs::read_to_string(&log).unwrap_or_default();
    let patience = Duration::from_secs(60);
    let started = Instant::now();
    while !logs().contains("corral's resolver and DHCP server: serving") {
        assert!(
            !logs().contains("cannot serve") && started.elapsed() < patience,
            "corral's gateway does not serve under {UNIT}:\n{}",
            logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let problems = corral_test_support::unit::UnitSandbox::of_unit(UNIT).check(watch.0.id());
    assert!(problems.is_empty(), "{problems:?}");

    assert_eq!(
        lease(6).as_deref(),
        Some(binding.v4.to_string().as_str()),
        "the reservation from corral's DHCP server under {UNIT}:\n{}",
        logs()
    );
    // The guest takes its lease (udhcpc's script only records it).
    let (v4, prefix, gw) = (
        binding.v4,
        lab.profile.subnet_v4.prefix_len(),
        lab.profile.gateway_v4(),
    );
    guest
        .run_async(|| async move {
            let links = Links::connect()?;
            let net = ipnet::Ipv4Net::new(v4, prefix).unwrap();
            links.add_address("eth0", ipnet::IpNet::V4(net)).await?;
            links
                .add_route("0.0.0.0/0".parse().unwrap(), IpAddr::V4(gw))
                .await
        })
        .unwrap()
        .unwrap();
    // The router advertisement gives the guest its bound IPv6 address.
    let v6 = binding.v6.expect("the lab's profile has a /64");
    let has_v6 = || {
        guest
            .run_async(|| async { Links::connect()?.addresses("eth0").await })
            .unwrap()
            .unwrap()
            .iter()
            .any(|a| a.addr() == IpAddr::V6(v6))
    };
    let started = Instant::now();
    while !has_v6() {
        assert!(
            started.elapsed() < patience,
            "no router advertisement gave the guest {v6} under {UNIT}:\n{}",
            logs()
        );
        corral_drill::slaac::solicit(&guest).unwrap();
        std::thread::sleep(Duration::from_millis(500));
    }
    // The listed name resolves through corral's resolver and its address
    // opens (the learned set is written from inside the unit).
    let resolver = SocketAddr::new(IpAddr::V4(lab.profile.gateway_v4()), 53);
    let answer = guest
        .run(|| {
            corral_gateway::probe::query(
                resolver,
                corral_tests::hostlab::ALLOWED_NAME,
                corral_gateway::wire::TYPE_A,
                Duration::from_secs(5),
            )
        })
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    let to = lab.dns_allowed();
    assert!(
        answer.answers.iter().any(|r| r.addr == to.ip()),
        "{answer:?} does not name {to}"
    );
    let connected = guest
        .run(|| std::net::TcpStream::connect_timeout(&to, Duration::from_secs(5)))
        .unwrap();
    assert!(connected.is_ok(), "tcp {to}: {connected:?}");
    drop(guest);
    drop(watch);
    drop(lab);
}
