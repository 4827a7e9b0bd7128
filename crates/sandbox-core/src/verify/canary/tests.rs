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
        host_lan_failed: None,
        gateway_port_failed: None,
        own_targets: None,
        own_targets_failed: None,
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
    // The internet profile has an IPv6 subnet: v6 egress is allowed there,
    // and the IPv6 canary must connect.
    assert_eq!(
        kinds(&net),
        [
            CheckKind::AllowedConnects,
            CheckKind::AllowedUdp,
            CheckKind::Ipv6Allowed,
            CheckKind::HostLanBlocked,
            CheckKind::GatewayPortBlocked,
            CheckKind::SiblingBlocked,
            CheckKind::MetadataBlocked,
            CheckKind::ForeignResolverBlocked,
        ]
    );
    // Like the IPv4 canary there: a success is its own proof.
    let v6 = net
        .checks
        .iter()
        .find(|c| c.kind == CheckKind::Ipv6Allowed)
        .unwrap();
    assert_eq!(
        v6.target,
        ProbeTarget::Addr(core::net::SocketAddr::V6(cfg().canary_v6.unwrap()))
    );
    assert_eq!(v6.expect, Expectation::Connects);
    assert_eq!(v6.control, None);
    let short = VerificationConfig {
        options: crate::verify::options::VerificationOptions {
            check_timeout: Duration::from_secs(2),
            ..Default::default()
        },
        ..cfg()
    };
    let quick = plan(
        config.profiles.get("internet").unwrap(),
        &short,
        &v,
        Requirement::Strict,
    )
    .unwrap();
    for c in quick.checks() {
        let want = match c.kind {
            CheckKind::Ipv6Allowed => IPV6_READY_BOUND,
            CheckKind::SiblingBlocked => SIBLING_BOUND,
            _ => Duration::from_secs(2),
        };
        assert_eq!(c.bound, want, "{:?}", c.kind);
    }
    // The sibling's wait is bounded by its control's, not by the ARP
    // retries: the same echo from the host must come back within it.
    let sib = net
        .checks
        .iter()
        .find(|c| c.kind == CheckKind::SiblingBlocked)
        .unwrap();
    assert_eq!(sib.bound, SIBLING_BOUND);
    assert_eq!(sib.control.as_ref(), Some(&sib.target));
    assert!(
        net.checks
            .iter()
            .filter(|c| c.kind != CheckKind::SiblingBlocked)
            .all(|c| c.bound == Duration::from_secs(5))
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

/// What each built-in profile's canary runs on a host with no
/// `[host.verification]` (docs/verification.md lists it): every skip is
/// a setting not given or no sibling, none a check that could not run.
fn own() -> OwnTargets {
    OwnTargets {
        v4: SocketAddr::new(IpAddr::V4(OWN_TARGET_V4), 40100),
        v6: core::net::SocketAddrV6::new(OWN_TARGET_V6, 40101, 0, 0),
    }
}

#[test]
fn default_host_plans_per_builtin_profile() {
    let config = Config::builtin_default();
    let v = Vantage {
        sibling: Some("10.231.2.20".parse().unwrap()),
        own_targets: Some(own()),
        ..vantage()
    };
    use CheckKind::*;
    let want: [(&str, &[CheckKind], &[CheckKind]); 3] = [
        (
            "isolated",
            &[
                CanaryBlocked,
                Ipv6Blocked,
                HostLanBlocked,
                GatewayPortBlocked,
                SiblingBlocked,
                MetadataBlocked,
                ForeignResolverBlocked,
            ],
            &[],
        ),
        (
            "internet",
            &[
                AllowedConnects,
                AllowedUdp,
                Ipv6Allowed,
                HostLanBlocked,
                GatewayPortBlocked,
                SiblingBlocked,
                MetadataBlocked,
                ForeignResolverBlocked,
            ],
            &[],
        ),
        (
            "allowlist",
            &[
                AllowedConnects,
                CanaryBlocked,
                Ipv6Blocked,
                HostLanBlocked,
                GatewayPortBlocked,
                SiblingBlocked,
                MetadataBlocked,
                ForeignResolverBlocked,
            ],
            &[AllowedUdp, UnlistedNameUnresolved],
        ),
    ];
    for (name, kinds_want, skipped_want) in want {
        let p = plan(
            config.profiles.get(name).unwrap(),
            &VerificationConfig::default(),
            &v,
            Requirement::Configured,
        )
        .unwrap();
        assert_eq!(kinds(&p), kinds_want, "{name}");
        let skipped: Vec<CheckKind> = p.not_planned().iter().map(|n| n.kind).collect();
        assert_eq!(skipped, skipped_want, "{name}");
        assert!(p.not_planned().iter().all(|n| !n.could_not_run), "{name}");
        // The own targets stand in for the canaries, each must-fail check
        // with its control against the same listener.
        for c in p.checks() {
            let on_own = match &c.target {
                ProbeTarget::Addr(a) | ProbeTarget::Udp(a) => {
                    *a == own().v4 || *a == SocketAddr::V6(own().v6)
                }
                ProbeTarget::Resolver(a) => *a == SocketAddr::new(IpAddr::V4(OWN_TARGET_V4), 53),
                _ => false,
            };
            let own_kind = matches!(
                c.kind,
                CanaryBlocked | Ipv6Blocked | Ipv6Allowed | ForeignResolverBlocked | AllowedUdp
            ) || (c.kind == AllowedConnects && name == "internet");
            assert_eq!(on_own, own_kind, "{name}: {:?} {}", c.kind, c.target);
            if c.expect == Expectation::Fails && c.kind != MetadataBlocked {
                assert_eq!(c.control.as_ref(), Some(&c.target), "{name}: {:?}", c.kind);
            }
        }
    }
}

#[test]
fn without_own_targets_the_default_plan_is_thin_and_says_so() {
    let config = Config::builtin_default();
    let isolated = config.profiles.get("isolated").unwrap();
    let thin = plan(
        isolated,
        &VerificationConfig::default(),
        &vantage(),
        Requirement::Configured,
    )
    .unwrap();
    assert_eq!(
        kinds(&thin),
        [
            CheckKind::HostLanBlocked,
            CheckKind::GatewayPortBlocked,
            CheckKind::MetadataBlocked
        ]
    );
    assert!(thin.not_planned().iter().all(|n| !n.could_not_run));
    // The targets were expected (the setting is missing) but could not
    // be used: every check they stand in for could not run.
    let failed = plan(
        isolated,
        &VerificationConfig::default(),
        &Vantage {
            own_targets_failed: Some("no pinned namespace (run corral host apply)".into()),
            ..vantage()
        },
        Requirement::Configured,
    )
    .unwrap();
    let could_not: Vec<CheckKind> = failed
        .not_planned()
        .iter()
        .filter(|n| n.could_not_run)
        .map(|n| n.kind)
        .collect();
    assert_eq!(
        could_not,
        [
            CheckKind::CanaryBlocked,
            CheckKind::Ipv6Blocked,
            CheckKind::ForeignResolverBlocked
        ]
    );
    assert!(
        failed.not_planned()[0]
            .reason
            .contains("run corral host apply")
    );
}

#[test]
fn a_given_canary_wins_over_the_own_target() {
    let config = Config::builtin_default();
    let p = plan(
        config.profiles.get("isolated").unwrap(),
        &cfg(),
        &Vantage {
            own_targets: Some(own()),
            ..vantage()
        },
        Requirement::Configured,
    )
    .unwrap();
    let canary = p
        .checks()
        .iter()
        .find(|c| c.kind == CheckKind::CanaryBlocked)
        .unwrap();
    assert_eq!(canary.target.to_string(), "tcp 198.51.100.7:443");
}

#[test]
fn an_allowlist_covering_the_own_target_leaves_its_checks_out() {
    let text = r#"
[[profile]]
name = "docs"
bridge = "corral-docs"
subnet = "10.231.9.0/24"
mode = "allowlist"
allow = ["203.0.113.10:443/tcp", "198.51.100.0/24:443/tcp"]
"#;
    let config = Config::from_toml_str(text, "t").unwrap();
    let p = plan(
        config.profiles.get("docs").unwrap(),
        &VerificationConfig::default(),
        &Vantage {
            own_targets: Some(own()),
            ..vantage()
        },
        Requirement::Configured,
    )
    .unwrap();
    assert!(!kinds(&p).contains(&CheckKind::CanaryBlocked));
    assert!(!kinds(&p).contains(&CheckKind::ForeignResolverBlocked));
    assert!(kinds(&p).contains(&CheckKind::Ipv6Blocked));
    let why = p
        .not_planned()
        .iter()
        .find(|n| n.kind == CheckKind::CanaryBlocked)
        .unwrap();
    assert!(
        why.reason.contains("allows corral's own target"),
        "{}",
        why.reason
    );
}
