//! corral on a real two-member Incus cluster (`corral_tests::cluster`):
//! corral's host enforcement applied in each member's network namespace
//! with a state directory of its own, sandboxes placed through the service
//! on the member asked for (`target`), their location read back, and the
//! sandbox on `m2` reaching its allowlist and nothing else with real
//! packets; the control takes corral's table away on `m2` and the same
//! probe gets through. An evacuated member is refused as a target and
//! takes work again once restored.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime};

use corral_egress::netns::Netns;
use corral_provider_incus::{
    ClusterMember, Endpoint, IncusConfig, IncusProvider, TEST_IMAGE_ALIAS,
};
use corral_sandbox_core::sandbox::SandboxProvider;
use corral_service::CreateOptions;
use corral_service::cluster::{Change, Rotation};
use corral_service::sandboxes::NewSandbox;
use corral_tests::cluster::{ALLOWED, ClusterLab, MemberCorral, UNLISTED};
use corral_tests::incus::tcp_probe;

fn reached_from_ns(ns: &str, to: SocketAddr) -> bool {
    Netns::open(ns)
        .unwrap()
        .run(|| TcpStream::connect_timeout(&to, Duration::from_secs(3)).is_ok())
        .unwrap()
}

/// How long an attestation holds.
const INTERVAL: Duration = Duration::from_secs(10);

fn needs() -> bool {
    corral_test_support::gate::root()
        && corral_test_support::gate::netns()
        && corral_test_support::gate::tool("nft", "nftables")
        && corral_test_support::gate::incus().is_some()
}

#[test]
fn sandboxes_land_on_the_member_asked_for_and_each_member_enforces() {
    if !needs() {
        return;
    }
    let formed = Instant::now();
    let lab = ClusterLab::new().unwrap_or_else(|e| panic!("{e}"));
    eprintln!("cluster of 2 formed in {} ms", formed.elapsed().as_millis());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (m1, m2) = (lab.member("m1"), lab.member("m2"));

    // Connecting converges corral's project on the cluster; the image goes in after.
    let provider = rt
        .block_on(IncusProvider::connect(IncusConfig {
            endpoint: Endpoint::Unix(m1.socket()),
            ..IncusConfig::local()
        }))
        .unwrap();
    let members = rt.block_on(provider.members()).unwrap().expect("a cluster");
    let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["m1", "m2"]);
    assert!(members.iter().all(|m| m.takes_work()), "{members:?}");
    lab.import_image(TEST_IMAGE_ALIAS, "corral", "corral")
        .unwrap_or_else(|e| panic!("{e}"));

    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("corral.toml");
    std::fs::write(
        &config,
        corral_sandbox_core::Config::builtin_default().to_toml_string(),
    )
    .unwrap();
    let states: Vec<PathBuf> = ["m1", "m2"].iter().map(|m| dir.path().join(m)).collect();
    // Declared after the lab: torn down before the members go.
    let corral: Vec<MemberCorral> = [m1, m2]
        .iter()
        .zip(&states)
        .map(|(m, s)| MemberCorral::apply(&config, m, s.clone()).unwrap_or_else(|e| panic!("{e}")))
        .collect();

    // The placing side's configuration is the same file; both attest.
    let expected = corral_sandbox_core::Config::builtin_default();
    let mut rotation = Rotation::new(INTERVAL);
    for (m, c) in [(m1, &corral[0]), (m2, &corral[1])] {
        let a = c.attest(&m.name, &expected).unwrap();
        assert!(a.failures().is_empty(), "{a:?}");
        assert!(
            rotation
                .observe(&m.name, Ok(&a), SystemTime::now())
                .is_some()
        );
    }

    // Control before any sandbox: m2 itself reaches both destinations, so
    // a blocked probe below is corral's doing, not the lab's routing.
    assert!(reached_from_ns(&m2.netns, ALLOWED));
    assert!(reached_from_ns(&m2.netns, UNLISTED));

    let pid = std::process::id();
    let mut placed = Vec::new();
    for (m, c) in [(m1, &corral[0]), (m2, &corral[1])] {
        let name = format!("cl-{}-{pid}", m.name);
        let svc = c.service(m).unwrap();
        let started = Instant::now();
        let created = rt
            .block_on(
                svc.create(
                    &NewSandbox::new(&name, TEST_IMAGE_ALIAS)
                        .on("allowlist")
                        .on_member(&m.name),
                    CreateOptions::default(),
                ),
            )
            .unwrap_or_else(|e| {
                let log = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(format!("tail -n 20 {}/logs/*/lxc.log", m.dir.display()))
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                    .unwrap_or_default();
                panic!("create on {}: {e}\n{log}", m.name)
            });
        eprintln!(
            "placed {name} on {} and ready in {} ms",
            m.name,
            started.elapsed().as_millis()
        );
        assert_eq!(created.info.location.as_deref(), Some(m.name.as_str()));
        placed.push(name);
    }
    // `ls` through either member sees both, each where it runs.
    let listed = rt.block_on(provider.list()).unwrap();
    for (name, member) in placed.iter().zip(["m1", "m2"]) {
        let info = listed.iter().find(|i| i.name.as_str() == name).unwrap();
        assert_eq!(info.location.as_deref(), Some(member), "{info:?}");
    }

    let on_m2 = rt
        .block_on(provider.open(&placed[1].parse().unwrap()))
        .unwrap();
    let probe = |to| rt.block_on(tcp_probe(on_m2.as_ref(), to)).unwrap();
    let p = probe(ALLOWED);
    assert!(
        p.reached,
        "the sandbox on m2 must reach its allowlisted {ALLOWED}: {}",
        p.detail
    );
    let p = probe(UNLISTED);
    assert!(
        !p.reached,
        "the sandbox on m2 must not reach {UNLISTED}: {}",
        p.detail
    );

    // Control: without corral's table on m2 the same probe gets through.
    let out = std::process::Command::new("ip")
        .args([
            "netns", "exec", &m2.netns, "nft", "delete", "table", "inet", "corral",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deleted = Instant::now();
    let p = probe(UNLISTED);
    assert!(
        p.reached,
        "control: with m2's rules gone {UNLISTED} must answer: {}",
        p.detail
    );

    // Rules deleted behind corral's back: m2's next attestation fails, m2
    // is drained, nothing more is placed there.
    let a = corral[1].attest("m2", &expected).unwrap();
    let change = rotation.observe("m2", Ok(&a), SystemTime::now());
    let drained_after = deleted.elapsed();
    assert!(
        matches!(&change, Some(Change::Drained { member, .. }) if member == "m2"),
        "{change:?}"
    );
    assert!(drained_after < INTERVAL, "drained after {drained_after:?}");
    eprintln!(
        "m2 drained {} ms after its table was deleted: {change:?}",
        drained_after.as_millis()
    );
    let members = rt.block_on(provider.members()).unwrap().unwrap();
    let e = rotation
        .choose(&members, Some("m2"), SystemTime::now())
        .unwrap_err();
    assert!(e.contains("m2: drained"), "{e}");
    assert_eq!(
        rotation.choose(&members, None, SystemTime::now()).unwrap(),
        "m1"
    );
    // Repaired: enforcement back, attestation passes, m2 back in rotation.
    corral[1].reapply().unwrap();
    let p = probe(ALLOWED);
    assert!(
        p.reached,
        "re-applied: {ALLOWED} must be reached again: {}",
        p.detail
    );
    let p = probe(UNLISTED);
    assert!(
        !p.reached,
        "re-applied: {UNLISTED} must be blocked again: {}",
        p.detail
    );
    let a = corral[1].attest("m2", &expected).unwrap();
    assert_eq!(
        rotation.observe("m2", Ok(&a), SystemTime::now()),
        Some(Change::Restored {
            member: "m2".into()
        })
    );
    assert_eq!(
        rotation
            .choose(&members, Some("m2"), SystemTime::now())
            .unwrap(),
        "m2"
    );
    drop(on_m2);

    // An evacuated member is refused as a target, as Incus reports it,
    // and takes work again once restored.
    m1.incus(&["cluster", "evacuate", "m1", "--force", "--action", "stop"])
        .unwrap_or_else(|e| panic!("{e}"));
    let members = rt.block_on(provider.members()).unwrap().unwrap();
    assert!(!members[0].takes_work(), "{members:?}");
    let svc = corral[0].service(m1).unwrap();
    let refused = format!("cl-refused-{pid}");
    let err = rt
        .block_on(
            svc.create(
                &NewSandbox::new(&refused, TEST_IMAGE_ALIAS)
                    .on("allowlist")
                    .on_member("m1"),
                CreateOptions::default(),
            ),
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("evacuated") && err.contains("incus cluster restore m1"),
        "{err}"
    );
    assert!(
        rt.block_on(provider.open(&refused.parse().unwrap()))
            .is_err(),
        "a refused placement leaves no instance"
    );
    m1.incus(&["cluster", "restore", "m1", "--force"])
        .unwrap_or_else(|e| panic!("{e}"));
    let members = rt.block_on(provider.members()).unwrap().unwrap();
    assert!(members.iter().all(|m| m.takes_work()), "{members:?}");

    // m2's cluster link cut: Incus reports it offline, and no placement
    // goes there however fresh its attestation; link back: back in rotation.
    m1.incus(&["config", "set", "cluster.offline_threshold", "11"])
        .unwrap_or_else(|e| panic!("{e}"));
    let a = corral[1].attest("m2", &expected).unwrap();
    rotation.observe("m2", Ok(&a), SystemTime::now());
    lab.set_link("m2", false).unwrap();
    let cut = Instant::now();
    let members = wait_for(&rt, &provider, "m2", false);
    eprintln!(
        "m2 offline in Incus {} ms after its link was cut",
        cut.elapsed().as_millis()
    );
    // m1 keeps attesting every interval, as its corral would.
    let a = corral[0].attest("m1", &expected).unwrap();
    rotation.observe("m1", Ok(&a), SystemTime::now());
    let e = rotation
        .choose(&members, Some("m2"), SystemTime::now())
        .unwrap_err();
    assert!(e.contains("Incus reports it offline"), "{e}");
    assert_eq!(
        rotation.choose(&members, None, SystemTime::now()).unwrap(),
        "m1"
    );
    lab.set_link("m2", true).unwrap();
    let back = Instant::now();
    let members = wait_for(&rt, &provider, "m2", true);
    eprintln!(
        "m2 online again {} ms after its link came back",
        back.elapsed().as_millis()
    );
    let a = corral[1].attest("m2", &expected).unwrap();
    rotation.observe("m2", Ok(&a), SystemTime::now());
    assert_eq!(
        rotation
            .choose(&members, Some("m2"), SystemTime::now())
            .unwrap(),
        "m2"
    );
    drop(provider);
}

/// Poll the member list until `member` takes work (`online`) or not.
fn wait_for(
    rt: &tokio::runtime::Runtime,
    provider: &IncusProvider,
    member: &str,
    online: bool,
) -> Vec<ClusterMember> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let members = rt.block_on(provider.members()).unwrap().unwrap();
        if members
            .iter()
            .any(|m| m.name == member && m.takes_work() == online)
        {
            return members;
        }
        assert!(
            Instant::now() < deadline,
            "{member} never became online={online}: {members:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
