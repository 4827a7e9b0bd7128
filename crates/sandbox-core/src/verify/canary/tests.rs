//! The canary plan for each mode, its controls and its refusals.

use super::*;
use crate::config::Config;
use crate::config::VerificationConfig;

fn cfg() -> VerificationConfig {
    VerificationConfig {
        canary: Some("198.51.100.7:443".parse().unwrap()),
        canary_v6: Some("[2001:db8::7]:443".parse().unwrap()),
        unlisted_name: Some("unlisted.example.org".parse().unwrap()),
        ..VerificationConfig::default()
    }
}

fn vantage() -> Vantage {
    Vantage {
        host_lan: Some("192.168.1.10:40001".parse().unwrap()),
        gateway_port: Some("10.231.3.1:40002".parse().unwrap()),
        sibling: None,
        upstream: Some("192.168.1.1:53".parse().unwrap()),
    }
}

fn kinds(p: &CanaryPlan) -> Vec<CheckKind> {
    p.checks.iter().map(|c| c.kind).collect()
}

#[test]
fn allowlist_plan_has_every_check() {
    let config = Config::builtin_default();
    let p = plan(
        config.profiles.get("allowlist").unwrap(),
        &cfg(),
        &vantage(),
        Requirement::Strict,
    )
    .unwrap();
    assert_eq!(
        kinds(&p),
        [
            CheckKind::AllowedConnects,
            CheckKind::CanaryBlocked,
            CheckKind::Ipv6Blocked,
            CheckKind::HostLanBlocked,
            CheckKind::GatewayPortBlocked,
            CheckKind::MetadataBlocked,
            CheckKind::ForeignResolverBlocked,
            CheckKind::UnlistedNameUnresolved,
        ]
    );
    assert_eq!(p.checks[0].target.to_string(), "tcp 203.0.113.10:443");
    assert!(p.checks.iter().all(|c| c.bound == Duration::from_secs(5)));
    // Every must-fail check but the metadata one has a control.
    for c in &p.checks {
        let wants = c.expect != Expectation::Connects && c.kind != CheckKind::MetadataBlocked;
        assert_eq!(c.control.is_some(), wants, "{:?}", c.kind);
    }
    let skipped: Vec<CheckKind> = p.not_planned().iter().map(|n| n.kind).collect();
    assert_eq!(skipped, [CheckKind::AllowedUdp, CheckKind::SiblingBlocked]);
}

#[test]
fn internet_and_none_plans() {
    let config = Config::builtin_default();
    let v = Vantage {
        sibling: Some("10.231.2.20".parse().unwrap()),
        ..vantage()
    };
    let net = plan(
        config.profiles.get("internet").unwrap(),
        &cfg(),
        &v,
        Requirement::Strict,
    )
    .unwrap();
    // The internet profile has an IPv6 subnet: v6 egress is allowed there.
    assert_eq!(
        kinds(&net),
        [
            CheckKind::AllowedConnects,
            CheckKind::AllowedUdp,
            CheckKind::HostLanBlocked,
            CheckKind::GatewayPortBlocked,
            CheckKind::SiblingBlocked,
            CheckKind::MetadataBlocked,
            CheckKind::ForeignResolverBlocked,
        ]
    );
    let iso = plan(
        config.profiles.get("isolated").unwrap(),
        &cfg(),
        &vantage(),
        Requirement::Strict,
    )
    .unwrap();
    assert_eq!(
        kinds(&iso),
        [
            CheckKind::CanaryBlocked,
            CheckKind::Ipv6Blocked,
            CheckKind::HostLanBlocked,
            CheckKind::GatewayPortBlocked,
            CheckKind::MetadataBlocked,
            CheckKind::ForeignResolverBlocked,
        ]
    );
}

#[test]
fn without_settings_an_enforced_kind_runs_what_it_can() {
    let config = Config::builtin_default();
    let bare = VerificationConfig::default();
    let p = plan(
        config.profiles.get("isolated").unwrap(),
        &bare,
        &Vantage::default(),
        Requirement::Configured,
    )
    .unwrap();
    assert_eq!(kinds(&p), [CheckKind::MetadataBlocked]);
    let reasons: Vec<&str> = p.not_planned().iter().map(|n| n.reason.as_str()).collect();
    assert!(
        reasons.contains(&"host.verification.canary is not set"),
        "{reasons:?}"
    );
    let e = plan(
        config.profiles.get("isolated").unwrap(),
        &bare,
        &Vantage::default(),
        Requirement::Strict,
    )
    .unwrap_err();
    assert_eq!(e, PlanError::Missing { key: "canary" });
}

#[test]
fn allowlisted_canary_is_refused() {
    let config = Config::builtin_default();
    let mut c = cfg();
    c.canary = Some("203.0.113.5:443".parse().unwrap());
    let err = plan(
        config.profiles.get("allowlist").unwrap(),
        &c,
        &vantage(),
        Requirement::Configured,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "profile \"allowlist\" allows 203.0.113.5, which the canary expects to be \
            blocked; choose a host.verification.canary outside the profile's \
            allowlist"
    );
}

#[test]
fn observed_reached_only_for_answers() {
    assert!(Observed::Connected.reached());
    assert!(Observed::Resolved(vec!["192.0.2.1".parse().unwrap()]).reached());
    assert!(!Observed::Resolved(vec![]).reached());
    for o in [
        Observed::Refused,
        Observed::TimedOut,
        Observed::Unreachable,
        Observed::NotResolved,
        Observed::ProbeError("x".into()),
    ] {
        assert!(!o.reached(), "{o}");
    }
    assert_eq!(CheckKind::SiblingBlocked.as_str(), "sibling-blocked");
    assert_eq!(
        serde_json::to_value(CheckKind::SiblingBlocked).unwrap(),
        "sibling-blocked"
    );
}

/// The canary's targets are held to corral's one reserved list: a target
/// every mode refuses would make the must-fail checks pass for the wrong
/// reason and the internet profile's must-connect check never pass.
/// Control: the documentation addresses of `cfg()` plan fine.
#[test]
fn reserved_canary_is_refused() {
    let config = Config::builtin_default();
    let internet = config.profiles.get("internet").unwrap();
    assert!(plan(internet, &cfg(), &vantage(), Requirement::Strict).is_ok());
    for (v4, v6, key, range) in [
        (Some("198.18.0.9:443"), None, "canary", "198.18.0.0/15"),
        (None, Some("[2001:2::9]:443"), "canary_v6", "2001::/23"),
        (None, Some("[3fff::9]:443"), "canary_v6", "3fff::/20"),
    ] {
        let mut c = cfg();
        if let Some(a) = v4 {
            c.canary = Some(a.parse().unwrap());
        }
        if let Some(a) = v6 {
            c.canary_v6 = Some(a.parse().unwrap());
        }
        let err = plan(internet, &c, &vantage(), Requirement::Strict).unwrap_err();
        assert!(
            matches!(&err, PlanError::Reserved { key: k, range: r, .. } if *k == key && r == range),
            "{err}"
        );
    }
    // The metadata address the canary probes is on the same list.
    assert!(crate::reserved::reserved_range(METADATA.ip()).is_some());
}
