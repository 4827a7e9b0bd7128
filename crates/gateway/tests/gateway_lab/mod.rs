//! Shared by the gateway netns suites: the topology with corral's rules applied,
//! one dnsmasq per bridge, the test upstream, and small probes (DNS, TCP, DHCP).
#![allow(dead_code)]

use corral_drill::lab::{Observed, Probe, Topology, Transport, probe_from};
use corral_egress::host::Host;
use corral_egress::netns::Netns;
use corral_egress::plan::{HostPlan, PlanSettings, SetKind};
use corral_egress::resolve::Resolution;
use corral_gateway::probe::query;
use corral_gateway::test_upstream::TestUpstream;
use corral_gateway::{DnsTiming, Gateway, GatewaySpec};
use corral_sandbox_core::{EgressMode, HostName, Profile, ProfileSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const UPSTREAM: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 53);

pub const STATIC_ADDR: Ipv4Addr = Ipv4Addr::new(192, 175, 48, 1);

pub const ROTATED_ADDR: Ipv4Addr = Ipv4Addr::new(192, 175, 48, 2);

pub const CDN_ADDR: Ipv4Addr = Ipv4Addr::new(192, 175, 48, 3);

pub const PORT: u16 = 443;

pub const T: Duration = Duration::from_millis(1500);

/// The shared builder's profile, but with unresolved hosts allowed: the
/// tests here resolve names through the gateway, not at apply time.
pub fn profile(
    name: &str,
    bridge: &str,
    subnet: &str,
    mode: EgressMode,
    allow: &[&str],
) -> Profile {
    Profile {
        allow_unresolved: true,
        learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
        approvals: Default::default(),
        flows: Default::default(),
        deny: Vec::new(),
        ..corral_egress::plan::test_support::profile(name, bridge, subnet, mode, allow)
    }
}

/// Stops the daemons when the test ends, even on a panic: a dnsmasq left
/// running would keep the host namespace alive.
pub struct Daemons(pub Vec<Gateway>);

impl Drop for Daemons {
    fn drop(&mut self) {
        for gw in &self.0 {
            let _ = gw.stop();
        }
    }
}

pub struct Env {
    pub topo: Topology,
    pub upstream: TestUpstream,
    pub profiles: ProfileSet,
    pub gateways: Daemons,
    pub plan: HostPlan,
    pub state: tempfile::TempDir,
}

/// Builds the topology, applies corral's rules, starts one gateway per
/// profile, with the upstream answering `api.corral.test` → STATIC_ADDR
/// (also the apply-time resolution).
pub fn env(profiles: Vec<Profile>, timing: DnsTiming) -> Env {
    env_with(profiles, timing, |_| {})
}

/// [`env`], with `tweak` changing the plan before it is applied (a
/// control that takes one of corral's rules or bounds away).
pub fn env_with(
    profiles: Vec<Profile>,
    timing: DnsTiming,
    tweak: impl FnOnce(&mut HostPlan),
) -> Env {
    env_planned(profiles, |p| p.clone(), timing, tweak)
}

/// [`env`] with dnsmasq started as for these profiles but the rules
/// planned for them on corral's gateway (`dns = "corral"`: learned sets
/// pinned to the sandbox that asked), for tests that serve the bridge with
/// corral's resolver in dnsmasq's place.
pub fn env_for_corrals_resolver(profiles: Vec<Profile>, timing: DnsTiming) -> Env {
    let corrals = |p: &Profile| Profile {
        dns: corral_sandbox_core::DnsPolicy::Corral,
        ..p.clone()
    };
    env_planned(profiles, corrals, timing, |_| {})
}

fn env_planned(
    profiles: Vec<Profile>,
    planned_as: impl Fn(&Profile) -> Profile,
    timing: DnsTiming,
    tweak: impl FnOnce(&mut HostPlan),
) -> Env {
    let planned = ProfileSet::new(profiles.iter().map(planned_as).collect()).unwrap();
    let profiles = ProfileSet::new(profiles).unwrap();
    let topo = Topology::build(&profiles).unwrap();
    // Addresses the upstream may hand out, each with an echo listener.
    for ip in [UPSTREAM, STATIC_ADDR, ROTATED_ADDR, CDN_ADDR] {
        topo.add_internet_listener(IpAddr::V4(ip), PORT, Transport::Tcp)
            .unwrap();
    }
    let upstream = topo
        .internet
        .run(|| TestUpstream::bind(SocketAddr::new(UPSTREAM.into(), 53)))
        .unwrap()
        .unwrap();
    upstream.set("api.corral.test", &[STATIC_ADDR.into()], 3600);

    let mut resolution = Resolution::new();
    resolution.insert(
        &HostName::new("api.corral.test").unwrap(),
        [IpAddr::V4(STATIC_ADDR)],
    );
    let settings = PlanSettings::default();
    // Every sandbox bound, as corral binds the sandboxes it creates.
    let mut plan = HostPlan::build(&planned, &settings, &resolution)
        .unwrap()
        .with_bindings(&planned, topo.bindings().unwrap())
        .unwrap();
    // The plan is data: give the dynamic sets the timing's timeout (the
    // plan's default, `DNS_SET_TIMEOUT`, is the default timing's 600 s).
    for set in plan
        .inet
        .sets
        .iter_mut()
        .filter(|s| s.kind == SetKind::Dynamic)
    {
        set.timeout = Some(timing.set_timeout);
    }
    tweak(&mut plan);
    Host::in_netns(topo.host.try_clone().unwrap())
        .apply(&plan)
        .unwrap();
    topo.attach_sandboxes(true).unwrap();

    let state = tempfile::tempdir().unwrap();
    corral_gateway::reserve_all(
        state.path(),
        plan.bridges.iter().map(|b| &b.name),
        &plan.bindings,
    )
    .unwrap();
    let mut gateways = Daemons(Vec::new());
    for p in &profiles {
        let spec =
            GatewaySpec::from_profile(p, &[SocketAddr::new(UPSTREAM.into(), 53)], timing).unwrap();
        let gw = Gateway::new(state.path(), &p.bridge);
        gw.start_in(&spec, &topo.host).unwrap();
        gateways.0.push(gw);
    }
    Env {
        topo,
        upstream,
        profiles,
        gateways,
        plan,
        state,
    }
}

pub fn tcp(ns: &Netns, ip: Ipv4Addr) -> Observed {
    probe_from(
        ns,
        &Probe::Tcp {
            to: SocketAddr::new(ip.into(), PORT),
        },
        T,
    )
    .observed
}

pub fn ask(
    ns: &Netns,
    server: Ipv4Addr,
    name: &str,
    qtype: u16,
) -> Result<corral_gateway::wire::Response, String> {
    ns.run(|| query(SocketAddr::new(server.into(), 53), name, qtype, T))
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

pub fn allowlist_profile() -> Profile {
    profile(
        "agent",
        "cb-agent",
        "10.99.7.0/24",
        EgressMode::Allowlist,
        &["api.corral.test", "*.cdn.corral.test"],
    )
}

/// The allowlist profile and a `none` profile beside it (leases only).
pub fn allowlist_and_offline() -> Vec<Profile> {
    vec![
        allowlist_profile(),
        profile(
            "offline",
            "cb-offline",
            "10.99.8.0/24",
            EgressMode::None,
            &[],
        ),
    ]
}

/// Runs busybox udhcpc in `ns` on eth0; returns the lines its script logged.
pub fn dhcp_lease(ns: &Netns, dir: &Path) -> (Vec<String>, Duration) {
    let script = dir.join("udhcpc.sh");
    let log = dir.join("udhcpc.log");
    corral_test_support::write_executable(
        &script,
        format!(
            "#!/bin/sh\necho \"$1 ip=$ip router=$router dns=$dns lease=$lease\" >> {}\n",
            log.display()
        ),
    );
    let mut cmd = Command::new("busybox");
    cmd.args([
        "udhcpc", "-i", "eth0", "-n", "-q", "-f", "-t", "6", "-T", "1", "-s",
    ])
    .arg(&script)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    let start = Instant::now();
    let status = ns.spawn(cmd).unwrap().wait().unwrap();
    let took = start.elapsed();
    assert!(status.success(), "udhcpc got no lease ({status})");
    let lines = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("bound"))
        .map(str::to_owned)
        .collect();
    (lines, took)
}

/// A TCP probe to `ip:port` from `ns`.
pub fn tcp_to(ns: &Netns, ip: IpAddr, port: u16) -> Observed {
    probe_from(
        ns,
        &Probe::Tcp {
            to: SocketAddr::new(ip, port),
        },
        T,
    )
    .observed
}
