//! A real Incus container on a bridge corral configured in the host
//! namespace reaches what its allowlist profile allows and nothing else —
//! real packets from inside the container, with a control run first.
//!
//! This test changes the HOST network namespace (Incus runs there); see
//! `corral_tests::hostlab` for what it refuses to touch and how it cleans up.

use std::net::SocketAddr;
use std::time::Instant;

use tokio::runtime::Runtime;

use corral_egress::plan::MacAddr;
use corral_provider_incus::{TEST_IMAGE_ALIAS, assign_static_ipv4};
use corral_sandbox_core::sandbox::{ExecRequest, Sandbox, SandboxProvider, SandboxSpec};
use corral_tests::hostlab::{ALLOWED, GATEWAY_PORT, HostLab, METADATA, OTHER_ADDR, OTHER_PORT};
use corral_tests::incus::{SandboxGuard, local_provider, tcp_probe, unique_name};

fn reached(rt: &Runtime, sb: &dyn Sandbox, to: SocketAddr) -> (bool, String) {
    let p = rt
        .block_on(tcp_probe(sb, to))
        .unwrap_or_else(|e| panic!("probe to {to} could not run: {e}"));
    (p.reached, p.detail)
}

// A plain test with its own runtime: the lab's echo listeners are set up
// with blocking calls, which must not run on a runtime thread.
#[test]
fn incus_container_behind_corral_reaches_only_its_allowlist() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("tokio runtime: {e}"));
    let Some(provider) = rt.block_on(local_provider()) else {
        return;
    };
    // The lab first, the container second: locals drop in reverse order,
    // so the container is deleted before the bridge and rules go.
    let mut lab = HostLab::new().unwrap_or_else(|e| panic!("{e}"));
    let gateway = SocketAddr::new(lab.profile.gateway_v4().into(), GATEWAY_PORT);

    let mut spec = SandboxSpec::new(unique_name("egress"), TEST_IMAGE_ALIAS);
    spec.network = Some(lab.attachment());
    let sandbox = SandboxGuard::new(
        rt.block_on(provider.create(&spec))
            .unwrap_or_else(|e| panic!("create: {e}")),
    );
    let sb = sandbox.get();
    rt.block_on(sb.start())
        .unwrap_or_else(|e| panic!("start: {e}"));
    rt.block_on(assign_static_ipv4(
        sb,
        lab.sandbox_address(),
        lab.profile.gateway_v4(),
    ))
    .unwrap_or_else(|e| panic!("static address: {e}"));

    // corral binds the container's port to the MAC and address it has.
    let mac = rt
        .block_on(sb.exec(&ExecRequest::new(vec![
            "cat".to_owned(),
            "/sys/class/net/eth0/address".to_owned(),
        ])))
        .unwrap_or_else(|e| panic!("read the MAC: {e}"));
    let mac: MacAddr = String::from_utf8_lossy(&mac.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{e}"));
    let binding = lab.bind_sandbox(mac).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("bound {binding:?}");

    let all = [ALLOWED, OTHER_PORT, OTHER_ADDR, gateway, METADATA];

    // Control: bridge, routes and forwarding in place, no corral rules.
    // Every destination answers, so a failure below is the rules' doing.
    for to in all {
        let (ok, detail) = reached(&rt, sb, to);
        assert!(
            ok,
            "control: {to} must be reachable without corral's rules ({detail})"
        );
    }

    let report = lab.apply().unwrap_or_else(|e| panic!("apply: {e}"));
    let drift = lab.verify().unwrap_or_else(|e| panic!("verify: {e}"));
    assert!(
        drift.is_empty(),
        "host differs from the plan after apply: {drift:?}"
    );
    eprintln!(
        "apply: {} rules, {} set elements, {} ms",
        report.rules, report.set_elements, report.ms
    );
    let blocked_before = lab.blocked_packets().unwrap_or_else(|e| panic!("{e}"));

    let (ok, detail) = reached(&rt, sb, ALLOWED);
    assert!(
        ok,
        "the allowlisted {ALLOWED} must stay reachable ({detail})"
    );
    for to in [OTHER_PORT, OTHER_ADDR, gateway, METADATA] {
        let started = Instant::now();
        let (ok, detail) = reached(&rt, sb, to);
        assert!(!ok, "{to} must be blocked by corral's rules ({detail})");
        eprintln!(
            "blocked {to} in {} ms ({detail})",
            started.elapsed().as_millis()
        );
    }
    let blocked_after = lab.blocked_packets().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        blocked_after > blocked_before,
        "the profile's block counters did not move ({blocked_before} → {blocked_after})"
    );
}
