//! corral's three built-in profiles (`isolated`, `internet`, `allowlist`:
//! bridges `corral-iso`, `corral-net`, `corral-allow`) in the HOST network
//! namespace, with a verification section, for per-sandbox canary tests on
//! real Incus containers.
//!
//! ```text
//!  containers ── corral-iso/-net/-allow ── host ── veth ── dest netns
//!                                                  203.0.113.253/30 ↔ .254
//!                                                  2001:db8:ffff::1/126 ↔ ::2
//!  dest lo: 203.0.113.10 (the built-in allowlist's entry), 198.51.100.7
//!  (the canary), 2001:db8::7 (the IPv6 canary), each listening on 443.
//! ```
//!
//! Like [`crate::hostlab`], it refuses to start on a host with corral state,
//! holds the host lock, and undoes everything on drop (teardown through
//! corral's service, policy rules, the veth, sysctls). Routing keeps every
//! probe on this machine: traffic arriving from the three bridges looks up
//! a private table whose default route is the destination namespace (which
//! forwards nothing; an `unreachable` rule backs it up); the host's own
//! traffic to the canary addresses (the controls) looks up the same table;
//! nothing else of the host's traffic changes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use corral_drill::lab::{Listeners, Transport};
use corral_egress::host::plan_settings;
use corral_egress::link::Links;
use corral_egress::netns::Netns;
use corral_egress::plan::{HostPlan, SysctlPlan};
use corral_egress::resolve::Resolution;
use corral_egress::sysctl::Sysctls;
use corral_gateway::test_upstream::TestUpstream;
use corral_sandbox_core::Config;
use ipnet::{IpNet, Ipv6Net};
use netlink_packet_route::rule::{RuleAction, RuleMessage};

use crate::hostlab::{LabError, netlink_error, preflight, v4net};

/// The canary: must be blocked on `isolated` and `allowlist`, reached on `internet`.
pub const CANARY: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)), 443);
/// The IPv6 canary.
pub const CANARY_V6: SocketAddr = SocketAddr::new(
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 7)),
    443,
);
/// The built-in allowlist profile's first entry, which its canary connects to.
pub const ALLOWED: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(203, 0, 113, 10)), 443);
/// A name on no allowlist; the lab's upstream resolves it, the gateway must not.
pub const UNLISTED: &str = "unlisted.corral.test";
/// The built-in profiles' bridges.
pub const BRIDGES: [&str; 3] = ["corral-iso", "corral-net", "corral-allow"];
/// Each check's bound in the lab's configuration.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

const LINK_HOST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 253);
const LINK_DEST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 254);
const LINK6_HOST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 1);
const LINK6_DEST: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 2);

/// The built-in profiles applied for real, a destination namespace behind
/// them, and the guard that removes all of it.
#[derive(Debug)]
pub struct BuiltinLab {
    dir: tempfile::TempDir,
    veth: String,
    rules: Vec<(bool, RuleMessage)>,
    saved_sysctls: Vec<(String, String)>,
    _upstream: TestUpstream,
    _listeners: Listeners,
    dest: Netns,
    table: u32,
    // Last: released after everything above is torn down.
    _lock: corral_test_support::HostLock,
}

impl BuiltinLab {
    /// Check the host is free of corral state, then build the destination
    /// namespace, the routes and the configuration file. Nothing is
    /// applied: run `corral host apply` with [`Self::config_path`] and
    /// [`Self::state_dir`] (or [`Self::apply`]).
    pub fn new() -> Result<Self, LabError> {
        Self::build(true)
    }

    /// The same lab on a *default host*: the configuration sets nothing in
    /// `[host.verification]` (only the lab's upstream resolver), so the
    /// canary runs against corral's own targets. After `corral host apply`
    /// call [`Self::route_own_targets`]: the lab sends the bridges'
    /// traffic to its destination namespace, and corral's targets must be
    /// reached through their own veth instead.
    pub fn default_host() -> Result<Self, LabError> {
        Self::build(false)
    }

    fn build(verification: bool) -> Result<Self, LabError> {
        let lock = corral_test_support::HostLock::acquire();
        let n = std::process::id() % 200;
        let veth = format!("cvl{n}v");
        let priority = 8000 + n * 4;
        let here = Netns::current()?;
        let mut names: Vec<&str> = BRIDGES.to_vec();
        names.push(&veth);
        names.push(corral_egress::own_targets::VETH);
        preflight(&here, &names, &[priority, priority + 1, priority + 2])?;

        let upstream_ip = Ipv4Addr::new(127, 84, u8::try_from(n).unwrap_or(0), 53);
        let upstream = TestUpstream::bind(SocketAddr::new(IpAddr::V4(upstream_ip), 53))?;
        upstream.set(UNLISTED, &[IpAddr::V4(Ipv4Addr::new(198, 18, 77, 20))], 30);
        let dir = tempfile::tempdir()?;
        let text = config_text(upstream_ip, verification);
        std::fs::write(dir.path().join("corral.toml"), &text)?;
        let config =
            Config::from_toml_str(&text, "lab").map_err(|e| LabError::Plan(e.to_string()))?;
        let plan = HostPlan::build(
            &config.profiles,
            &plan_settings(&config.host),
            &Resolution::new(),
        )
        .map_err(|e| LabError::Plan(e.to_string()))?;
        let sysctls = Sysctls::default();
        let mut saved_sysctls = Vec::new();
        for s in &plan.sysctls {
            if let Some(v) = sysctls.read(&s.key)? {
                saved_sysctls.push((s.key.clone(), v));
            }
        }
        let dest = Netns::new()?;
        let listeners = Listeners::start(&dest)?;
        let mut lab = Self {
            dir,
            veth,
            rules: Vec::new(),
            saved_sysctls,
            _upstream: upstream,
            _listeners: listeners,
            dest,
            table: 0x00c1_0000 + priority,
            _lock: lock,
        };
        // From here on `lab` is dropped (and cleans up) on any error.
        lab.build_destination()?;
        lab.rules = lab.add_rules(priority)?;
        Ok(lab)
    }

    /// The configuration file: the built-in profiles, the lab's upstream
    /// resolver and a `[host.verification]` section naming the canaries.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("corral.toml")
    }

    /// The state directory for `--state-dir`.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// `corral host apply` through the service (the CLI does the same).
    pub fn apply(&self) -> Result<(), LabError> {
        let loaded = corral_service::config::load_file(
            &self.config_path(),
            corral_sandbox_core::config::ConfigFormat::Toml,
        )
        .map_err(|e| LabError::Plan(e.to_string()))?;
        let planned =
            corral_service::host::plan_config(loaded).map_err(|e| LabError::Plan(e.to_string()))?;
        let target =
            corral_service::Target::open(None).map_err(|e| LabError::Plan(e.to_string()))?;
        corral_service::HostService::new(target, self.state_dir())
            .apply(&planned)
            .map_err(|e| LabError::Plan(corral_service::error::chain(&e)))?;
        Ok(())
    }

    /// Route the bridges' traffic for corral's own targets (made by `corral
    /// host apply` on a default host) through corral's veth, ahead of the
    /// lab's default route into its destination namespace. The routes go
    /// with the veth when corral removes it.
    pub fn route_own_targets(&self) -> Result<(), LabError> {
        let table = self.table;
        Netns::current()?.run_async(|| async move {
            let links = Links::connect()?;
            let veth = links.require(corral_egress::own_targets::VETH).await?;
            let v4 = rtnetlink::RouteMessageBuilder::<Ipv4Addr>::new()
                .destination_prefix(corral_egress::own_targets::HOST_V4, 30)
                .output_interface(veth.index)
                .table_id(table)
                .build();
            let v6 = rtnetlink::RouteMessageBuilder::<Ipv6Addr>::new()
                .destination_prefix(Ipv6Addr::new(0x2001, 0xdb8, 0xca7, 0, 0, 0, 0, 0), 64)
                .output_interface(veth.index)
                .table_id(table)
                .build();
            for msg in [v4, v6] {
                links
                    .handle()
                    .route()
                    .add(msg)
                    .execute()
                    .await
                    .map_err(|e| netlink_error("route corral's own targets", e))?;
            }
            Ok::<_, LabError>(())
        })?
    }

    fn build_destination(&self) -> Result<(), LabError> {
        let veth = self.veth.clone();
        let dest_fd = self.dest.fd();
        Netns::current()?.run_async(|| async {
            let links = Links::connect()?;
            links.create_veth(&veth, "eth0", Some(dest_fd)).await?;
            links.add_address(&veth, v4net(LINK_HOST, 30)).await?;
            links.add_address(&veth, v6net(LINK6_HOST, 126)).await?;
            links.set_up(&veth).await
        })??;
        self.dest.run_async(|| async {
            let links = Links::connect()?;
            links.add_address("eth0", v4net(LINK_DEST, 30)).await?;
            links.add_address("eth0", v6net(LINK6_DEST, 126)).await?;
            links.set_up("eth0").await?;
            for ip in [ALLOWED.ip(), CANARY.ip(), CANARY_V6.ip()] {
                links.add_address("lo", IpNet::from(ip)).await?;
            }
            // Replies to sandboxes that are not masqueraded (a none-mode
            // profile whose block rule was removed behind corral's back).
            links.add_default_route(IpAddr::V4(LINK_HOST)).await?;
            links.add_default_route(IpAddr::V6(LINK6_HOST)).await
        })??;
        // Port unreachable for the foreign-resolver probe must not be rate
        // limited away between the control and the sandbox's probe.
        let no_limit = Sysctls::default();
        self.dest.run(|| {
            for key in ["net.ipv4.icmp_ratelimit", "net.ipv6.icmp.ratelimit"] {
                no_limit.apply_one(&SysctlPlan {
                    key: key.to_owned(),
                    value: "0".to_owned(),
                    reason: "lab".to_owned(),
                })?;
            }
            Ok::<_, corral_egress::sysctl::SysctlError>(())
        })??;
        for (addr, t) in [
            (ALLOWED, Transport::Tcp),
            (CANARY, Transport::Tcp),
            (CANARY, Transport::Udp),
            (CANARY_V6, Transport::Tcp),
        ] {
            self._listeners.add(addr, t)?;
        }
        Ok(())
    }

    /// The private table's routes; `iif <bridge> lookup`, `iif <bridge>
    /// unreachable` (v4 and v6) for each bridge; `to <canary> lookup` for the
    /// host's own controls. Returns the rules (with their family) to delete.
    fn add_rules(&self, priority: u32) -> Result<Vec<(bool, RuleMessage)>, LabError> {
        let table = 0x00c1_0000 + priority;
        Netns::current()?.run_async(|| async move {
            let links = Links::connect()?;
            let handle = links.handle();
            // Everything from the bridges goes to the destination namespace
            // (which forwards nothing), so corral's forward rules see every
            // probe, as they would behind a real uplink.
            for (d, len) in [
                (Ipv4Addr::UNSPECIFIED, 0),
                (Ipv4Addr::new(198, 51, 100, 7), 32),
            ] {
                let msg = rtnetlink::RouteMessageBuilder::<Ipv4Addr>::new()
                    .destination_prefix(d, len)
                    .gateway(LINK_DEST)
                    .table_id(table)
                    .build();
                handle
                    .route()
                    .add(msg)
                    .execute()
                    .await
                    .map_err(|e| netlink_error(&format!("add route {d} table {table}"), e))?;
            }
            let IpAddr::V6(c6) = CANARY_V6.ip() else {
                return Err(LabError::Plan("the IPv6 canary is not IPv6".into()));
            };
            for (d, len) in [(Ipv6Addr::UNSPECIFIED, 0), (c6, 128)] {
                let msg = rtnetlink::RouteMessageBuilder::<Ipv6Addr>::new()
                    .destination_prefix(d, len)
                    .gateway(LINK6_DEST)
                    .table_id(table)
                    .build();
                handle
                    .route()
                    .add(msg)
                    .execute()
                    .await
                    .map_err(|e| netlink_error(&format!("add route {d}/{len} table {table}"), e))?;
            }
            let mut rules = Vec::new();
            for v6 in [false, true] {
                for bridge in BRIDGES {
                    for (prio, action) in [
                        (priority + 1, RuleAction::ToTable),
                        (priority + 2, RuleAction::Unreachable),
                    ] {
                        let base = handle
                            .rule()
                            .add()
                            .input_interface(bridge.to_owned())
                            .priority(prio)
                            .action(action);
                        let table = (action == RuleAction::ToTable).then_some(table);
                        let msg = if v6 {
                            let mut r = base.v6();
                            if let Some(t) = table {
                                r = r.table_id(t);
                            }
                            let m = r.message_mut().clone();
                            r.execute().await.map(|()| m)
                        } else {
                            let mut r = base.v4();
                            if let Some(t) = table {
                                r = r.table_id(t);
                            }
                            let m = r.message_mut().clone();
                            r.execute().await.map(|()| m)
                        };
                        let msg = msg.map_err(|e| {
                            netlink_error(&format!("add rule iif {bridge} priority {prio}"), e)
                        })?;
                        rules.push((v6, msg));
                    }
                }
            }
            // The host's own controls reach the canaries in the lab, never
            // through the machine's uplink.
            let mut r = handle
                .rule()
                .add()
                .v4()
                .destination_prefix(Ipv4Addr::new(198, 51, 100, 7), 32)
                .priority(priority)
                .action(RuleAction::ToTable)
                .table_id(table);
            let m = r.message_mut().clone();
            r.execute()
                .await
                .map_err(|e| netlink_error("add rule to the canary", e))?;
            rules.push((false, m));
            let mut r = handle
                .rule()
                .add()
                .v6()
                .destination_prefix(c6, 128)
                .priority(priority)
                .action(RuleAction::ToTable)
                .table_id(table);
            let m = r.message_mut().clone();
            r.execute()
                .await
                .map_err(|e| netlink_error("add rule to the IPv6 canary", e))?;
            rules.push((true, m));
            Ok::<_, LabError>(rules)
        })?
    }

    /// Remove everything; keep going past failures and return every error.
    pub fn cleanup(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        match corral_service::Target::open(None) {
            Ok(t) => match corral_service::HostService::new(t, self.state_dir()).teardown() {
                Ok(report) => errors.extend(report.errors),
                Err(e) => errors.push(format!("teardown: {e}")),
            },
            Err(e) => errors.push(format!("teardown: {e}")),
        }
        let rules = std::mem::take(&mut self.rules);
        let veth = self.veth.clone();
        let removed = Netns::current().and_then(|here| {
            here.run_async(|| async move {
                let mut errs = Vec::new();
                let links = match Links::connect() {
                    Ok(l) => l,
                    Err(e) => return vec![e.to_string()],
                };
                for (_, rule) in rules {
                    if let Err(e) = links.handle().rule().del(rule).execute().await {
                        errs.push(format!("delete policy rule: {e}"));
                    }
                }
                if links.get(&veth).await.ok().flatten().is_some()
                    && let Err(e) = links.delete(&veth).await
                {
                    errs.push(e.to_string());
                }
                errs
            })
        });
        match removed {
            Ok(errs) => errors.extend(errs),
            Err(e) => errors.push(format!("remove the lab's links: {e}")),
        }
        let sysctls = Sysctls::default();
        for (key, value) in std::mem::take(&mut self.saved_sysctls) {
            let plan = SysctlPlan {
                key: key.clone(),
                value,
                reason: "restore the value from before the test".into(),
            };
            if let Err(e) = sysctls.apply_one(&plan) {
                errors.push(format!("restore {key}: {e}"));
            }
        }
        errors
    }
}

impl Drop for BuiltinLab {
    fn drop(&mut self) {
        for e in self.cleanup() {
            eprintln!("builtin lab cleanup: {e}");
        }
    }
}

/// The built-in profiles with the lab's host settings.
fn config_text(upstream: Ipv4Addr, verification: bool) -> String {
    let mut c = Config::builtin_default();
    c.host.dns_upstreams = vec![IpAddr::V4(upstream)];
    if !verification {
        return c.to_toml_string();
    }
    let v = &mut c.host.verification;
    v.canary = Some(CANARY);
    v.canary_v6 = match CANARY_V6 {
        SocketAddr::V6(a) => Some(a),
        SocketAddr::V4(_) => None,
    };
    v.unlisted_name = corral_sandbox_core::HostName::new(UNLISTED).ok();
    v.options.check_timeout = CHECK_TIMEOUT;
    c.to_toml_string()
}

fn v6net(a: Ipv6Addr, len: u8) -> IpNet {
    IpNet::V6(Ipv6Net::new(a, len).unwrap_or_else(|_| Ipv6Net::from(a)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lab_configuration_is_the_builtin_profiles_with_canaries() {
        let text = config_text(Ipv4Addr::new(127, 84, 1, 53), true);
        let c = Config::from_toml_str(&text, "lab").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.profiles, Config::builtin_default().profiles);
        assert_eq!(c.host.verification.canary, Some(CANARY));
        assert!(c.host.verification.kinds.is_empty());
        let bridges: Vec<String> = c.profiles.iter().map(|p| p.bridge.to_string()).collect();
        assert_eq!(bridges, BRIDGES);
        let bare = config_text(Ipv4Addr::new(127, 84, 1, 53), false);
        let c = Config::from_toml_str(&bare, "lab").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(c.host.verification, Default::default());
        // Only the defaults: no canary of any kind, so corral brings its own.
        assert!(!bare.contains("canary"), "{bare}");
    }
}
