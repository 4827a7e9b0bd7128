//! The laws of sandbox-core, stated as properties:
//! every matrix cell is defined; a refused cell never selects; the trust
//! order is total and placement is consistent with it; config → TOML →
//! config round-trips; validation is all-or-nothing.

// Generators live outside `#[test]` functions, where clippy's test
// allowance does not reach; a bad generator should panic loudly.
#![allow(clippy::unwrap_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::time::Duration;

use corral_sandbox_core::config::VerificationConfig;
use corral_sandbox_core::placement::{PlacementRequest, place};
use corral_sandbox_core::platform::{
    Cell, EgressClass, Enforcement, SelectError, cell, egress_class, select_provider,
};
use corral_sandbox_core::verify::{Gate, Timestamp, VerificationOptions};
use corral_sandbox_core::{
    AllowEntry, BlockAction, Config, DnsPolicy, EgressMode, HostConfig, HostOs, PhaseProfiles,
    Profile, ProfileSet, SandboxKind,
};
use ipnet::{Ipv4Net, Ipv6Net};
use proptest::prelude::*;

fn host_os() -> impl Strategy<Value = HostOs> {
    prop::sample::select(HostOs::ALL.to_vec())
}

fn kind() -> impl Strategy<Value = SandboxKind> {
    prop::sample::select(SandboxKind::ALL.to_vec())
}

fn enforcement() -> impl Strategy<Value = Enforcement> {
    prop::sample::select(Enforcement::ALL.to_vec())
}

fn remote_kinds() -> impl Strategy<Value = Vec<SandboxKind>> {
    prop::sample::subsequence(
        vec![
            SandboxKind::IncusRemote,
            SandboxKind::MultipassRemote,
            SandboxKind::Sprites,
        ],
        0..=3,
    )
}

/// Host settings that vary what matters to selection: attestation and the
/// verification opt-in.
fn host_config() -> impl Strategy<Value = HostConfig> {
    (remote_kinds(), any::<bool>()).prop_map(|(attested, tart)| {
        let mut h = HostConfig {
            attested_executors: attested,
            ..HostConfig::default()
        };
        if tart {
            h.verification.kinds.push(SandboxKind::Tart);
        }
        h
    })
}

proptest! {
    #[test]
    fn every_cell_is_defined(os in host_os(), k in kind()) {
        match cell(os, k) {
            Cell::Refused(r) => {
                prop_assert!(!r.reason.is_empty());
                prop_assert!(!r.use_instead.is_empty());
            }
            Cell::Supported(s) => {
                prop_assert_eq!(s.egress, egress_class(k));
                // Only host-kernel enforcement holds statically.
                let e = s.static_classification().enforcement;
                prop_assert_eq!(e == Enforcement::Enforced, s.egress == EgressClass::HostKernel);
                // Verified-per-sandbox is never a static classification.
                prop_assert!(e != Enforcement::VerifiedPerSandbox);
            }
        }
    }

    #[test]
    fn a_refused_cell_never_selects(os in host_os(), k in kind(), host in host_config(), profiled in any::<bool>()) {
        let refused = matches!(cell(os, k), Cell::Refused(_));
        let selected = select_provider(os, k, &host, profiled);
        if refused {
            let is_unsupported = matches!(selected, Err(SelectError::Unsupported { .. }));
            prop_assert!(is_unsupported);
        }
        if let Ok(sel) = selected {
            prop_assert!(!refused);
            // A provider can never classify itself as verified.
            prop_assert!(sel.classification.enforcement != Enforcement::VerifiedPerSandbox);
            if profiled {
                prop_assert!(sel.classification.enforcement == Enforcement::Enforced || sel.verification_required);
            }
        }
    }

    #[test]
    fn trust_order_is_total(a in enforcement(), b in enforcement(), c in enforcement()) {
        let n = [a < b, a == b, a > b].iter().filter(|x| **x).count();
        prop_assert_eq!(n, 1);
        if a <= b && b <= c {
            prop_assert!(a <= c);
        }
    }

    #[test]
    fn placement_follows_the_trust_order(
        os in host_os(),
        kinds in prop::collection::vec(kind(), 0..10),
        host in host_config(),
        profiled in any::<bool>(),
        demote_tart in any::<bool>(),
    ) {
        let mut gate = Gate::new(&host.verification);
        if demote_tart && host.verification.kinds.contains(&SandboxKind::Tart) {
            demote(&mut gate);
        }
        let req = PlacementRequest {
            host_os: os,
            candidates: &kinds,
            host: &host,
            gate: &gate,
            now: Timestamp(1_000),
            profiled,
            exclude: &[],
        };
        let (ranked, skipped) = match place(&req) {
            Ok(p) => (p.ranked, p.skipped),
            Err(e) => (Vec::new(), e.skipped),
        };
        for pair in ranked.windows(2) {
            prop_assert!(pair[0].trust >= pair[1].trust);
        }
        for c in &ranked {
            prop_assert!(matches!(cell(os, c.kind), Cell::Supported(_)));
            if profiled {
                prop_assert!(c.trust > Enforcement::NotEnforced);
            }
            prop_assert_eq!(c.needs_canary, c.trust == Enforcement::VerifiedPerSandbox);
            if demote_tart && host.verification.kinds.contains(&SandboxKind::Tart) {
                prop_assert!(c.kind != SandboxKind::Tart);
            }
        }
        // Every distinct candidate is either ranked or skipped, once.
        let mut distinct = kinds.clone();
        distinct.sort();
        distinct.dedup();
        prop_assert_eq!(ranked.len() + skipped.len(), distinct.len());
    }
}

/// Demote tart by judging a canary run with no results (fail closed).
fn demote(gate: &mut Gate) {
    use corral_sandbox_core::verify::{FilterHealth, Requirement, Vantage, plan};
    let cfg = VerificationConfig {
        canary: Some("198.51.100.7:443".parse().unwrap()),
        canary_v6: Some("[2001:db8::7]:443".parse().unwrap()),
        unlisted_name: Some("unlisted.example.org".parse().unwrap()),
        ..VerificationConfig::default()
    };
    let builtin = Config::builtin_default();
    let isolated = builtin.profiles.get("isolated").unwrap();
    let plan = plan(isolated, &cfg, &Vantage::default(), Requirement::Strict).unwrap();
    let j = gate.judge(
        &"s".parse().unwrap(),
        SandboxKind::Tart,
        &plan,
        &[],
        Some(&FilterHealth::Unknown {
            reason: "not measured".into(),
        }),
        Timestamp(1_000),
    );
    assert!(j.verified.is_none());
}

// ---- configuration generators ----

fn label() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9]{0,6}"
}

fn host_name() -> impl Strategy<Value = String> {
    (prop::collection::vec(label(), 1..3), "[a-z]{2,4}")
        .prop_map(|(labels, tld)| format!("{}.{tld}", labels.join(".")))
}

fn ports() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        (1u16..=65535).prop_map(|p| format!(":{p}")),
        (1u16..=30000, 0u16..=30000).prop_map(|(a, d)| format!(":{a}-{}", a + d)),
    ]
}

fn proto() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["", "/tcp", "/udp"])
}

fn allow_entry() -> impl Strategy<Value = AllowEntry> {
    let v4 = (any::<u32>(), 8u8..=32).prop_map(|(a, len)| {
        let net = Ipv4Net::new(Ipv4Addr::from(a), len).unwrap().trunc();
        if len == 32 {
            net.addr().to_string()
        } else {
            net.to_string()
        }
    });
    let v6 = (any::<u128>(), 16u8..=128, any::<bool>()).prop_map(|(a, len, bracket)| {
        let net = Ipv6Net::new(Ipv6Addr::from(a), len).unwrap().trunc();
        match (len, bracket) {
            (128, true) => format!("[{}]", net.addr()),
            (128, false) => net.addr().to_string(),
            _ => net.to_string(),
        }
    });
    let target = prop_oneof![
        host_name(),
        host_name().prop_map(|h| format!("*.{h}")),
        v4,
        v6,
    ];
    (target, ports(), proto()).prop_map(|(t, p, pr)| {
        // A bare IPv6 address cannot carry a port: bracket it first.
        let t = if !p.is_empty() && t.contains(':') && !t.starts_with('[') {
            format!("[{t}]")
        } else {
            t
        };
        format!("{t}{p}{pr}").parse().unwrap()
    })
}

fn mode() -> impl Strategy<Value = EgressMode> {
    prop::sample::select(vec![
        EgressMode::None,
        EgressMode::Internet,
        EgressMode::Allowlist,
    ])
}

/// Profile `i`: unique name, bridge and (non-overlapping) subnets.
fn profile(i: u8) -> impl Strategy<Value = Profile> {
    (
        label(),
        16u8..=29,
        prop::option::of(48u8..=120),
        mode(),
        prop::collection::vec(allow_entry(), 1..4),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            move |(name, len, v6, mode, allow, drop, dns_off, unresolved)| Profile {
                name: format!("{name}-{i}").parse().unwrap(),
                bridge: format!("br-{name}-{i}")
                    .chars()
                    .take(15)
                    .collect::<String>()
                    .parse()
                    .unwrap(),
                subnet_v4: Ipv4Net::new(Ipv4Addr::new(10, i, 0, 0), len).unwrap(),
                subnet_v6: v6.map(|l| {
                    Ipv6Net::new(Ipv6Addr::new(0xfd00, u16::from(i), 0, 0, 0, 0, 0, 0), l).unwrap()
                }),
                mode,
                allow: if mode == EgressMode::Allowlist {
                    allow
                } else {
                    Vec::new()
                },
                block: if drop {
                    BlockAction::Drop
                } else {
                    BlockAction::Reject
                },
                dns: if dns_off {
                    DnsPolicy::Off
                } else {
                    DnsPolicy::Gateway
                },
                allow_unresolved: unresolved,
                learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
                approvals: Default::default(),
                flows: Default::default(),
                deny: Vec::new(),
            },
        )
}

fn profiles() -> impl Strategy<Value = Vec<Profile>> {
    (1u8..=4).prop_flat_map(|n| (0..n).map(profile).collect::<Vec<_>>())
}

fn verification() -> impl Strategy<Value = VerificationConfig> {
    (
        any::<bool>(),
        1u64..=30,
        1u64..=100_000,
        60u64..=100_000,
        256usize..=1_048_576,
        any::<[u8; 2]>(),
    )
        .prop_map(|(tart, t, c, r, out, [a, b])| {
            let options = VerificationOptions {
                check_timeout: Duration::from_secs(t),
                cool_down: Duration::from_secs(c),
                reverify_interval: Duration::from_secs(r),
                max_probe_output: out,
            };
            if !tart {
                return VerificationConfig {
                    options,
                    ..VerificationConfig::default()
                };
            }
            VerificationConfig {
                kinds: vec![SandboxKind::Tart],
                canary: Some(SocketAddr::new(
                    IpAddr::V4(Ipv4Addr::new(198, 51, 100, a)),
                    443,
                )),
                canary_v6: Some(SocketAddrV6::new(
                    Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, u16::from(b)),
                    443,
                    0,
                    0,
                )),
                unlisted_name: Some("unlisted.example.org".parse().unwrap()),
                options,
            }
        })
}

fn config() -> impl Strategy<Value = Config> {
    (
        profiles(),
        remote_kinds(),
        verification(),
        prop::option::of("eth[0-9]"),
        prop::collection::vec(any::<u32>(), 0..3),
        prop::collection::vec(any::<prop::sample::Index>(), 5),
        prop::collection::vec(any::<bool>(), 5),
    )
        .prop_map(|(ps, attested, verification, uplink, dns, picks, set)| {
            let names: Vec<_> = ps.iter().map(|p| p.name.clone()).collect();
            let pick = |i: usize| set[i].then(|| picks[i].get(&names).clone());
            let host = HostConfig {
                uplink: uplink.map(|u| u.parse().unwrap()),
                dns_upstreams: dns
                    .into_iter()
                    .map(|d| IpAddr::V4(Ipv4Addr::from(d)))
                    .filter(|a| !a.is_unspecified() && !a.is_multicast())
                    .collect(),
                attested_executors: attested,
                verification,
                ..HostConfig::default()
            };
            Config {
                host,
                profiles: ProfileSet::new(ps).unwrap(),
                phases: PhaseProfiles {
                    work: pick(0),
                    rework: pick(1),
                    audit_agent: pick(2),
                    audit_tool: pick(3),
                    merge: pick(4),
                },
            }
        })
}

/// Ways to break one profile of an otherwise valid set.
fn breakage() -> impl Strategy<Value = u8> {
    0u8..5
}

fn break_one(ps: &mut Vec<Profile>, which: usize, how: u8) {
    let first = ps[0].clone();
    let p = &mut ps[which];
    match how {
        0 => p.subnet_v4 = Ipv4Net::new(p.subnet_v4.network(), 30).unwrap(),
        1 => {
            p.mode = EgressMode::Allowlist;
            p.allow.clear();
        }
        2 => {
            p.mode = EgressMode::None;
            p.allow = vec!["192.0.2.1".parse().unwrap()];
        }
        3 => {
            // A copy of the first profile under a new name: same bridge and subnet.
            let mut dup = first;
            dup.name = "dup".parse().unwrap();
            ps.push(dup);
        }
        _ => p.subnet_v6 = Some("fd00::/125".parse().unwrap()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn config_round_trips_through_toml(cfg in config()) {
        let text = cfg.to_toml_string();
        let back = Config::from_toml_str(&text, "rt.toml");
        prop_assert!(back.is_ok(), "{}\n{}", text, back.unwrap_err());
        prop_assert_eq!(back.unwrap(), cfg);
    }

    #[test]
    fn validation_is_all_or_nothing(cfg in config(), which in any::<prop::sample::Index>(), how in breakage()) {
        let mut ps: Vec<Profile> = cfg.profiles.iter().cloned().collect();
        let i = which.index(ps.len());
        break_one(&mut ps, i, how);
        prop_assert!(ProfileSet::new(ps.clone()).is_err());
        // The same through the file format: the whole file is refused.
        let good = Config { profiles: cfg.profiles.clone(), ..cfg.clone() };
        let text = good.to_toml_string();
        let broken_text = splice_profiles(&text, &ps);
        prop_assert!(Config::from_toml_str(&broken_text, "bad.toml").is_err(), "{}", broken_text);
    }
}

/// `text` with its `[[profile]]` sections replaced by `ps`, rendered by hand
/// (a broken set cannot be a `Config`).
fn splice_profiles(text: &str, ps: &[Profile]) -> String {
    let head = text.split("[[profile]]").next().unwrap_or_default();
    let mut out = head.to_owned();
    for p in ps {
        out.push_str(&format!(
            "[[profile]]\nname = \"{}\"\nbridge = \"{}\"\nsubnet = \"{}\"\nmode = \"{}\"\n",
            p.name,
            p.bridge,
            p.subnet_v4,
            match p.mode {
                EgressMode::None => "none",
                EgressMode::Internet => "internet",
                EgressMode::Allowlist => "allowlist",
            }
        ));
        if let Some(v6) = p.subnet_v6 {
            out.push_str(&format!("subnet_v6 = \"{v6}\"\n"));
        }
        let allow: Vec<String> = p.allow.iter().map(|a| format!("\"{a}\"")).collect();
        out.push_str(&format!("allow = [{}]\n\n", allow.join(", ")));
    }
    out
}
