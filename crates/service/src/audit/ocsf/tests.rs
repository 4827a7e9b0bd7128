use corral_sandbox_core::audit::{AccessRecord, Blocked, DnsDecision, NetRecord};
use corral_sandbox_core::names::{ProfileName, SandboxName};
use corral_sandbox_core::platform::SandboxKind;
use corral_sandbox_core::verify::{
    CheckKind, CheckRecord, EventOutcome, Expectation, FilterHealth, Observed, Timestamp,
    VerificationEvent,
};

use super::*;

fn line(entry: Entry) -> AuditLine {
    AuditLine::new(Timestamp(1_764_633_600_123), entry)
}

fn verification(outcome: EventOutcome) -> Event {
    Event::Verification(Box::new(VerificationEvent {
        sandbox: SandboxName::new("box1").unwrap(),
        kind: SandboxKind::Incus,
        profile: Some(ProfileName::new("allowlist").unwrap()),
        at: Timestamp(1_764_633_600_000),
        outcome,
        checks: vec![CheckRecord {
            kind: CheckKind::CanaryBlocked,
            target: "tcp 198.51.100.10:443".into(),
            expect: Expectation::Fails,
            observed: Some(Observed::TimedOut),
            elapsed_ms: 120,
            bound_ms: 250,
            passed: true,
            output: "blocked".into(),
            control: None,
        }],
        not_planned: Vec::new(),
        filter_health: Some(FilterHealth::Alive),
        demoted_until: None,
        message: "all 1 checks passed".into(),
    }))
}

/// One record of every kind the trail holds.
pub(crate) fn every_record() -> Vec<AuditLine> {
    let blocked = Blocked {
        sandbox: Some("box1".into()),
        profile: "allowlist".into(),
        rule: "allowlist-out/unlisted".into(),
        src: "10.231.3.10".parse().unwrap(),
        dst: "198.51.100.10".parse().unwrap(),
        protocol: "tcp".into(),
        sport: Some(40_000),
        dport: Some(443),
        verdict: "drop".into(),
    };
    let forged = Blocked {
        sandbox: None,
        src: "fd00:c0a1:3::99".parse().unwrap(),
        dst: "2001:db8::1".parse().unwrap(),
        protocol: "icmpv6".into(),
        sport: None,
        dport: None,
        rule: "allowlist-guard/foreign-source".into(),
        ..blocked.clone()
    };
    let answered = DnsDecision {
        sandbox: Some("box1".into()),
        profile: "allowlist".into(),
        src: "10.231.3.10".parse().unwrap(),
        name: "pypi.org".into(),
        qtype: "A".into(),
        addresses: vec!["203.0.113.10".parse().unwrap()],
        omitted: 0,
    };
    let refused = DnsDecision {
        name: "exfil.example".into(),
        addresses: Vec::new(),
        ..answered.clone()
    };
    let n = |r: NetRecord| line(Entry::Net(r));
    let s = |e: Event| line(Entry::Sandbox(e));
    let name = || "box1".to_owned();
    vec![
        n(NetRecord::Blocked(blocked)),
        n(NetRecord::Blocked(forged)),
        n(NetRecord::Suppressed {
            profile: "allowlist".into(),
            packets: 12,
        }),
        n(NetRecord::DnsAnswered(answered)),
        n(NetRecord::DnsRefused(refused)),
        n(NetRecord::DnsSuppressed {
            profile: "allowlist".into(),
            src: "10.231.3.10".parse().unwrap(),
            decisions: 40,
        }),
        n(NetRecord::LearnRefused {
            profile: "allowlist".into(),
            set: "allowlist-learned4-tcp-443".into(),
            addresses: 3,
        }),
        line(Entry::Access(AccessRecord::Granted {
            user: "ada".into(),
            uid: 1001,
            project: "corral-ada".into(),
        })),
        line(Entry::Access(AccessRecord::Revoked {
            user: "ada".into(),
            uid: 1001,
            purged: true,
            deleted: vec!["box9".into()],
        })),
        s(Event::Created {
            name: name(),
            kind: Some(SandboxKind::Incus),
            profile: Some("allowlist".into()),
            owner: Some(1001),
            template: Some("debian".into()),
            from: None,
            ttl_secs: None,
            idle_stop_secs: None,
        }),
        s(Event::Starting { name: name() }),
        s(Event::Started { name: name() }),
        s(Event::Refused {
            name: name(),
            reason: "the start gate refused: drift".into(),
        }),
        s(Event::Stopped { name: name() }),
        s(Event::Snapshotted {
            name: name(),
            snapshot: "s1".into(),
        }),
        s(Event::Restored {
            name: name(),
            snapshot: "s1".into(),
        }),
        s(Event::Renamed {
            name: "box2".into(),
            from: name(),
        }),
        s(Event::Exported {
            name: name(),
            file: "/tmp/box1.tar.gz".into(),
            bytes: 1024,
        }),
        s(Event::FilePushed {
            name: name(),
            path: "/root/a".into(),
            bytes: 3,
        }),
        s(Event::FilePulled {
            name: name(),
            path: "/root/a".into(),
            bytes: 3,
        }),
        s(Event::Shell { name: name() }),
        s(Event::Hatch {
            name: name(),
            args: vec!["config".into(), "show".into()],
            moved: Vec::new(),
        }),
        s(Event::IdleStopped {
            name: name(),
            idle_stop_secs: 1800,
            idle_secs: 1802,
        }),
        s(Event::Expired {
            name: name(),
            ttl_secs: 7200,
        }),
        s(Event::Deleted { name: name() }),
        s(verification(EventOutcome::Passed)),
        s(verification(EventOutcome::Failed)),
        s(verification(EventOutcome::Refused)),
        s(Event::Alert {
            name: name(),
            reason: "canary reached 198.51.100.10: disposed".into(),
        }),
        s(Event::MemberDrained {
            member: "m2".into(),
            reason: "no attestation in time".into(),
        }),
        s(Event::MemberRestored {
            member: "m2".into(),
        }),
        s(Event::GatewayDied {
            bridge: "crl-allowlist".into(),
            profile: Some("allowlist".into()),
            pid: 4242,
            reason: "exited with signal 9".into(),
        }),
        s(Event::GatewayRestarted {
            bridge: "crl-allowlist".into(),
            profile: Some("allowlist".into()),
            pid: 4343,
            attempts: 1,
            down_ms: 35,
        }),
        s(Event::UnmanagedStart {
            name: name(),
            admitted: false,
            reason: "no verdict: stopped".into(),
        }),
        s(Event::HostDrift {
            profiles: vec!["allowlist".into()],
            drift: vec!["chain allowlist-out: rule deleted".into()],
            reaction: "healed".into(),
            ms: 40,
        }),
    ]
}

#[test]
fn every_record_maps_to_its_class_with_a_consistent_type() {
    for l in every_record() {
        let e = event(&l);
        let class = e["class_uid"].as_u64().unwrap();
        let activity = e["activity_id"].as_u64().unwrap();
        assert_eq!(
            e["type_uid"].as_u64().unwrap(),
            class * 100 + activity,
            "{e}"
        );
        assert_eq!(e["time"], 1_764_633_600_123u64, "{e}");
        assert_eq!(e["metadata"]["version"], VERSION);
        let expected = match l.entry.kind() {
            crate::audit::EntryKind::Blocked => 4001,
            crate::audit::EntryKind::Dns => 4003,
            crate::audit::EntryKind::Access => 3005,
            crate::audit::EntryKind::Verification => 2003,
            crate::audit::EntryKind::Lifecycle => 6002,
        };
        assert_eq!(class, expected, "{e}");
        // Nothing of corral's own record is lost.
        let back: Entry = serde_json::from_value(e["unmapped"]["corral"].clone()).unwrap();
        assert_eq!(back, l.entry);
        assert!(!e["message"].as_str().unwrap().is_empty());
    }
}

#[test]
fn a_blocked_packet_names_its_rule_endpoints_and_decision() {
    let e = event(&every_record()[0]);
    assert_eq!(e["activity_name"], "Refuse");
    assert_eq!(e["action_id"], 2);
    assert_eq!(e["disposition_id"], 2);
    assert_eq!(e["firewall_rule"]["uid"], "allowlist-out/unlisted");
    assert_eq!(e["src_endpoint"]["name"], "box1");
    assert_eq!(e["src_endpoint"]["ip"], "10.231.3.10");
    assert_eq!(e["dst_endpoint"]["port"], 443);
    assert_eq!(e["connection_info"]["protocol_num"], 6);
    assert_eq!(e["metadata"]["profiles"], json!(["security_control"]));
    assert_eq!(e["metadata"]["labels"], json!(["corral.profile=allowlist"]));
}

#[test]
fn dns_answers_and_refusals_carry_the_query_and_the_verdict() {
    let r = every_record();
    let ok = event(&r[3]);
    assert_eq!(ok["query"]["hostname"], "pypi.org");
    assert_eq!(ok["answers"][0]["rdata"], "203.0.113.10");
    assert_eq!(ok["rcode_id"], 0);
    assert_eq!(ok["disposition_id"], 1);
    let no = event(&r[4]);
    assert_eq!(no["rcode"], "NXDomain");
    assert_eq!(no["disposition_id"], 2);
    assert!(no.get("answers").is_none());
}

#[test]
fn a_failed_check_is_a_failing_finding_with_severity() {
    let r = every_record();
    let pass = r
        .iter()
        .map(event)
        .find(|e| e["class_uid"] == 2003 && e["compliance"]["status_id"] == 1)
        .unwrap();
    assert_eq!(pass["severity_id"], 1);
    let fail = event(&line(Entry::Sandbox(verification(EventOutcome::Failed))));
    assert_eq!(fail["compliance"]["status"], "Fail");
    assert_eq!(fail["severity_id"], 3);
    assert_eq!(fail["resources"][0]["name"], "box1");
}

/// Against the OCSF schema itself (its released JSON Schema for each
/// class and profile): every record of every kind, and a control that the
/// checker does refuse an event that breaks the schema.
#[test]
fn every_record_validates_against_the_ocsf_schema() {
    let Some(checker) = corral_test_support::ocsf::checker() else {
        return;
    };
    let lines: String = every_record()
        .iter()
        .map(|l| format!("{}\n", event(l)))
        .collect();
    let v = checker.check(&lines).unwrap();
    assert!(v.valid, "{}", v.report);
    assert!(
        v.report
            .contains(&format!("{} event(s), 0 invalid", every_record().len())),
        "{}",
        v.report
    );
    // The control: the same events with one field of the wrong type (an
    // activity OCSF's Network Activity does not define) are refused.
    let mut broken = event(&every_record()[0]);
    broken["activity_id"] = json!(42);
    broken["type_uid"] = json!(400_142);
    let v = checker.check(&format!("{broken}\n")).unwrap();
    assert!(!v.valid, "{}", v.report);
    assert!(v.report.contains("activity_id"), "{}", v.report);
}
