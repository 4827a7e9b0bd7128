//! A corral profile bridge in the HOST network namespace, for tests that
//! attach real Incus containers (Incus runs in the host namespace, so its
//! containers can only join host bridges).
//!
//! ```text
//!  container ──(Incus NIC)── bridge ce2eN ── host ── veth ── dest netns
//!  10.251.N.10/24            10.251.N.1/24           203.0.113.253/30 ↔ .254
//!                                                    lo: 198.51.100.10, .20,
//!                                                        169.254.169.254
//! ```
//!
//! Operator safety, because this touches the real host:
//! - [`HostLab::new`] refuses to start when the host already has a corral
//!   table or a corral-stamped bridge (teardown would remove them), or when
//!   the chosen bridge, veth or routing rule priority is taken.
//! - Only traffic *arriving from the test bridge* is routed to the
//!   destination namespace: a policy rule (`iif <bridge>`) selects a private
//!   table holding the destination routes and then an `unreachable` rule,
//!   so nothing the container sends can reach the host's real uplink, and
//!   the host's own traffic (to 169.254.169.254 included) is untouched.
//! - [`Drop`] undoes everything, even while unwinding from a panic:
//!   corral's teardown through the host facade, the rules and routes, the
//!   veth (its peer and the destination namespace go with it) and the
//!   sysctls corral wrote, restored to the values they had before.

mod config;
use config::{
    ApplyShape, apply_config, dns_allowed, dns_unlisted, lab_resolution, profile_config,
    upstream_v4,
};
mod preflight;
pub(crate) use preflight::preflight;

use corral_drill::lab::{Listeners, Transport};
use corral_egress::host::{ApplyReport, Host, HostDrift, HostError, plan_settings};
use corral_egress::link::{LinkError, Links};
use corral_egress::netns::Netns;
use corral_egress::nft;
use corral_egress::plan::{HostPlan, MacAddr, PortBinding, SysctlPlan};
use corral_egress::sysctl::Sysctls;
use corral_gateway::test_upstream::TestUpstream;
use corral_sandbox_core::sandbox::NetworkAttachment;
use corral_sandbox_core::{Config, InterfaceName, Profile, ProfileSet};
use ipnet::{IpNet, Ipv4Net};
use netlink_packet_route::rule::{RuleAction, RuleMessage};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

pub mod v6;

/// The allowed destination (`allow = ["198.51.100.10:8080/tcp"]`).
pub const ALLOWED: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10)), 8080);

/// The allowed address on a port the profile does not allow.
pub const OTHER_PORT: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 10)), 8081);

/// An address the profile does not allow, on the allowed port.
pub const OTHER_ADDR: SocketAddr =
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(198, 51, 100, 20)), 8080);

/// The cloud metadata address.
pub const METADATA: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(169, 254, 169, 254)), 80);

/// A TCP service on the gateway (the host) that is not DNS.
pub const GATEWAY_PORT: u16 = 2222;

/// The allowlisted name of [`HostLab::for_apply`]'s profile; the lab's
/// resolver answers it with [`HostLab::dns_allowed`].
pub const ALLOWED_NAME: &str = "allowed.corral.test";

/// A name on no allowlist; the lab's resolver would answer it with
/// [`HostLab::dns_unlisted`].
pub const UNLISTED_NAME: &str = "unlisted.corral.test";

/// The port the DNS-reached destinations listen on.
pub const DNS_PORT: u16 = 8080;

/// Host side of the link to the destination namespace.
const LINK_HOST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 253);

/// Destination side of that link.
const LINK_DEST: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 254);

const LINK_PREFIX: u8 = 30;

/// Why the lab could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Setting up would replace or remove state this test did not create.
    #[error("refusing to run: {0}")]
    Refused(String),
    /// A namespace or socket operation failed.
    #[error("host lab: {0}")]
    Io(#[from] io::Error),
    /// A link, address, route or rule operation failed.
    #[error("host lab: {0}")]
    Link(#[from] LinkError),
    /// corral's host facade failed.
    #[error("host lab: {0}")]
    Host(#[from] HostError),
    /// A netlink request this module makes itself failed.
    #[error("host lab: {0}")]
    Netlink(String),
    /// Reading corral's nftables tables failed.
    #[error("host lab: {0}")]
    Nft(#[from] nft::NftError),
    /// A sysctl could not be read or written.
    #[error("host lab: {0}")]
    Sysctl(#[from] corral_egress::sysctl::SysctlError),
    /// The test profile or plan could not be built.
    #[error("host lab: {0}")]
    Plan(String),
}

/// One allowlist profile's bridge on the host, a destination namespace
/// behind it, and the guard that removes all of it.
#[derive(Debug)]
pub struct HostLab {
    /// The profile (one allowlist entry: [`ALLOWED`]).
    pub profile: Profile,
    /// corral's plan for it.
    pub plan: HostPlan,
    veth: String,
    table: u32,
    rules: Vec<RuleMessage>,
    saved_sysctls: Vec<(String, String)>,
    host: Host,
    _dest: Netns,
    _dest_listeners: Listeners,
    gateway_listeners: Option<Listeners>,
    n: u32,
    apply: Option<ApplyParts>,
    // Last field: released after everything above is torn down.
    _lock: corral_test_support::HostLock,
}

/// What [`HostLab::for_apply`] adds: a configuration file for `corral
/// host apply`, its state directory, and the upstream resolver its gateway
/// forwards to.
#[derive(Debug)]
struct ApplyParts {
    dir: tempfile::TempDir,
    _upstream: TestUpstream,
}

impl HostLab {
    /// Checks the host is free of corral state, then builds the destination
    /// namespace, the policy routes and the profile bridge (with corral's
    /// stamp and gateway address, exactly as `apply` makes it) but NO rules:
    /// the control state, in which every probe must succeed.
    pub fn new() -> Result<Self, LabError> {
        let mut lab = Self::build(None)?;
        let bridge_plan = lab.plan.bridges.first().cloned();
        let here = Netns::current()?;
        here.run_async(|| async {
            let links = Links::connect()?;
            if let Some(b) = &bridge_plan {
                links.ensure_bridge(b).await?;
            }
            Ok::<_, LinkError>(())
        })??;
        // Forwarding is needed for the control as well; apply writes the
        // same values.
        Sysctls::default().apply(&lab.plan.sysctls)?;
        let gw = Listeners::start(&here)?;
        gw.add(
            SocketAddr::new(IpAddr::V4(lab.profile.gateway_v4()), GATEWAY_PORT),
            Transport::Tcp,
        )?;
        lab.gateway_listeners = Some(gw);
        Ok(lab)
    }

    /// The destination namespace, routes and an upstream resolver, but no
    /// bridge and no rules: `corral host apply --config` [`Self::config_path`]
    /// `--state-dir` [`Self::state_dir`] makes those (and the gateway). The
    /// profile allows only [`ALLOWED_NAME`], learned through the gateway
    /// resolver; the upstream answers it with [`Self::dns_allowed`] and
    /// [`UNLISTED_NAME`] with [`Self::dns_unlisted`]. Drop tears down what
    /// the apply made (gateways included) through corral's service.
    pub fn for_apply() -> Result<Self, LabError> {
        Self::for_apply_with(ApplyShape::default())
    }

    /// [`Self::for_apply`] with IPv6: the profile also has a /64
    /// ([`v6::subnet`]) and allows [`v6::ALLOWED6`]; the destination
    /// namespace also answers on [`v6::UNLISTED6`], which it does not.
    pub fn for_apply_v6() -> Result<Self, LabError> {
        Self::for_apply_with(ApplyShape {
            v6: true,
            corrals_gateway: false,
        })
    }

    /// [`Self::for_apply_v6`] with `dns = "corral"`: no dnsmasq serves the
    /// bridge; corral's gateway (resolver, DHCP server, router
    /// advertisements) does, once corrald or `corral host watch` hosts it.
    pub fn for_apply_on_corrals_gateway() -> Result<Self, LabError> {
        Self::for_apply_with(ApplyShape {
            v6: true,
            corrals_gateway: true,
        })
    }

    fn for_apply_with(shape: ApplyShape) -> Result<Self, LabError> {
        let mut lab = Self::build(Some(shape))?;
        let n = lab.n;
        let upstream = TestUpstream::bind(SocketAddr::new(IpAddr::V4(upstream_v4(n)), 53))?;
        upstream.set(ALLOWED_NAME, &[IpAddr::V4(dns_allowed(n))], 30);
        upstream.set(UNLISTED_NAME, &[IpAddr::V4(dns_unlisted(n))], 30);
        let dir = tempfile::tempdir()?;
        std::fs::write(
            dir.path().join("corral.toml"),
            apply_config(lab.profile.bridge.as_str(), n, shape),
        )?;
        lab.apply = Some(ApplyParts {
            dir,
            _upstream: upstream,
        });
        Ok(lab)
    }

    /// The configuration file [`Self::for_apply`] wrote.
    pub fn config_path(&self) -> std::path::PathBuf {
        self.apply
            .as_ref()
            .map(|a| a.dir.path().join("corral.toml"))
            .unwrap_or_default()
    }

    /// The state directory for `--state-dir`.
    pub fn state_dir(&self) -> std::path::PathBuf {
        self.apply
            .as_ref()
            .map(|a| a.dir.path().join("state"))
            .unwrap_or_default()
    }

    /// The destination [`ALLOWED_NAME`] resolves to.
    pub fn dns_allowed(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(dns_allowed(self.n)), DNS_PORT)
    }

    /// The destination [`UNLISTED_NAME`] resolves to (on no allowlist).
    pub fn dns_unlisted(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(dns_unlisted(self.n)), DNS_PORT)
    }

    /// The lab; `apply`: for `corral host apply` (its configuration's
    /// shape), `None`: the plain profile of [`Self::new`].
    fn build(apply: Option<ApplyShape>) -> Result<Self, LabError> {
        let v6 = apply.is_some_and(|a| a.v6);
        // One test at a time changes the host namespace, across test
        // binaries too.
        let lock = corral_test_support::HostLock::acquire();
        let n = 20 + std::process::id() % 200;
        let bridge = format!("ce2e{n}");
        let veth = format!("ce2e{n}v");
        let config = match apply {
            Some(shape) => apply_config(&bridge, n, shape),
            None => profile_config(&bridge, n),
        };
        let config = Config::from_toml_str(&config, "hostlab.toml")
            .map_err(|e| LabError::Plan(e.to_string()))?;
        let profile = config
            .profiles
            .iter()
            .next()
            .cloned()
            .ok_or_else(|| LabError::Plan("the test configuration has no profile".into()))?;
        let plan = HostPlan::build(
            &config.profiles,
            &plan_settings(&config.host),
            &lab_resolution(),
        )
        .map_err(|e| LabError::Plan(e.to_string()))?;
        let table = 0x00c0_0000 + n;
        let priority = 9000 + n * 2;
        let here = Netns::current()?;
        preflight(
            &here,
            &[bridge.as_str(), veth.as_str()],
            &[priority, priority + 1],
        )?;

        let sysctls = Sysctls::default();
        let mut saved_sysctls = Vec::new();
        for s in &plan.sysctls {
            if let Some(v) = sysctls.read(&s.key)? {
                saved_sysctls.push((s.key.clone(), v));
            }
        }

        let dest = Netns::new()?;
        let mut lab = Self {
            profile,
            plan,
            veth,
            table,
            rules: Vec::new(),
            saved_sysctls,
            host: Host::current()?,
            _dest_listeners: Listeners::start(&dest)?,
            _dest: dest,
            gateway_listeners: None,
            n,
            apply: None,
            _lock: lock,
        };
        // From here on `lab` is dropped (and cleans up) on any error.
        lab.build_destination()?;
        lab.rules = lab.add_policy_routes(&bridge, priority)?;
        if v6 {
            v6::build_destination(&lab)?;
            let rules = v6::add_policy_routes(&lab, &bridge, priority)?;
            lab.rules.extend(rules);
        }
        Ok(lab)
    }

    /// What a provider needs to put a sandbox on the lab's bridge.
    pub fn attachment(&self) -> NetworkAttachment {
        NetworkAttachment::for_profile(&self.profile, Vec::new())
    }

    /// The static address the test gives its container.
    pub fn sandbox_address(&self) -> Ipv4Net {
        let base = u32::from(self.profile.subnet_v4.network());
        Ipv4Net::new(
            Ipv4Addr::from(base + 10),
            self.profile.subnet_v4.prefix_len(),
        )
        .unwrap_or(self.profile.subnet_v4)
    }

    /// Binds the lab bridge's one port (the container's NIC) to `mac` and
    /// [`HostLab::sandbox_address`], from the provider's view: the MAC the
    /// guest reports, the port the bridge has. An unbound port gets
    /// nothing but DHCP once corral's rules are applied.
    pub fn bind_sandbox(&mut self, mac: MacAddr) -> Result<PortBinding, LabError> {
        let bridge = self.profile.bridge.clone();
        let ports = Netns::current()?
            .run_async(|| async { Links::connect()?.ports_of(bridge.as_str()).await })??;
        let [port] = ports.as_slice() else {
            return Err(LabError::Plan(format!(
                "the lab bridge has {} ports, expected the container's only",
                ports.len()
            )));
        };
        let binding = PortBinding {
            port: InterfaceName::new(port.name.clone())
                .map_err(|e| LabError::Plan(e.to_string()))?,
            bridge,
            mac,
            v4: self.sandbox_address().addr(),
            v6: None,
        };
        let profiles = ProfileSet::new(vec![self.profile.clone()])
            .map_err(|e| LabError::Plan(e.to_string()))?;
        self.plan = self
            .plan
            .with_bindings(&profiles, vec![binding.clone()])
            .map_err(|e| LabError::Plan(e.to_string()))?;
        Ok(binding)
    }

    /// Applies corral's plan through the host facade.
    pub fn apply(&self) -> Result<ApplyReport, HostError> {
        self.host.apply(&self.plan)
    }

    /// Every difference between the plan and the live host.
    pub fn verify(&self) -> Result<Vec<HostDrift>, HostError> {
        self.host.verify(&self.plan)
    }

    /// Packets blocked by the profile's rules so far (from the live counters).
    pub fn blocked_packets(&self) -> Result<u64, LabError> {
        let status = self.host.status(&self.plan)?;
        Ok(status.counters.iter().map(|c| c.blocked_packets).sum())
    }

    fn build_destination(&self) -> Result<(), LabError> {
        let veth = self.veth.clone();
        let dest_fd = self._dest.fd();
        Netns::current()?.run_async(|| async {
            let links = Links::connect()?;
            links.create_veth(&veth, "eth0", Some(dest_fd)).await?;
            links
                .add_address(&veth, v4net(LINK_HOST, LINK_PREFIX))
                .await?;
            links.set_up(&veth).await
        })??;
        let subnet = IpNet::V4(self.profile.subnet_v4);
        let n = self.n;
        self._dest.run_async(|| async {
            let links = Links::connect()?;
            links
                .add_address("eth0", v4net(LINK_DEST, LINK_PREFIX))
                .await?;
            links.set_up("eth0").await?;
            for ip in [
                ALLOWED.ip(),
                OTHER_ADDR.ip(),
                METADATA.ip(),
                dns_allowed(n).into(),
                dns_unlisted(n).into(),
            ] {
                links.add_address("lo", IpNet::from(ip)).await?;
            }
            // Replies to the sandbox subnet (before corral's masquerade).
            links.add_route(subnet, IpAddr::V4(LINK_HOST)).await
        })??;
        for addr in [
            ALLOWED,
            OTHER_PORT,
            OTHER_ADDR,
            METADATA,
            self.dns_allowed(),
            self.dns_unlisted(),
        ] {
            self._dest_listeners.add(addr, Transport::Tcp)?;
        }
        Ok(())
    }

    /// `iif <bridge> lookup <table>` then `iif <bridge> unreachable`; the
    /// table routes the destinations to the destination namespace.
    fn add_policy_routes(&self, bridge: &str, priority: u32) -> Result<Vec<RuleMessage>, LabError> {
        let table = self.table;
        let bridge = bridge.to_owned();
        let dns_net = format!("{}/24", dns_allowed(self.n));
        let rules =
            Netns::current()?.run_async(|| async move {
                let links = Links::connect()?;
                let handle = links.handle();
                for dest in ["198.51.100.0/24", "169.254.169.254/32", dns_net.as_str()] {
                    let dest: Ipv4Net = dest
                        .parse::<Ipv4Net>()
                        .map(|d| d.trunc())
                        .unwrap_or_default();
                    let msg = rtnetlink::RouteMessageBuilder::<Ipv4Addr>::new()
                        .destination_prefix(dest.addr(), dest.prefix_len())
                        .gateway(LINK_DEST)
                        .table_id(table)
                        .build();
                    handle.route().add(msg).execute().await.map_err(|e| {
                        netlink_error(&format!("add route {dest} table {table}"), e)
                    })?;
                }
                let mut rules = Vec::new();
                for (prio, action) in [
                    (priority, RuleAction::ToTable),
                    (priority + 1, RuleAction::Unreachable),
                ] {
                    let mut req = handle
                        .rule()
                        .add()
                        .v4()
                        .input_interface(bridge.clone())
                        .priority(prio)
                        .action(action);
                    if action == RuleAction::ToTable {
                        req = req.table_id(table);
                    }
                    let msg = req.message_mut().clone();
                    req.execute()
                        .await
                        .map_err(|e| netlink_error(&format!("add rule priority {prio}"), e))?;
                    rules.push(msg);
                }
                Ok::<_, LabError>(rules)
            })??;
        Ok(rules)
    }

    /// Removes everything the lab made; keeps going past failures and
    /// returns every error.
    pub fn cleanup(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        // What `corral host apply` made (gateways included) goes through
        // corral's own teardown; the plain lab only has tables and a bridge.
        let teardown = match &self.apply {
            Some(_) => corral_service::Target::open(None)
                .map_err(|e| e.to_string())
                .and_then(|t| {
                    corral_service::HostService::new(t, self.state_dir())
                        .teardown()
                        .map_err(|e| e.to_string())
                }),
            None => self.host.teardown().map_err(|e| e.to_string()),
        };
        match teardown {
            Ok(report) => errors.extend(report.errors),
            Err(e) => errors.push(format!("teardown: {e}")),
        }
        self.gateway_listeners = None;
        let rules = std::mem::take(&mut self.rules);
        let veth = self.veth.clone();
        let removed = Netns::current().and_then(|here| {
            here.run_async(|| async move {
                let mut errs = Vec::new();
                let links = match Links::connect() {
                    Ok(l) => l,
                    Err(e) => return vec![e.to_string()],
                };
                for rule in rules {
                    if let Err(e) = links.handle().rule().del(rule).execute().await {
                        errs.push(format!("delete policy rule: {e}"));
                    }
                }
                if links.get(&veth).await.ok().flatten().is_some()
                    && let Err(e) = links.delete(&veth).await
                {
                    errs.push(e.to_string());
                }
                // The lab table's routes go via the veth, so they went with it.
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

impl Drop for HostLab {
    fn drop(&mut self) {
        for e in self.cleanup() {
            eprintln!("host lab cleanup: {e}");
        }
    }
}

fn octet(n: u32) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

pub(crate) fn netlink_error(what: &str, e: rtnetlink::Error) -> LabError {
    LabError::Netlink(format!("{what}: {e}"))
}

pub(crate) fn v4net(a: Ipv4Addr, len: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new(a, len).unwrap_or_else(|_| Ipv4Net::from(a)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_egress::plan::Resolution;

    #[test]
    fn the_lab_profile_is_valid_and_allows_exactly_the_allowed_destination() {
        let config = Config::from_toml_str(&profile_config("ce2e42", 42), "t")
            .unwrap_or_else(|e| panic!("{e}"));
        let p = config
            .profiles
            .get("e2e")
            .unwrap_or_else(|| panic!("profile"));
        assert_eq!(p.bridge.as_str(), "ce2e42");
        assert_eq!(p.gateway_v4(), Ipv4Addr::new(10, 251, 42, 1));
        assert_eq!(p.allow.len(), 1);
        let plan = HostPlan::build(
            &config.profiles,
            &plan_settings(&config.host),
            &Resolution::new(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        // One element in the allow sets: the one allowed address.
        let allowed: usize = plan
            .inet
            .sets
            .iter()
            .filter(|s| s.name.contains("-allow"))
            .map(|s| s.elements.len())
            .sum();
        assert_eq!(allowed, 1);
        assert!(plan.render_nft().contains("198.51.100.10"));
    }

    #[test]
    fn lab_addresses_stay_out_of_each_other_and_the_sandbox_subnet() {
        let link = Ipv4Net::new(LINK_HOST, LINK_PREFIX).unwrap_or_else(|e| panic!("{e}"));
        for dest in [ALLOWED, OTHER_PORT, OTHER_ADDR, METADATA] {
            let IpAddr::V4(ip) = dest.ip() else {
                panic!("IPv4 only")
            };
            assert!(!link.contains(&ip), "{ip} inside the link network");
            assert!(
                !"10.251.0.0/16"
                    .parse::<Ipv4Net>()
                    .is_ok_and(|n| n.contains(&ip))
            );
        }
        assert!(link.contains(&LINK_DEST));
        assert_ne!(ALLOWED, OTHER_PORT);
        assert_eq!(ALLOWED.ip(), OTHER_PORT.ip());
        assert_eq!(ALLOWED.port(), OTHER_ADDR.port());
    }
}
