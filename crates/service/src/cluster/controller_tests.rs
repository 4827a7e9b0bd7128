use std::sync::Mutex;

use corral_sandbox_core::verify::{ManualClock, Timestamp};

use super::*;
use crate::cluster::Attestation;
use crate::store::EventQuery;

/// Members as a test sets them.
struct Listed(Mutex<Result<Option<Vec<ClusterMember>>, String>>);

#[async_trait]
impl MemberList for Listed {
    async fn members(&self) -> Result<Option<Vec<ClusterMember>>, String> {
        self.0.lock().unwrap().clone()
    }
}

/// Per member: drift (fails), passes, or hangs.
#[derive(Default)]
struct Fake(Mutex<BTreeMap<String, &'static str>>);

#[async_trait]
impl Attester for Fake {
    async fn attest(&self, member: &str) -> Result<Attestation, String> {
        let how = self
            .0
            .lock()
            .unwrap()
            .get(member)
            .copied()
            .unwrap_or("pass");
        if how == "hang" {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        Ok(Attestation {
            member: member.to_owned(),
            taken_at: SystemTime::now(),
            config_matches: true,
            drift: if how == "drift" {
                vec!["table inet corral is missing".into()]
            } else {
                Vec::new()
            },
            gateways_down: Vec::new(),
        })
    }
}

/// Records which members it was called for.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

#[async_trait]
impl OnDrain for Seen {
    async fn drained(&self, member: &str) -> Vec<Reverified> {
        self.0.lock().unwrap().push(member.to_owned());
        Vec::new()
    }
}

fn member(name: &str, status: &str) -> ClusterMember {
    ClusterMember {
        name: name.into(),
        url: String::new(),
        status: status.into(),
        message: String::new(),
        roles: Vec::new(),
    }
}

const T0: SystemTime = SystemTime::UNIX_EPOCH;

fn at(secs: u64) -> SystemTime {
    T0 + Duration::from_secs(secs)
}

struct Rig {
    listed: Arc<Listed>,
    fake: Arc<Fake>,
    seen: Arc<Seen>,
    store: Arc<Store>,
    dir: tempfile::TempDir,
}

fn rig() -> (Rig, Controller) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(dir.path()).unwrap());
    let listed = Arc::new(Listed(Mutex::new(Ok(Some(vec![
        member("m1", "Online"),
        member("m2", "Online"),
    ])))));
    let fake = Arc::new(Fake::default());
    let seen = Arc::new(Seen::default());
    let c = Controller::new(
        Duration::from_secs(10),
        Arc::clone(&listed) as _,
        Arc::clone(&fake) as _,
        Arc::clone(&store),
        Arc::new(ManualClock::new(Timestamp(0))),
        dir.path().to_owned(),
    )
    .with_on_drain(Arc::clone(&seen) as _)
    .with_timeout(Duration::from_millis(200));
    (
        Rig {
            listed,
            fake,
            seen,
            store,
            dir,
        },
        c,
    )
}

fn kinds(store: &Store) -> Vec<String> {
    store
        .events(&EventQuery::default())
        .unwrap()
        .iter()
        .map(|e| format!("{}:{}", e.event.type_name(), e.event.member().unwrap_or("")))
        .collect()
}

#[tokio::test]
async fn drift_drains_once_records_it_reverifies_and_a_pass_restores() {
    let (rig, mut c) = rig();
    let t = c.tick(at(0)).await.unwrap();
    assert_eq!(t.changes.len(), 2, "{:?}", t.changes);
    assert_eq!(
        kinds(&rig.store),
        ["member_restored:m1", "member_restored:m2"]
    );

    rig.fake.0.lock().unwrap().insert("m2".into(), "drift");
    let t = c.tick(at(5)).await.unwrap();
    assert!(
        matches!(&t.changes[..], [Change::Drained { member, reason }] if member == "m2" && reason.contains("table inet corral is missing")),
        "{:?}",
        t.changes
    );
    assert_eq!(t.reverifying, ["m2"]);
    assert!(c.reverified().await.is_empty());
    assert_eq!(*rig.seen.0.lock().unwrap(), ["m2"]);
    // Still failing: no second event, no second re-verification.
    let t = c.tick(at(10)).await.unwrap();
    assert!(t.changes.is_empty() && t.reverifying.is_empty(), "{t:?}");
    c.reverified().await;
    assert_eq!(rig.seen.0.lock().unwrap().len(), 1);

    // What another process reads: m2 drained with its reason, m1 placeable.
    let file = RotationFile::load(rig.dir.path()).unwrap().unwrap();
    assert_eq!(file, t.written);
    let m2 = file.members.iter().find(|m| m.member == "m2").unwrap();
    assert_eq!(m2.standing, StandingName::Drained);
    assert_eq!(m2.since, timestamp(at(5)));
    assert_eq!(m2.attested_at, Some(timestamp(at(0))));
    assert!(m2.reason.as_deref().unwrap().contains("missing"), "{m2:?}");
    let ms = [member("m1", "Online"), member("m2", "Online")];
    assert_eq!(file.rotation().choose(&ms, None, at(11)).unwrap(), "m1");

    rig.fake.0.lock().unwrap().remove("m2");
    let t = c.tick(at(15)).await.unwrap();
    assert_eq!(
        t.changes,
        [Change::Restored {
            member: "m2".into()
        }]
    );
    let m2 = t.written.members.iter().find(|m| m.member == "m2").unwrap();
    assert_eq!(m2.standing, StandingName::InRotation);
    assert!(m2.last_failure.as_deref().unwrap().contains("missing"));
    assert_eq!(
        kinds(&rig.store),
        [
            "member_restored:m1",
            "member_restored:m2",
            "member_drained:m2",
            "member_restored:m2"
        ]
    );
    // The drain is an alert and reaches the audit trail.
    let events = rig.store.events(&EventQuery::default()).unwrap();
    assert!(events[2].alert);
    let (trail, _) = rig
        .store
        .audit()
        .read(&crate::audit::AuditFilter::default())
        .unwrap();
    assert_eq!(trail.len(), 4);
}

#[tokio::test]
async fn a_member_that_hangs_is_drained_within_the_timeout_and_others_are_not_held_up() {
    let (rig, mut c) = rig();
    c.tick(at(0)).await.unwrap();
    rig.fake.0.lock().unwrap().insert("m1".into(), "hang");
    let started = std::time::Instant::now();
    let t = c.tick(at(5)).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(&t.changes[..], [Change::Drained { member, reason }] if member == "m1" && reason.contains("no answer within 200 ms")),
        "{:?}",
        t.changes
    );
    let ms = [member("m1", "Online"), member("m2", "Online")];
    assert_eq!(c.rotation().choose(&ms, None, at(5)).unwrap(), "m2");
}

#[tokio::test]
async fn offline_members_are_not_asked_and_age_out_and_a_lost_member_list_asks_the_last_listed() {
    let (rig, mut c) = rig();
    c.tick(at(0)).await.unwrap();
    *rig.listed.0.lock().unwrap() = Ok(Some(vec![member("m1", "Online"), member("m2", "Offline")]));
    rig.fake.0.lock().unwrap().insert("m2".into(), "hang");
    let t = c.tick(at(5)).await.unwrap();
    assert!(
        t.changes.is_empty(),
        "not asked, not yet stale: {:?}",
        t.changes
    );
    let t = c.tick(at(11)).await.unwrap();
    assert!(
        matches!(&t.changes[..], [Change::Drained { member, reason }] if member == "m2" && reason.contains("no attestation for 11 s")),
        "{:?}",
        t.changes
    );
    let m2 = t.written.members.iter().find(|m| m.member == "m2").unwrap();
    assert_eq!(m2.incus_status, "Offline");

    // Incus does not list them: the members it listed last are asked
    // (m1 online: attested, stays in rotation; m2 offline: not asked).
    *rig.listed.0.lock().unwrap() = Err("connection refused".into());
    let t = c.tick(at(30)).await.unwrap();
    assert!(
        t.list_error
            .as_deref()
            .unwrap()
            .contains("connection refused")
    );
    assert!(t.changes.is_empty(), "{:?}", t.changes);
    let file = RotationFile::load(rig.dir.path()).unwrap().unwrap();
    let standing = |m: &str| {
        file.members
            .iter()
            .find(|r| r.member == m)
            .unwrap()
            .standing
    };
    assert_eq!(standing("m1"), StandingName::InRotation);
    assert_eq!(standing("m2"), StandingName::Drained);

    *rig.listed.0.lock().unwrap() = Ok(None);
    assert!(matches!(c.tick(at(31)).await, Err(TickError::NotClustered)));
}

#[tokio::test]
async fn without_any_member_list_nothing_is_asked_and_the_rotation_only_ages() {
    let (rig, mut c) = rig();
    *rig.listed.0.lock().unwrap() = Err("connection refused".into());
    let e = c.tick(at(0)).await.unwrap_err().to_string();
    assert!(e.contains("connection refused"), "{e}");
    let file = RotationFile::load(rig.dir.path()).unwrap().unwrap();
    assert!(file.members.is_empty(), "{file:?}");
}

#[tokio::test]
async fn a_restarted_controller_keeps_a_drain_until_an_attestation_passes() {
    let (rig, mut c) = rig();
    rig.fake.0.lock().unwrap().insert("m2".into(), "drift");
    c.tick(at(0)).await.unwrap();
    drop(c);
    let mut again = Controller::new(
        Duration::from_secs(10),
        Arc::clone(&rig.listed) as _,
        Arc::clone(&rig.fake) as _,
        Arc::clone(&rig.store),
        Arc::new(ManualClock::new(Timestamp(0))),
        rig.dir.path().to_owned(),
    );
    let t = again.tick(at(1)).await.unwrap();
    assert!(t.changes.is_empty(), "{:?}", t.changes);
    let m2 = t.written.members.iter().find(|m| m.member == "m2").unwrap();
    assert_eq!(m2.since, timestamp(at(0)));
}
