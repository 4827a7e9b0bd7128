//! The gate's judgement, demotion and cool-down, with an injected clock.

use core::net::SocketAddr;

use super::*;
use crate::config::Config;
use crate::verify::canary::{CheckKind, ControlResult, Requirement, Vantage, plan};
use crate::verify::clock::{Clock, ManualClock};

const MIN: Duration = Duration::from_secs(60);

fn setup() -> (Gate, CanaryPlan, SandboxName, ManualClock) {
    let cfg = VerificationConfig {
        kinds: vec![SandboxKind::Tart],
        canary: Some("198.51.100.7:443".parse().unwrap()),
        canary_v6: Some("[2001:db8::7]:443".parse().unwrap()),
        unlisted_name: Some("unlisted.example.org".parse().unwrap()),
        options: VerificationOptions::default(),
    };
    let config = Config::builtin_default();
    let lan: SocketAddr = "192.168.1.10:22".parse().unwrap();
    let vantage = Vantage {
        host_lan: Some(lan),
        gateway_port: Some("10.231.3.1:40002".parse().unwrap()),
        ..Vantage::default()
    };
    let plan = plan(
        config.profiles.get("allowlist").unwrap(),
        &cfg,
        &vantage,
        Requirement::Strict,
    )
    .unwrap();
    (
        Gate::new(&cfg),
        plan,
        "agent-1".parse().unwrap(),
        ManualClock::new(Timestamp(1_000_000)),
    )
}

/// Results that pass every check of `plan`.
fn passing(plan: &CanaryPlan) -> Vec<CheckResult> {
    plan.checks()
        .iter()
        .map(|c| CheckResult {
            kind: c.kind,
            observed: match c.expect {
                Expectation::Connects => Observed::Connected,
                Expectation::Fails => Observed::Refused,
                Expectation::DoesNotResolve => Observed::NotResolved,
            },
            elapsed: Duration::from_millis(12),
            output: String::new(),
            control: c.control.as_ref().map(|_| ControlResult {
                observed: Observed::Connected,
                elapsed: Duration::from_millis(3),
            }),
        })
        .collect()
}

#[test]
fn a_passing_run_verifies_and_records_timings() {
    let (mut gate, plan, sb, clock) = setup();
    let j = gate.judge(
        &sb,
        SandboxKind::Tart,
        &plan,
        &passing(&plan),
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    assert_eq!(j.event.outcome, EventOutcome::Passed);
    assert_eq!(j.event.checks.len(), plan.checks().len());
    assert!(
        j.event
            .checks
            .iter()
            .all(|c| c.passed && c.elapsed_ms == 12 && c.bound_ms == 5000)
    );
    let v = j.verified.unwrap();
    assert_eq!(v.kind(), SandboxKind::Tart);
    assert_eq!(
        v.classification().enforcement,
        crate::platform::Enforcement::VerifiedPerSandbox
    );
    let json = serde_json::to_value(&j.event).unwrap();
    assert_eq!(json["checks"][0]["kind"], "allowed-connects");
    assert!(!gate.reverify_due(&v, clock.now()));
    clock.advance(Duration::from_secs(3600));
    assert!(gate.reverify_due(&v, clock.now()));
}

#[test]
fn a_failure_demotes_for_the_cool_down_then_only_a_pass_restores() {
    let (mut gate, plan, sb, clock) = setup();
    let mut results = passing(&plan);
    results[1].observed = Observed::Connected; // the canary got through
    let j = gate.judge(
        &sb,
        SandboxKind::Tart,
        &plan,
        &results,
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    assert_eq!(j.event.outcome, EventOutcome::Failed);
    assert!(j.verified.is_none());
    assert!(
        j.event
            .message
            .starts_with("failed: canary destination blocked."),
        "{}",
        j.event.message
    );
    let until = clock.now().plus(Duration::from_secs(900));
    assert_eq!(j.event.demoted_until, Some(until));
    assert_eq!(
        gate.status(SandboxKind::Tart, clock.now()),
        KindStatus::Demoted { until }
    );
    // During the cool-down even a passing run is refused.
    clock.advance(14 * MIN);
    let j = gate.judge(
        &sb,
        SandboxKind::Tart,
        &plan,
        &passing(&plan),
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    assert_eq!(j.event.outcome, EventOutcome::Refused);
    assert!(j.verified.is_none());
    // After it: probation, not eligible, until a fresh pass.
    clock.advance(MIN);
    assert_eq!(
        gate.status(SandboxKind::Tart, clock.now()),
        KindStatus::Probation { since: until }
    );
    assert!(gate.status(SandboxKind::Tart, clock.now()).may_try());
    let j = gate.judge(
        &sb,
        SandboxKind::Tart,
        &plan,
        &passing(&plan),
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    assert!(j.verified.is_some());
    assert_eq!(
        gate.status(SandboxKind::Tart, clock.now()),
        KindStatus::Eligible
    );
}

#[test]
fn unknown_health_missing_checks_probe_errors_and_overruns_fail_closed() {
    let (gate0, plan, sb, clock) = setup();
    let cases: Vec<(Vec<CheckResult>, FilterHealth, &str)> = vec![
        (
            passing(&plan),
            FilterHealth::Unknown {
                reason: "ps failed".into(),
            },
            "filter health is unknown (ps failed)",
        ),
        (
            passing(&plan)[1..].to_vec(),
            FilterHealth::Alive,
            "allowed destination connects",
        ),
        (
            {
                let mut r = passing(&plan);
                r[2].observed = Observed::ProbeError("no curl in image".into());
                r
            },
            FilterHealth::Alive,
            "global IPv6 blocked",
        ),
        (
            {
                let mut r = passing(&plan);
                r[3].elapsed = Duration::from_secs(7);
                r
            },
            FilterHealth::Alive,
            "host LAN address blocked",
        ),
        (
            {
                let mut r = passing(&plan);
                let i = r
                    .iter()
                    .position(|c| c.kind == CheckKind::UnlistedNameUnresolved)
                    .unwrap();
                r[i].observed = Observed::Resolved(vec!["192.0.2.1".parse().unwrap()]);
                r
            },
            FilterHealth::Alive,
            "unlisted name does not resolve",
        ),
    ];
    for (results, health, why) in cases {
        let mut gate = gate0.clone();
        let j = gate.judge(
            &sb,
            SandboxKind::Tart,
            &plan,
            &results,
            Some(&health),
            clock.now(),
        );
        assert_eq!(j.event.outcome, EventOutcome::Failed, "{why}");
        assert!(j.event.message.contains(why), "{why}: {}", j.event.message);
        assert!(
            gate.demotion_reason(SandboxKind::Tart)
                .unwrap()
                .contains(why)
        );
    }
}

#[test]
fn a_control_that_did_not_reach_fails_its_check() {
    let (mut gate, plan, sb, clock) = setup();
    let mut results = passing(&plan);
    let i = plan
        .checks()
        .iter()
        .position(|c| c.kind == CheckKind::CanaryBlocked)
        .unwrap();
    results[i].control = Some(ControlResult {
        observed: Observed::TimedOut,
        elapsed: Duration::from_secs(5),
    });
    let j = gate.judge(
        &sb,
        SandboxKind::Tart,
        &plan,
        &results,
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    assert_eq!(j.event.outcome, EventOutcome::Failed);
    assert!(
        j.event.message.contains(
            "canary destination blocked (its control did not reach tcp 198.51.100.7:443)"
        ),
        "{}",
        j.event.message
    );
    let rec = &j.event.checks[i];
    assert!(!rec.passed);
    assert!(!rec.control.as_ref().unwrap().reached);
}

#[test]
fn an_enforced_kind_is_judged_but_never_demoted_or_promoted() {
    let (mut gate, plan, sb, clock) = setup();
    let j = gate.judge(
        &sb,
        SandboxKind::Incus,
        &plan,
        &passing(&plan),
        None,
        clock.now(),
    );
    assert_eq!(j.event.outcome, EventOutcome::Passed);
    assert!(j.verified.is_none(), "an enforced kind needs no proof");
    let mut results = passing(&plan);
    results[1].observed = Observed::Connected;
    let j = gate.judge(&sb, SandboxKind::Incus, &plan, &results, None, clock.now());
    assert_eq!(j.event.outcome, EventOutcome::Failed);
    assert!(
        j.event.message.contains("fails closed"),
        "{}",
        j.event.message
    );
    assert_eq!(j.event.demoted_until, None);
    assert!(gate.demotions().is_empty());
    // A provider-host kind that is not opted in is refused outright.
    let j = gate.judge(
        &sb,
        SandboxKind::Bubblewrap,
        &plan,
        &passing(&plan),
        None,
        clock.now(),
    );
    assert_eq!(j.event.outcome, EventOutcome::Refused);
    // An opted-in kind without a health report fails closed.
    let j = gate.judge(
        &sb,
        SandboxKind::Tart,
        &plan,
        &passing(&plan),
        None,
        clock.now(),
    );
    assert_eq!(j.event.outcome, EventOutcome::Failed);
    assert!(j.event.message.contains("filter health is unknown"));
}

#[test]
fn demotions_round_trip_through_a_store() {
    let (mut gate, plan, sb, clock) = setup();
    let j = gate.judge(
        &sb,
        SandboxKind::Tart,
        &plan,
        &[],
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    assert_eq!(j.event.outcome, EventOutcome::Failed);
    let saved = gate.demotions();
    assert_eq!(saved.len(), 1);
    let (mut fresh, ..) = setup();
    for (k, until, reason) in saved {
        fresh.restore_demotion(k, until, reason);
    }
    assert_eq!(fresh, gate);
}

#[test]
fn not_opted_in_kinds_are_refused() {
    let (mut gate, plan, sb, clock) = setup();
    let j = gate.judge(
        &sb,
        SandboxKind::Process,
        &plan,
        &passing(&plan),
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    assert_eq!(j.event.outcome, EventOutcome::Refused);
    assert!(j.verified.is_none());
    assert_eq!(
        gate.status(SandboxKind::Multipass, clock.now()),
        KindStatus::NotOptedIn
    );
    assert!(
        j.event.message.contains("not opted in"),
        "{}",
        j.event.message
    );
}

#[test]
fn a_dead_filter_revokes_and_demotes() {
    let (mut gate, plan, sb, clock) = setup();
    let v = gate
        .judge(
            &sb,
            SandboxKind::Tart,
            &plan,
            &passing(&plan),
            Some(&FilterHealth::Alive),
            clock.now(),
        )
        .verified
        .unwrap();
    let v = match gate.health(v, FilterHealth::Alive, clock.now()) {
        HealthVerdict::StillVerified(v) => v,
        HealthVerdict::Revoked(e) => panic!("{e:?}"),
    };
    let dead = FilterHealth::Dead {
        reason: "softnet exited".into(),
    };
    match gate.health(v, dead, clock.now()) {
        HealthVerdict::Revoked(e) => {
            assert_eq!(e.outcome, EventOutcome::Failed);
            assert!(e.message.contains("fails closed"));
        }
        HealthVerdict::StillVerified(_) => panic!("a dead filter must revoke"),
    }
    assert!(matches!(
        gate.status(SandboxKind::Tart, clock.now()),
        KindStatus::Demoted { .. }
    ));
}

#[test]
fn probe_output_is_bounded() {
    let (mut gate, plan, sb, clock) = setup();
    let mut results = passing(&plan);
    results[0].output = "é".repeat(5000);
    let j = gate.judge(
        &sb,
        SandboxKind::Tart,
        &plan,
        &results,
        Some(&FilterHealth::Alive),
        clock.now(),
    );
    let out = &j.event.checks[0].output;
    assert!(out.len() < 4096 + 40, "{}", out.len());
    assert!(
        out.ends_with("…[5904 more bytes]"),
        "{}",
        &out[out.len() - 30..]
    );
    assert_eq!(j.event.checks[0].kind, CheckKind::AllowedConnects);
}

/// A pass says how many checks were skipped and why; a check that applied
/// but could not run fails a kind whose standing rests on the canary, and
/// only is counted for a kind corral enforces. Control: the same plan
/// with the listener in place passes the opted-in kind.
#[test]
fn skipped_checks_are_counted_and_a_missing_one_fails_an_opted_in_kind() {
    let (mut gate, complete, sb, clock) = setup();
    let config = Config::builtin_default();
    let cfg = VerificationConfig {
        kinds: vec![SandboxKind::Tart],
        canary: Some("198.51.100.7:443".parse().unwrap()),
        canary_v6: Some("[2001:db8::7]:443".parse().unwrap()),
        unlisted_name: Some("unlisted.example.org".parse().unwrap()),
        options: VerificationOptions::default(),
    };
    let short = plan(
        config.profiles.get("allowlist").unwrap(),
        &cfg,
        &Vantage {
            host_lan: Some("192.168.1.10:22".parse().unwrap()),
            gateway_port_failed: Some("no port could be opened on the gateway address".into()),
            ..Vantage::default()
        },
        Requirement::Strict,
    )
    .unwrap();
    let missing: Vec<_> = short
        .not_planned()
        .iter()
        .filter(|n| n.could_not_run)
        .collect();
    assert_eq!(missing.len(), 1);
    assert_eq!(missing[0].kind, CheckKind::GatewayPortBlocked);
    let health = Some(&FilterHealth::Alive);
    // Control: with the gateway listener the opted-in kind passes, and the
    // message counts the skips (no sibling, no UDP entry).
    let ok = gate.judge(
        &sb,
        SandboxKind::Tart,
        &complete,
        &passing(&complete),
        health,
        clock.now(),
    );
    assert_eq!(
        ok.event.outcome,
        EventOutcome::Passed,
        "{}",
        ok.event.message
    );
    assert!(
        ok.event.message.starts_with(&format!(
            "all {} planned checks passed; 2 skipped (",
            complete.checks().len()
        )),
        "{}",
        ok.event.message
    );
    assert!(
        ok.event
            .message
            .contains("sibling-blocked: no other running sandbox")
    );
    // Without it, the same passing results fail the opted-in kind...
    let bad = gate.judge(
        &sb,
        SandboxKind::Tart,
        &short,
        &passing(&short),
        health,
        clock.now(),
    );
    assert_eq!(bad.event.outcome, EventOutcome::Failed);
    assert!(bad.verified.is_none());
    assert!(
        bad.event
            .message
            .contains("gateway non-DNS port blocked could not run"),
        "{}",
        bad.event.message
    );
    // ...and pass, counted, for a kind corral enforces.
    let enforced = gate.judge(
        &sb,
        SandboxKind::Incus,
        &short,
        &passing(&short),
        health,
        clock.now(),
    );
    assert_eq!(
        enforced.event.outcome,
        EventOutcome::Passed,
        "{}",
        enforced.event.message
    );
    assert!(
        enforced.event.message.contains("3 skipped"),
        "{}",
        enforced.event.message
    );
    assert!(
        enforced
            .event
            .message
            .contains("gateway-port-blocked: no port could be opened")
    );
}

/// A sibling seen dropped on the bridge passes its must-fail check; the
/// same check seeing the sibling reached (the control: isolation gone)
/// fails it.
#[test]
fn a_sibling_seen_dropped_passes_and_one_reached_fails() {
    let (gate0, _, sb, clock) = setup();
    let cfg = VerificationConfig {
        kinds: vec![SandboxKind::Tart],
        canary: Some("198.51.100.7:443".parse().unwrap()),
        canary_v6: Some("[2001:db8::7]:443".parse().unwrap()),
        unlisted_name: Some("unlisted.example.org".parse().unwrap()),
        options: VerificationOptions::default(),
    };
    let config = Config::builtin_default();
    let vantage = Vantage {
        sibling: Some("10.231.3.7".parse().unwrap()),
        ..Vantage::default()
    };
    let plan = plan(
        config.profiles.get("allowlist").unwrap(),
        &cfg,
        &vantage,
        Requirement::Configured,
    )
    .unwrap();
    let i = plan
        .checks()
        .iter()
        .position(|c| c.kind == CheckKind::SiblingBlocked)
        .unwrap();
    for (observed, want) in [
        (Observed::Dropped, EventOutcome::Passed),
        (Observed::Connected, EventOutcome::Failed),
    ] {
        let mut gate = gate0.clone();
        let mut results = passing(&plan);
        results[i].observed = observed.clone();
        let j = gate.judge(
            &sb,
            SandboxKind::Incus,
            &plan,
            &results,
            Some(&FilterHealth::Alive),
            clock.now(),
        );
        assert_eq!(j.event.outcome, want, "{observed}: {}", j.event.message);
    }
}

/// A reach check may take both of its tries' bounds (it is tried again
/// when the first misses); a block check only its one.
#[test]
fn a_reach_check_has_two_tries_time_and_a_block_check_one() {
    let judge = |expect: Expectation, factor: u32| {
        let (mut gate, plan, sb, clock) = setup();
        let i = plan
            .checks()
            .iter()
            .position(|c| c.expect == expect)
            .expect("the plan has such a check");
        assert_eq!(
            plan.checks()[i].tries(),
            if expect == Expectation::Connects {
                2
            } else {
                1
            }
        );
        let mut results = passing(&plan);
        results[i].elapsed = plan.checks()[i].bound * factor + plan.checks()[i].bound / 2;
        let j = gate.judge(
            &sb,
            SandboxKind::Tart,
            &plan,
            &results,
            Some(&FilterHealth::Alive),
            clock.now(),
        );
        j.event.checks.get(i).is_some_and(|c| c.passed)
    };
    assert!(
        judge(Expectation::Connects, 1),
        "1.5 bounds for a reach check"
    );
    assert!(
        !judge(Expectation::Connects, 2),
        "2.5 bounds for a reach check"
    );
    assert!(
        !judge(Expectation::Fails, 1),
        "1.5 bounds for a block check"
    );
}
