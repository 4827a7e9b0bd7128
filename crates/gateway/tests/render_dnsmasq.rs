//! The rendered configuration checked by the real dnsmasq (`--test`): a
//! long allowlist used to put every name on one `nftset=` line, which
//! dnsmasq refuses (over 1,024 bytes), so the gateway did not start.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use corral_gateway::{DnsTiming, GatewaySpec, render};
use corral_sandbox_core::{BlockAction, BridgeName, DnsPolicy, EgressMode, Profile, ProfileName};

fn dnsmasq_test(text: &str) -> (bool, String) {
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("dnsmasq.conf");
    std::fs::write(&conf, text).unwrap();
    let out = std::process::Command::new("dnsmasq")
        .arg("--test")
        .arg(format!("--conf-file={}", conf.display()))
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_sixty_name_allowlist_passes_dnsmasqs_own_check() {
    if !corral_test_support::gate::tool("dnsmasq", "dnsmasq-base") {
        return;
    }
    let names: Vec<String> = (0..60).map(|i| format!("name{i:03}.example.com")).collect();
    let profile = Profile {
        name: ProfileName::new("long").unwrap(),
        bridge: BridgeName::new("cb-long").unwrap(),
        subnet_v4: "10.99.7.0/24".parse().unwrap(),
        subnet_v6: None,
        mode: EgressMode::Allowlist,
        allow: names.iter().map(|n| n.parse().unwrap()).collect(),
        block: BlockAction::Reject,
        dns: DnsPolicy::Gateway,
        allow_unresolved: false,
        learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
        approvals: Default::default(),
        flows: Default::default(),
        deny: Vec::new(),
    };
    let ups = ["198.18.0.53:53".parse().unwrap()];
    let spec = GatewaySpec::from_profile(&profile, &ups, DnsTiming::default()).unwrap();
    let text = render(&spec).unwrap();

    // Control: the same names on one line, as corral wrote them before,
    // are refused by dnsmasq, so the check below can fail.
    let one_line = format!("nftset=/{}/4#inet#corral#long-dns4\n", names.join("/"));
    let (ok, _) = dnsmasq_test(&one_line);
    assert!(!ok, "dnsmasq accepted a {}-byte line", one_line.len());

    let (ok, stderr) = dnsmasq_test(&text);
    assert!(
        ok,
        "dnsmasq refused the rendered configuration: {stderr}\n{text}"
    );
}

#[test]
fn a_v6_profile_announcing_its_prefix_passes_dnsmasqs_own_check() {
    if !corral_test_support::gate::tool("dnsmasq", "dnsmasq-base") {
        return;
    }
    for (mode, allow) in [
        (
            EgressMode::Allowlist,
            vec!["api.example.com:443/tcp".parse().unwrap()],
        ),
        (EgressMode::Internet, Vec::new()),
        (EgressMode::None, Vec::new()),
    ] {
        let profile = Profile {
            name: ProfileName::new("six").unwrap(),
            bridge: BridgeName::new("cb-six").unwrap(),
            subnet_v4: "10.99.8.0/24".parse().unwrap(),
            subnet_v6: Some("fd00:99:8::/64".parse().unwrap()),
            mode,
            allow,
            block: BlockAction::Reject,
            dns: DnsPolicy::Gateway,
            allow_unresolved: false,
            learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
            approvals: Default::default(),
            flows: Default::default(),
            deny: Vec::new(),
        };
        let ups = ["198.18.0.53:53".parse().unwrap()];
        let spec = GatewaySpec::from_profile(&profile, &ups, DnsTiming::default()).unwrap();
        let text = render(&spec).unwrap();
        assert!(text.contains("\nenable-ra\n"), "{text}");
        let (ok, stderr) = dnsmasq_test(&text);
        assert!(
            ok,
            "dnsmasq refused the {mode:?} configuration: {stderr}\n{text}"
        );
    }
    // Control: a malformed range is refused, so the check can fail.
    let (ok, _) = dnsmasq_test("enable-ra\ndhcp-range=fd00:99:8::,ra-bogus,64\n");
    assert!(!ok);
}
