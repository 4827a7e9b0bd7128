use corral_sandbox_core::audit::{Blocked, NetRecord};

use super::*;

fn blocked(sandbox: &str, profile: &str, dport: u16) -> Entry {
    Entry::Net(NetRecord::Blocked(Blocked {
        sandbox: Some(sandbox.into()),
        profile: profile.into(),
        rule: format!("{profile}-out/unlisted"),
        src: "10.90.0.5".parse().unwrap(),
        dst: "192.0.2.1".parse().unwrap(),
        protocol: "tcp".into(),
        sport: Some(40000),
        dport: Some(dport),
        verdict: "drop".into(),
    }))
}

#[test]
fn lines_round_trip_with_both_halves_of_the_trail() {
    let tmp = tempfile::tempdir().unwrap();
    let log = AuditLog::open(tmp.path()).unwrap();
    log.append(Timestamp(1_000), blocked("a", "dev", 443))
        .unwrap();
    log.append(
        Timestamp(2_000),
        Entry::Sandbox(Event::Started { name: "a".into() }),
    )
    .unwrap();
    let text = std::fs::read_to_string(log.path()).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["event"], "blocked");
    assert_eq!(first["recorded"], 1000);
    assert_eq!(first["time"], "1970-01-01T00:00:01.000Z");
    let (lines, bad) = log.read(&AuditFilter::default()).unwrap();
    assert_eq!(bad, 0);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].entry, blocked("a", "dev", 443));
    assert_eq!(lines[1].entry.kind(), EntryKind::Lifecycle);
    assert_eq!(lines[1].time, "1970-01-01T00:00:02.000Z");
}

#[test]
fn filters_select_by_sandbox_profile_time_kind_and_last() {
    let tmp = tempfile::tempdir().unwrap();
    let log = AuditLog::open(tmp.path()).unwrap();
    for (i, (s, p)) in [("a", "dev"), ("b", "dev"), ("a", "web"), ("b", "web")]
        .into_iter()
        .enumerate()
    {
        log.append(Timestamp(i as u64 * 10), blocked(s, p, 80))
            .unwrap();
    }
    log.append(
        Timestamp(50),
        Entry::Sandbox(Event::Stopped { name: "a".into() }),
    )
    .unwrap();
    let read = |f: AuditFilter| {
        log.read(&f)
            .unwrap()
            .0
            .into_iter()
            .map(|l| l.recorded.0)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        read(AuditFilter {
            sandbox: Some("a".into()),
            ..Default::default()
        }),
        [0, 20, 50]
    );
    assert_eq!(
        read(AuditFilter {
            profile: Some("web".into()),
            ..Default::default()
        }),
        [20, 30]
    );
    assert_eq!(
        read(AuditFilter {
            since: Some(Timestamp(15)),
            ..Default::default()
        }),
        [20, 30, 50]
    );
    assert_eq!(
        read(AuditFilter {
            kinds: vec![EntryKind::Lifecycle],
            ..Default::default()
        }),
        [50]
    );
    assert_eq!(
        read(AuditFilter {
            last: Some(2),
            ..Default::default()
        }),
        [30, 50]
    );
}

#[test]
fn a_torn_line_is_skipped_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let log = AuditLog::open(tmp.path()).unwrap();
    log.append(Timestamp(1), blocked("a", "dev", 1)).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(log.path())
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"at\":2,\"event\":\"blo\n"))
        .unwrap();
    log.append(Timestamp(3), blocked("a", "dev", 3)).unwrap();
    let (lines, bad) = log.read(&AuditFilter::default()).unwrap();
    assert_eq!((lines.len(), bad), (2, 1));
}

#[test]
fn a_follower_sees_appends_across_a_rotation() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = StateDir::open(tmp.path()).unwrap().subdir(DIR).unwrap();
    // A tiny limit: every line rotates.
    let log = AuditLog {
        log: RotatingLog::new(dir, FILE, 10, 2).unwrap(),
    };
    log.append(Timestamp(1), blocked("a", "dev", 1)).unwrap();
    let mut f = log.follow();
    assert!(f.poll().is_empty());
    log.append(Timestamp(2), blocked("a", "dev", 2)).unwrap();
    log.append(Timestamp(3), blocked("a", "dev", 3)).unwrap();
    let seen: Vec<u64> = f.poll().into_iter().map(|l| l.recorded.0).collect();
    assert_eq!(seen, [2, 3]);
    log.append(Timestamp(4), blocked("a", "dev", 4)).unwrap();
    assert_eq!(
        f.poll()
            .into_iter()
            .map(|l| l.recorded.0)
            .collect::<Vec<_>>(),
        [4]
    );
}

#[test]
fn no_audit_directory_means_nothing_to_read() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(AuditLog::open_existing(tmp.path()).unwrap().is_none());
}
