//! What one bridge's gateway serves, derived from its profile: the DHCP
//! range and the DNS service (none, a forwarder, or a filtered resolver that
//! feeds the profile's nft sets).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use corral_sandbox_core::{BridgeName, DnsPolicy, EgressMode, Profile, ProfileName};
use ipnet::{Ipv4Net, Ipv6Net};

use super::error::GatewayError;
use super::names::{NameRules, SetLine};

/// TTL handling of a filtered resolver (see the module docs of `gateway` for
/// the rule and the measurements behind it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DnsTiming {
    /// Largest TTL handed to a sandbox (dnsmasq `max-ttl`); a client may
    /// cache an answer at most this long.
    pub client_ttl_cap: Duration,
    /// Default timeout of the profile's `-dns4`/`-dns6` sets: how long an
    /// address stays allowed after the answer that added it.
    pub set_timeout: Duration,
}

impl Default for DnsTiming {
    /// 60 s client TTL cap, 600 s set timeout: answers handed out in the
    /// first 540 s of an element's life are covered for their whole TTL.
    fn default() -> Self {
        Self {
            client_ttl_cap: Duration::from_secs(60),
            // The plan creates the DNS sets with this default timeout;
            // dnsmasq adds elements without one of its own.
            set_timeout: corral_egress::plan::DNS_SET_TIMEOUT,
        }
    }
}

impl DnsTiming {
    /// Checks the rule `set_timeout >= client_ttl_cap >= 1 s`, in whole seconds.
    pub fn validate(&self) -> Result<(), GatewayError> {
        let cap = self.client_ttl_cap;
        let timeout = self.set_timeout;
        if cap < Duration::from_secs(1) || cap.subsec_nanos() != 0 || timeout.subsec_nanos() != 0 {
            return Err(GatewayError::Timing(format!(
                "the client TTL cap ({cap:?}) and set timeout ({timeout:?}) must be whole seconds, at least 1 s"
            )));
        }
        if timeout < cap {
            return Err(GatewayError::Timing(format!(
                "the set timeout ({timeout:?}) is shorter than the client TTL cap ({cap:?}); a sandbox could hold an answer whose address is no longer allowed — raise the timeout"
            )));
        }
        Ok(())
    }
}

/// The DNS service of one gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DnsService {
    /// No resolver (dnsmasq `port=0`): `none` profiles and `dns = "off"`.
    Off,
    /// Forward every query to the upstreams (`internet` profiles).
    Forward {
        /// Upstream resolvers.
        upstreams: Vec<SocketAddr>,
    },
    /// Answer only admitted names, via the upstreams; add every answer to
    /// the profile's nft sets (`allowlist` profiles).
    Filtered {
        /// Upstream resolvers.
        upstreams: Vec<SocketAddr>,
        /// The admitted names.
        names: NameRules,
        /// TTL cap and set timeout.
        timing: DnsTiming,
        /// The `nftset=` lines: which learned sets each domain feeds.
        set_lines: Vec<SetLine>,
    },
    /// corral's own gateway serves the bridge (`dns = "corral"`: its DHCP
    /// server and router advertisements, and its resolver unless the
    /// profile is `none`; hosted by corrald or `corral host watch`): no
    /// dnsmasq runs there.
    Elsewhere,
}

/// Everything needed to render one bridge's dnsmasq configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewaySpec {
    /// The profile served (names the nft sets).
    pub profile: ProfileName,
    /// The bridge served.
    pub bridge: BridgeName,
    /// The profile's IPv4 subnet.
    pub subnet_v4: Ipv4Net,
    /// The gateway address (the subnet's first host); dnsmasq listens only here.
    pub gateway_v4: Ipv4Addr,
    /// The IPv6 gateway address when the profile has IPv6: the resolver
    /// listens there too, and AAAA answers also feed `<profile>-dns6`.
    pub gateway_v6: Option<Ipv6Addr>,
    /// The profile's IPv6 subnet: a /64 is announced for SLAAC (router
    /// advertisements, the gateway as router and, with a resolver, DNS
    /// server).
    pub subnet_v6: Option<Ipv6Net>,
    /// DHCP lease time.
    pub lease_time: Duration,
    /// The DNS service.
    pub dns: DnsService,
}

/// True when the gateway of `profile` runs a resolver on its gateway
/// address (a forwarder or the filtered resolver); false for `none`
/// profiles and `dns = "off"`, whose gateway serves leases only.
pub fn serves_dns(profile: &Profile) -> bool {
    profile.dns.resolves() && profile.mode != EgressMode::None
}

/// Default DHCP lease time: long enough that a restart of the gateway never
/// strands a sandbox, short enough that freed addresses come back.
pub const DEFAULT_LEASE_TIME: Duration = Duration::from_secs(3600);

impl GatewaySpec {
    /// The gateway a profile gets, with the host's upstream resolvers.
    pub fn from_profile(
        profile: &Profile,
        upstreams: &[SocketAddr],
        timing: DnsTiming,
    ) -> Result<Self, GatewayError> {
        let names = NameRules::from_allow(&profile.allow);
        let dns = match (profile.dns, profile.mode) {
            // corral's gateway, on any mode (on `none`: leases and
            // advertisements only).
            (DnsPolicy::Corral, _) => DnsService::Elsewhere,
            _ if !serves_dns(profile) => DnsService::Off,
            (_, EgressMode::Internet) => DnsService::Forward {
                upstreams: upstreams.to_vec(),
            },
            _ => {
                timing.validate()?;
                DnsService::Filtered {
                    upstreams: upstreams.to_vec(),
                    set_lines: NameRules::set_lines(profile),
                    names,
                    timing,
                }
            }
        };
        let needs_upstream = match &dns {
            DnsService::Off => false,
            DnsService::Forward { .. } => true,
            // corral's resolver asks the same upstreams (a `none` profile
            // has none to ask).
            DnsService::Elsewhere => serves_dns(profile),
            DnsService::Filtered { names, .. } => !names.is_empty(),
        };
        if needs_upstream && upstreams.is_empty() {
            return Err(GatewayError::NoUpstreams {
                profile: profile.name.to_string(),
            });
        }
        let spec = Self {
            profile: profile.name.clone(),
            bridge: profile.bridge.clone(),
            subnet_v4: profile.subnet_v4,
            gateway_v4: profile.gateway_v4(),
            gateway_v6: profile.gateway_v6(),
            subnet_v6: profile.subnet_v6.map(|n| n.trunc()),
            lease_time: DEFAULT_LEASE_TIME,
            dns,
        };
        spec.dhcp_range()?;
        Ok(spec)
    }

    /// The addresses handed out: every host address of the subnet except
    /// the gateway (`first..=last`).
    pub fn dhcp_range(&self) -> Result<(Ipv4Addr, Ipv4Addr), GatewayError> {
        let net = self.subnet_v4;
        let gw = u32::from(self.gateway_v4);
        let first = u32::from(net.network()).saturating_add(1);
        let last = u32::from(net.broadcast()).saturating_sub(1);
        // The gateway is the first host by the profile's definition; were it
        // elsewhere, dnsmasq would still never offer its own address.
        let lo = if gw == first { first + 1 } else { first };
        if net.prefix_len() > 30 || lo > last || !net.contains(&self.gateway_v4) {
            return Err(GatewayError::NoRoomForLeases {
                bridge: self.bridge.to_string(),
                subnet: net.to_string(),
            });
        }
        Ok((Ipv4Addr::from(lo), Ipv4Addr::from(last)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use corral_sandbox_core::BlockAction;

    pub(crate) fn profile(mode: EgressMode, allow: &[&str], subnet: &str) -> Profile {
        Profile {
            name: ProfileName::new("claude").unwrap(),
            bridge: BridgeName::new("cb-claude").unwrap(),
            subnet_v4: subnet.parse().unwrap(),
            subnet_v6: None,
            mode,
            allow: allow.iter().map(|a| a.parse().unwrap()).collect(),
            block: BlockAction::Reject,
            dns: DnsPolicy::Gateway,
            allow_unresolved: false,
            learned_max: corral_sandbox_core::profile::DEFAULT_LEARNED_MAX,
            approvals: Default::default(),
            flows: Default::default(),
            deny: Vec::new(),
        }
    }

    fn up() -> Vec<SocketAddr> {
        vec!["198.18.0.53:53".parse().unwrap()]
    }

    #[test]
    fn modes_map_to_services() {
        let t = DnsTiming::default();
        let none =
            GatewaySpec::from_profile(&profile(EgressMode::None, &[], "10.99.1.0/24"), &[], t);
        assert_eq!(none.unwrap().dns, DnsService::Off);
        let inet = GatewaySpec::from_profile(
            &profile(EgressMode::Internet, &[], "10.99.1.0/24"),
            &up(),
            t,
        )
        .unwrap();
        assert!(matches!(inet.dns, DnsService::Forward { .. }));
        let allow = profile(EgressMode::Allowlist, &["api.example.com"], "10.99.1.0/24");
        let spec = GatewaySpec::from_profile(&allow, &up(), t).unwrap();
        let DnsService::Filtered { set_lines, .. } = &spec.dns else {
            panic!("not filtered: {:?}", spec.dns);
        };
        assert_eq!(
            set_lines[0].sets,
            [(
                corral_egress::plan::AddrFamily::V4,
                "claude-dns4".to_owned()
            )]
        );
        let mut off = allow.clone();
        off.dns = DnsPolicy::Off;
        assert_eq!(
            GatewaySpec::from_profile(&off, &up(), t).unwrap().dns,
            DnsService::Off
        );
    }

    #[test]
    fn names_without_upstreams_are_refused() {
        let allow = profile(EgressMode::Allowlist, &["api.example.com"], "10.99.1.0/24");
        let err = GatewaySpec::from_profile(&allow, &[], DnsTiming::default()).unwrap_err();
        assert!(err.to_string().contains("dns_upstreams"), "{err}");
        // Addresses only: nothing to forward, no upstream needed.
        let addrs = profile(EgressMode::Allowlist, &["192.0.2.1"], "10.99.1.0/24");
        assert!(GatewaySpec::from_profile(&addrs, &[], DnsTiming::default()).is_ok());
    }

    #[test]
    fn range_excludes_the_gateway() {
        let p = profile(EgressMode::None, &[], "10.99.1.0/24");
        let spec = GatewaySpec::from_profile(&p, &[], DnsTiming::default()).unwrap();
        assert_eq!(
            spec.dhcp_range().unwrap(),
            ("10.99.1.2".parse().unwrap(), "10.99.1.254".parse().unwrap())
        );
        let p = profile(EgressMode::None, &[], "10.99.1.0/30");
        let spec = GatewaySpec::from_profile(&p, &[], DnsTiming::default()).unwrap();
        assert_eq!(
            spec.dhcp_range().unwrap(),
            ("10.99.1.2".parse().unwrap(), "10.99.1.2".parse().unwrap())
        );
        let p = profile(EgressMode::None, &[], "10.99.1.0/31");
        let err = GatewaySpec::from_profile(&p, &[], DnsTiming::default()).unwrap_err();
        assert!(err.to_string().contains("/30 or larger"), "{err}");
    }

    #[test]
    fn timing_rule() {
        let ok = DnsTiming {
            client_ttl_cap: Duration::from_secs(2),
            set_timeout: Duration::from_secs(2),
        };
        assert!(ok.validate().is_ok());
        let short = DnsTiming {
            set_timeout: Duration::from_secs(1),
            ..ok
        };
        assert!(
            short
                .validate()
                .unwrap_err()
                .to_string()
                .contains("raise the timeout")
        );
        let frac = DnsTiming {
            client_ttl_cap: Duration::from_millis(1500),
            ..ok
        };
        assert!(frac.validate().is_err());
    }
}
