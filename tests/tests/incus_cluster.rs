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
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use corral_egress::netns::Netns;
use corral_provider_incus::{
    ClusterMember, Endpoint, IncusConfig, IncusProvider, TEST_IMAGE_ALIAS,
};
use corral_sandbox_core::sandbox::{SandboxProvider, SandboxState};
use corral_service::cluster::persisted::StandingName;
use corral_service::cluster::{Controller, MemberList, Reverifier, RotationFile, place};
use corral_service::reports::cluster_report;
use corral_service::sandboxes::NewSandbox;
use corral_service::store::{EventQuery, StoredEvent};
use corral_service::{
    CreateOptions, Event, SandboxService, ServiceError, Store, Verifier, WallClock,
};
use corral_tests::cluster::{ALLOWED, ClusterLab, LabAttester, UNLISTED};
use corral_tests::incus::tcp_probe;

fn reached_from_ns(ns: &str, to: SocketAddr) -> bool {
    Netns::open(ns)
        .unwrap()
        .run(|| TcpStream::connect_timeout(&to, Duration::from_secs(3)).is_ok())
        .unwrap()
}

/// How long an attestation holds; the controllers tick this often.
const INTERVAL: Duration = Duration::from_secs(5);

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
    // Declared after the lab: torn down before the members go.
    let enforced = lab
        .enforce_builtin(dir.path())
        .unwrap_or_else(|e| panic!("{e}"));
    let (states, corral) = (&enforced.states, &enforced.corral);

    // Every member's corrald runs the controller over its own state
    // directory, asking every member (in-process here; over mTLS for real).
    let expected = corral_sandbox_core::Config::builtin_default();
    let attester = Arc::new(LabAttester::new(
        &[(m1, &corral[0]), (m2, &corral[1])],
        expected.clone(),
    ));
    let svc: Vec<SandboxService> = [(m1, &corral[0]), (m2, &corral[1])]
        .iter()
        .map(|(m, c)| c.service(m).unwrap())
        .collect();
    let store = Arc::new(Store::open(&states[0]).unwrap());
    // m1's controller re-verifies a drained member's sandboxes; the canary
    // of a sandbox on m2 runs from m2's side (m2's namespace, m2's settings).
    let m2_verifier = Verifier::new(
        Arc::new(corral[1].settings(m2).unwrap()),
        Arc::clone(&store),
        Arc::new(WallClock),
    );
    let m1_verifier = Verifier::new(
        Arc::new(corral[0].settings(m1).unwrap()),
        Arc::clone(&store),
        Arc::new(WallClock),
    );
    let reverifier =
        Reverifier::new(svc[0].clone(), m1_verifier).with_member("m2", m2_verifier.clone());
    let mut loops = Vec::new();
    for (i, c) in corral.iter().enumerate() {
        let members: Arc<dyn MemberList> = Arc::new(
            rt.block_on(IncusProvider::connect(IncusConfig {
                endpoint: Endpoint::Unix(lab.members[i].socket()),
                ..IncusConfig::local()
            }))
            .unwrap(),
        );
        let own_store = if i == 0 {
            Arc::clone(&store)
        } else {
            Arc::new(Store::open(c.state_dir()).unwrap())
        };
        let mut controller = Controller::new(
            INTERVAL,
            members,
            Arc::clone(&attester) as _,
            own_store,
            Arc::new(WallClock),
            c.state_dir().to_owned(),
        );
        if i == 0 {
            controller = controller.with_on_drain(Arc::new(reverifier.clone()));
        }
        loops.push(rt.spawn(controller.run()));
    }
    for s in states {
        wait_standing(s, "m1", StandingName::InRotation);
        wait_standing(s, "m2", StandingName::InRotation);
    }

    // Control before any sandbox: m2 itself reaches both destinations, so
    // a blocked probe below is corral's doing, not the lab's routing.
    assert!(reached_from_ns(&m2.netns, ALLOWED));
    assert!(reached_from_ns(&m2.netns, UNLISTED));

    let pid = std::process::id();
    let mut placed = Vec::new();
    for (i, m) in [m1, m2].iter().enumerate() {
        let name = format!("cl-{}-{pid}", m.name);
        let started = Instant::now();
        let created = rt
            .block_on(
                svc[i].create(
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
    // Control for the drain's re-verification: with m2's rules in place
    // the same canary passes, so its failure below is the deleted table.
    let report = rt.block_on(m2_verifier.verify(on_m2.as_ref())).unwrap();
    assert!(report.passed, "{}", report.event.message);

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

    // Rules deleted behind corral's back: m1's controller drains m2 at its
    // next tick and records it; m2's sandbox, whose canary now gets
    // through, is stopped.
    let drained = wait_event(&store, "member_drained", "m2", 0);
    let drained_after = deleted.elapsed();
    eprintln!(
        "m2 drained {} ms after its table was deleted (interval {} ms): {:?}",
        drained_after.as_millis(),
        INTERVAL.as_millis(),
        drained.event
    );
    assert!(
        drained_after <= INTERVAL + Duration::from_secs(1),
        "drained after {drained_after:?}"
    );
    assert!(
        matches!(&drained.event, Event::MemberDrained { reason, .. } if reason.contains("table inet corral")),
        "{drained:?}"
    );
    wait_event(&store, "stopped", &placed[1], drained.id);
    eprintln!(
        "m2's sandbox stopped {} ms after the deletion",
        deleted.elapsed().as_millis()
    );
    let state = rt.block_on(on_m2.info()).unwrap().state;
    assert_eq!(state, SandboxState::Stopped, "Incus must report it stopped");
    let alert = wait_event(&store, "alert", &placed[1], drained.id);
    eprintln!("alert: {:?}", alert.event);
    wait_standing(&states[0], "m2", StandingName::Drained);
    wait_standing(&states[1], "m2", StandingName::Drained);

    // Placement: no target lands on m1; m2 as a target is refused, and
    // nothing is created there.
    let extra = format!("cl-extra-{pid}");
    let created = rt
        .block_on(svc[0].create(
            &NewSandbox::new(&extra, TEST_IMAGE_ALIAS).on("allowlist"),
            CreateOptions::default(),
        ))
        .unwrap_or_else(|e| panic!("create without a target: {e}"));
    assert_eq!(created.info.location.as_deref(), Some("m1"));
    let refused = format!("cl-refused-{pid}");
    let e = rt
        .block_on(
            svc[1].create(
                &NewSandbox::new(&refused, TEST_IMAGE_ALIAS)
                    .on("allowlist")
                    .on_member("m2"),
                CreateOptions::default(),
            ),
        )
        .unwrap_err();
    assert!(matches!(e, ServiceError::Placement(_)), "{e:?}");
    let e = e.to_string();
    assert!(
        e.contains("m2: drained: attestation failed") && e.contains("table inet corral"),
        "{e}"
    );
    assert!(
        rt.block_on(provider.open(&refused.parse().unwrap()))
            .is_err(),
        "a refused placement leaves no instance"
    );

    // Status, as `corral cluster status --json` and GET /v1/cluster show it.
    let status = rt.block_on(cluster_report(&svc[0])).unwrap();
    let json = serde_json::to_value(&status).unwrap();
    eprintln!("{}", serde_json::to_string_pretty(&json).unwrap());
    assert_eq!(json["schema"], "corral.cluster.v1");
    assert_eq!(json["controller"]["current"], true);
    let row = |name: &str| {
        json["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["member"] == name)
            .unwrap()
            .clone()
    };
    let (r1, r2) = (row("m1"), row("m2"));
    assert_eq!(r1["standing"], "in_rotation");
    assert_eq!(r1["placeable"], true);
    assert_eq!(r1["sandboxes"], 2);
    assert_eq!(r2["standing"], "drained");
    assert_eq!(r2["placeable"], false);
    assert!(
        r2["reason"].as_str().unwrap().contains("table inet corral"),
        "{r2}"
    );
    assert!(
        r2["since"].is_u64() && r2["attestation_age_secs"].is_u64(),
        "{r2}"
    );
    assert_eq!(
        (r2["sandboxes"].clone(), r2["running"].clone()),
        (1.into(), 0.into())
    );

    // Repaired: enforcement back, the next attestation passes, m2 back in
    // rotation (recorded), and placeable again.
    corral[1].reapply().unwrap();
    let repaired = Instant::now();
    wait_event(&store, "member_restored", "m2", drained.id);
    eprintln!(
        "m2 restored {} ms after re-apply",
        repaired.elapsed().as_millis()
    );
    wait_standing(&states[1], "m2", StandingName::InRotation);
    let members = rt.block_on(provider.members()).unwrap().unwrap();
    assert_eq!(
        place(&states[1], &members, Some("m2"), SystemTime::now()).unwrap(),
        "m2"
    );
    rt.block_on(on_m2.start()).unwrap();
    let p = probe(UNLISTED);
    assert!(
        !p.reached,
        "re-applied: {UNLISTED} must be blocked again: {}",
        p.detail
    );
    let status = rt.block_on(cluster_report(&svc[0])).unwrap();
    let m2_row = status.members.iter().find(|m| m.member == "m2").unwrap();
    assert!(
        m2_row.placeable && m2_row.standing == "in_rotation",
        "{m2_row:?}"
    );
    assert!(
        m2_row
            .last_failure
            .as_deref()
            .is_some_and(|f| f.contains("table inet corral")),
        "{m2_row:?}"
    );
    drop(on_m2);

    // An evacuated member is refused as a target, with the restore hint,
    // and takes work again once restored.
    m1.incus(&["cluster", "evacuate", "m1", "--force", "--action", "stop"])
        .unwrap_or_else(|e| panic!("{e}"));
    let members = rt.block_on(provider.members()).unwrap().unwrap();
    assert!(!members[0].takes_work(), "{members:?}");
    let refused = format!("cl-refused2-{pid}");
    let err = rt
        .block_on(
            svc[0].create(
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
    // The lower threshold can report a member whose last heartbeat is
    // older offline until its next one: start from both online.
    wait_members(&rt, &provider, "both online", |ms| {
        ms.iter().all(ClusterMember::takes_work)
    });
    lab.set_link("m2", false).unwrap();
    let cut = Instant::now();
    wait_for(&rt, &provider, "m2", false);
    eprintln!(
        "m2 offline in Incus {} ms after its link was cut",
        cut.elapsed().as_millis()
    );
    // While Incus reports m2 offline it is refused whatever its
    // attestation, and m1 (online, attested) takes the work.
    let deadline = Instant::now() + 6 * INTERVAL;
    loop {
        let members = rt.block_on(provider.members()).unwrap().unwrap();
        let online = |n: &str| members.iter().any(|m| m.name == n && m.takes_work());
        if !online("m2") {
            let e = place(&states[0], &members, Some("m2"), SystemTime::now())
                .unwrap_err()
                .to_string();
            assert!(e.contains("m2: Incus reports it"), "{e}");
        }
        let chosen = place(&states[0], &members, None, SystemTime::now());
        if !online("m2") && chosen.as_deref().is_ok_and(|m| m == "m1") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "m1 never took the work while m2 was cut off: {chosen:?}, {members:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    lab.set_link("m2", true).unwrap();
    let back = Instant::now();
    let members = wait_for(&rt, &provider, "m2", true);
    eprintln!(
        "m2 online again {} ms after its link came back",
        back.elapsed().as_millis()
    );
    let deadline = Instant::now() + 3 * INTERVAL;
    while place(&states[0], &members, Some("m2"), SystemTime::now()).is_err() {
        assert!(Instant::now() < deadline, "m2 never came back in rotation");
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "m2 back in rotation {} ms after its link came back",
        back.elapsed().as_millis()
    );
    for l in loops {
        l.abort();
    }
    drop(provider);
}

/// Wait (at most three intervals) until the standings under `state` say
/// `member` stands so.
fn wait_standing(state: &std::path::Path, member: &str, standing: StandingName) {
    let deadline = Instant::now() + 3 * INTERVAL;
    loop {
        let file = RotationFile::load(state).unwrap();
        if file.as_ref().is_some_and(|f| {
            f.members
                .iter()
                .any(|m| m.member == member && m.standing == standing)
        }) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{member} never became {standing:?} under {}: {file:?}",
            state.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait (at most three intervals) for the first event of `kind` about
/// `about` (a sandbox or a member) after event `after`.
fn wait_event(store: &Store, kind: &str, about: &str, after: i64) -> StoredEvent {
    let deadline = Instant::now() + 3 * INTERVAL;
    loop {
        let events = store.events(&EventQuery::default()).unwrap();
        if let Some(e) = events.into_iter().find(|e| {
            e.event.type_name() == kind
                && (e.event.sandbox() == Some(about) || e.event.member() == Some(about))
                && e.id > after
        }) {
            return e;
        }
        assert!(
            Instant::now() < deadline,
            "no {kind} event about {about} in time"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Poll the member list until `member` takes work (`online`) or not.
fn wait_for(
    rt: &tokio::runtime::Runtime,
    provider: &IncusProvider,
    member: &str,
    online: bool,
) -> Vec<ClusterMember> {
    wait_members(rt, provider, &format!("{member} online={online}"), |ms| {
        ms.iter()
            .any(|m| m.name == member && m.takes_work() == online)
    })
}

/// Poll the member list (at most 90 s) until `done` holds for it.
fn wait_members(
    rt: &tokio::runtime::Runtime,
    provider: &IncusProvider,
    what: &str,
    done: impl Fn(&[ClusterMember]) -> bool,
) -> Vec<ClusterMember> {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let members = rt.block_on(provider.members()).unwrap().unwrap();
        if done(&members) {
            return members;
        }
        assert!(Instant::now() < deadline, "never {what}: {members:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}
