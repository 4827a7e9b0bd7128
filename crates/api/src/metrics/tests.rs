use std::net::{IpAddr, Ipv4Addr};

use corral_egress::drift::{Drift, DriftKind, DriftObject};
use corral_egress::host::HostDrift;
use corral_egress::plan::TableFamily;
use corral_sandbox_core::audit::{Blocked, DnsDecision, NetRecord};
use corral_sandbox_core::verify::{
    CheckKind, CheckRecord, EventOutcome, Expectation, Observed, Timestamp, VerificationEvent,
};
use corral_sandbox_core::{ProfileName, SandboxKind, SandboxName};
use corral_service::audit::{AuditLine, AuditLog, Entry};
use corral_service::hooks::Event;

use super::families::VerdictCounterLabels;
use super::{Metrics, area};

const SECRET: &str = "secret-agent-box";
const SRC: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 231, 3, 2));

fn line(entry: Entry) -> AuditLine {
    AuditLine::new(Timestamp(1_796_121_852_260), entry)
}

fn blocked(rule: &str) -> Entry {
    Entry::Net(NetRecord::Blocked(Blocked {
        sandbox: Some(SECRET.to_owned()),
        profile: "dev".to_owned(),
        rule: rule.to_owned(),
        src: SRC,
        dst: IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
        protocol: "tcp".to_owned(),
        sport: Some(40000),
        dport: Some(443),
        verdict: "drop".to_owned(),
    }))
}

fn dns(refused: bool) -> Entry {
    let d = DnsDecision {
        sandbox: Some(SECRET.to_owned()),
        profile: "dev".to_owned(),
        src: SRC,
        name: "secret-name.example".to_owned(),
        qtype: "A".to_owned(),
        addresses: Vec::new(),
        omitted: 0,
    };
    Entry::Net(if refused {
        NetRecord::DnsRefused(d)
    } else {
        NetRecord::DnsAnswered(d)
    })
}

fn check(elapsed_ms: u64) -> CheckRecord {
    CheckRecord {
        kind: CheckKind::CanaryBlocked,
        target: "198.51.100.7:443".to_owned(),
        expect: Expectation::Fails,
        observed: Some(Observed::TimedOut),
        elapsed_ms,
        bound_ms: 2000,
        passed: true,
        output: String::new(),
        control: None,
    }
}

fn verification(outcome: EventOutcome, checks: Vec<CheckRecord>) -> Entry {
    Entry::Sandbox(Event::Verification(Box::new(VerificationEvent {
        sandbox: SandboxName::new(SECRET).unwrap(),
        kind: SandboxKind::Incus,
        profile: Some(ProfileName::new("dev").unwrap()),
        at: Timestamp(1_796_121_852_260),
        outcome,
        checks,
        not_planned: Vec::new(),
        filter_health: None,
        demoted_until: None,
        message: String::new(),
    })))
}

async fn text(m: &Metrics) -> String {
    m.encode().await.unwrap()
}

fn has(text: &str, want: &str) -> bool {
    text.lines().any(|l| l == want)
}

#[tokio::test]
async fn each_trail_record_lands_in_its_family() {
    let m = Metrics::default();
    let f = m.families();
    let before = text(&m).await;
    // Control: no record, no blocked series, no canary observation.
    assert!(
        !before.contains("corral_blocked_packets_total{"),
        "{before}"
    );
    assert!(
        has(&before, "corral_canary_duration_seconds_count 0"),
        "{before}"
    );

    for e in [
        blocked("dev-out/unlisted"),
        blocked("dev-out/unlisted"),
        blocked("dev-out/reserved"),
        Entry::Net(NetRecord::Suppressed {
            profile: "dev".to_owned(),
            packets: 40,
        }),
        dns(false),
        dns(true),
        dns(true),
        Entry::Net(NetRecord::DnsSuppressed {
            profile: "dev".to_owned(),
            src: SRC,
            decisions: 7,
        }),
        verification(EventOutcome::Passed, vec![check(120), check(2000)]),
        verification(EventOutcome::Failed, vec![check(500)]),
        verification(EventOutcome::Refused, Vec::new()),
        Entry::Sandbox(Event::HostDrift {
            profiles: vec!["dev".to_owned()],
            drift: vec!["rule missing".to_owned()],
            reaction: "healed".to_owned(),
            ms: 42,
        }),
        Entry::Sandbox(Event::HostDrift {
            profiles: vec!["dev".to_owned()],
            drift: vec!["rule missing".to_owned()],
            reaction: "heal failed, cut".to_owned(),
            ms: 9,
        }),
        Entry::Sandbox(Event::Stopped {
            name: SECRET.to_owned(),
        }),
        Entry::Sandbox(Event::IdleStopped {
            name: SECRET.to_owned(),
            idle_stop_secs: 60,
            idle_secs: 61,
        }),
    ] {
        f.fold(&line(e));
    }
    let t = text(&m).await;
    for want in [
        r#"corral_blocked_packets_total{profile="dev",rule="dev-out/unlisted"} 2"#,
        r#"corral_blocked_packets_total{profile="dev",rule="dev-out/reserved"} 1"#,
        r#"corral_blocked_unlogged_packets_total{profile="dev"} 40"#,
        r#"corral_dns_decisions_total{profile="dev",decision="allowed"} 1"#,
        r#"corral_dns_decisions_total{profile="dev",decision="refused"} 2"#,
        r#"corral_dns_decisions_total{profile="dev",decision="unrecorded"} 7"#,
        r#"corral_canary_runs_total{profile="dev",outcome="passed"} 1"#,
        r#"corral_canary_runs_total{profile="dev",outcome="failed"} 1"#,
        r#"corral_canary_runs_total{profile="dev",outcome="refused"} 1"#,
        // The refused run probed nothing; the passed one took its longest check.
        "corral_canary_duration_seconds_count 2",
        "corral_canary_duration_seconds_sum 2.5",
        r#"corral_host_reaction_duration_seconds_count{reaction="healed"} 1"#,
        r#"corral_host_reaction_duration_seconds_sum{reaction="healed"} 0.042"#,
        r#"corral_host_reaction_duration_seconds_count{reaction="cut"} 1"#,
        "corral_audit_records_total 15",
        r#"corral_sandbox_lifetime_ends_total{event="idle_stopped"} 1"#,
        // Present before its first event.
        r#"corral_sandbox_lifetime_ends_total{event="expired"} 0"#,
        "# EOF",
    ] {
        assert!(has(&t, want), "missing `{want}` in:\n{t}");
    }
    // No label names the sandbox, its address or the name it asked.
    for secret in [SECRET, "10.231.3.2", "secret-name"] {
        assert!(!t.contains(secret), "`{secret}` in:\n{t}");
    }
}

#[tokio::test]
async fn configured_profiles_have_zero_series_before_any_event() {
    let m = Metrics::default();
    let t = text(&m).await;
    // Control: without a preset, no dns series at all.
    assert!(!t.contains("corral_dns_decisions_total{"), "{t}");
    m.families().preset_profiles(["isolated", "internet"]);
    let t = text(&m).await;
    for p in ["isolated", "internet"] {
        for o in ["passed", "failed", "refused"] {
            let want = format!(r#"corral_canary_runs_total{{profile="{p}",outcome="{o}"}} 0"#);
            assert!(has(&t, &want), "missing `{want}` in:\n{t}");
        }
        for d in ["allowed", "refused", "unrecorded"] {
            let want = format!(r#"corral_dns_decisions_total{{profile="{p}",decision="{d}"}} 0"#);
            assert!(has(&t, &want), "missing `{want}` in:\n{t}");
        }
    }
    assert!(
        has(&t, r#"corral_cluster_members{standing="drained"} 0"#),
        "{t}"
    );
    assert!(
        has(
            &t,
            r#"corral_host_reaction_duration_seconds_count{reaction="cut"} 0"#
        ),
        "{t}"
    );
}

#[tokio::test]
async fn records_appended_to_a_real_trail_are_followed_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let log = AuditLog::open(dir.path()).unwrap();
    log.append(Timestamp(1), blocked("dev-out/old")).unwrap();
    let mut follower = log.follow();
    log.append(Timestamp(2), blocked("dev-out/unlisted"))
        .unwrap();
    log.append(Timestamp(3), dns(true)).unwrap();
    let m = Metrics::default();
    for l in follower.poll() {
        m.families().fold(&l);
    }
    let t = text(&m).await;
    assert!(
        has(
            &t,
            r#"corral_blocked_packets_total{profile="dev",rule="dev-out/unlisted"} 1"#
        ),
        "{t}"
    );
    assert!(
        has(
            &t,
            r#"corral_dns_decisions_total{profile="dev",decision="refused"} 1"#
        ),
        "{t}"
    );
    // Written before the follower started: not counted (a counter starts
    // with the process).
    assert!(!t.contains("dev-out/old"), "{t}");
}

#[test]
fn every_drift_lands_in_one_area() {
    let nft = |family| {
        HostDrift::Nft(Drift {
            kind: DriftKind::Missing,
            object: DriftObject::Rule,
            family,
            location: "chain dev-out rule 3".to_owned(),
            detail: String::new(),
        })
    };
    assert_eq!(area(&nft(TableFamily::Inet)), "nft_inet");
    assert_eq!(area(&nft(TableFamily::Bridge)), "nft_bridge");
    assert_eq!(
        area(&HostDrift::Bridge {
            name: "corral-dev".to_owned(),
            problem: "missing".to_owned()
        }),
        "bridge"
    );
    assert_eq!(
        area(&HostDrift::Port {
            port: "veth1".to_owned(),
            bridge: "corral-dev".to_owned(),
            problem: "not isolated".to_owned()
        }),
        "port"
    );
}

#[tokio::test]
async fn a_kernel_counter_follows_the_kernel_and_resets_when_it_goes_down() {
    let m = Metrics::default();
    let labels = VerdictCounterLabels {
        profile: "dev".to_owned(),
        verdict: "blocked".to_owned(),
    };
    let want =
        |n: u64| format!(r#"corral_kernel_packets_total{{profile="dev",verdict="blocked"}} {n}"#);
    for (kernel, shown) in [(5, 5), (5, 5), (8, 8), (3, 3), (4, 4)] {
        m.families().kernel_count(&labels, kernel);
        let t = text(&m).await;
        assert!(has(&t, &want(shown)), "kernel {kernel}: {t}");
    }
}
