//! The dnsmasq configuration of one gateway, as text. Pure: the same spec
//! always gives the same bytes, so a diff of two applies is a diff of
//! policy.
//!
//! No host path is written here: the pid file, lease file and log go to
//! dnsmasq as separate command-line arguments (`Gateway::start`), so no
//! configured path can add a directive. Every value is checked again at
//! this last step: a line break, carriage return or NUL in any value is
//! refused, and so is any line longer than dnsmasq reads (it rejects lines
//! over 1,024 bytes). Each listed domain gets an `nftset=` line of its own
//! (dnsmasq applies only the line of the longest matching domain), naming
//! the learned sets of exactly its entries' classes.

use std::net::SocketAddr;

use super::error::GatewayError;
use super::names::DomainRule;
use super::spec::{DnsService, GatewaySpec};
use corral_egress::plan::AddrFamily;
use corral_egress::plan::bindings::SLAAC_PREFIX_LEN;

/// The longest line written (dnsmasq refuses lines over 1,024 bytes; the
/// margin keeps clear of its off-by-one in counting the newline).
pub const MAX_LINE: usize = 1000;

/// The unprivileged user dnsmasq drops to after binding (it keeps
/// CAP_NET_ADMIN, which DHCP and nftset need).
pub(crate) const RUN_AS_USER: &str = "nobody";
pub(crate) const RUN_AS_GROUP: &str = "nogroup";

/// The nft table holding the dynamic sets; the same name as the plan's
/// `TABLE_NAME` (kept literal here so the gateway renders without the plan).
pub const NFT_TABLE: &str = "corral";

/// Renders the configuration file for `spec`.
pub fn render(spec: &GatewaySpec) -> Result<String, GatewayError> {
    let mut c = Conf::default();
    c.comment(&format!(
        "corral gateway for profile `{}` on bridge `{}`; generated on every apply, do not edit",
        spec.profile, spec.bridge
    ));
    c.comment(
        "never read the host's /etc/hosts or /etc/resolv.conf; listen only on the gateway address",
    );
    c.line("no-hosts");
    c.line("no-resolv");
    c.line("bind-interfaces");
    c.kv("listen-address", spec.gateway_v4);
    if let (Some(gw6), false) = (spec.gateway_v6, spec.dns == DnsService::Off) {
        // The bridge's v6 gateway address is added without DAD, so it can be
        // bound at once.
        c.kv("listen-address", gw6);
    }
    c.kv("user", RUN_AS_USER);
    c.kv("group", RUN_AS_GROUP);

    // Where corral's resolver serves the bridge, corral's DHCP server and
    // router advertiser serve it too (`HostedGateway`, in the same host
    // process): dnsmasq serves nothing there.
    if spec.dns != DnsService::Elsewhere {
        dhcp_leases(&mut c, spec);
        c.kv("dhcp-option", format!("option:router,{}", spec.gateway_v4));
        router_advertisements(&mut c, spec);
    }
    c.line("dhcp-ignore-names");
    c.line("dhcp-authoritative");
    c.line("no-ping");

    match &spec.dns {
        DnsService::Off => {
            c.comment("no resolver on this profile: leases only");
            c.kv("port", 0);
            c.kv("dhcp-option", "option:dns-server");
        }
        DnsService::Elsewhere => {
            c.comment("corral's resolver, DHCP server and router advertisements serve this bridge: nothing here");
            c.kv("port", 0);
        }
        DnsService::Forward { upstreams } => {
            c.comment("internet profile: forward everything to the host's upstreams");
            c.kv(
                "dhcp-option",
                format!("option:dns-server,{}", spec.gateway_v4),
            );
            common_dns(&mut c);
            dns_capacity(&mut c);
            c.line("bogus-priv");
            for up in upstreams {
                c.kv("server", server_addr(up));
            }
        }
        DnsService::Filtered {
            upstreams,
            names,
            timing,
            set_lines,
        } => {
            c.comment("allowlist profile: answer only admitted names; NXDOMAIN for all else, never forwarded");
            c.kv(
                "dhcp-option",
                format!("option:dns-server,{}", spec.gateway_v4),
            );
            common_dns(&mut c);
            dns_capacity(&mut c);
            c.comment(
                "no cache: dnsmasq adds to nft sets only for forwarded answers, never cache hits",
            );
            c.kv("cache-size", 0);
            c.kv("max-ttl", timing.client_ttl_cap.as_secs());
            c.line("address=/#/");
            refuse_reserved_answers(&mut c);
            for rule in names.domain_rules() {
                match rule {
                    DomainRule::Forward(domain) => {
                        for up in upstreams {
                            c.kv("server", format!("/{domain}/{}", server_addr(up)));
                        }
                    }
                    DomainRule::Refuse(domain) => c.kv("address", format!("/{domain}/")),
                }
            }
            for line in set_lines {
                let sets: Vec<String> = line
                    .sets
                    .iter()
                    .map(|(f, name)| {
                        let digit = match f {
                            AddrFamily::V4 => 4,
                            AddrFamily::V6 => 6,
                        };
                        format!("{digit}#inet#{NFT_TABLE}#{name}")
                    })
                    .collect();
                c.kv("nftset", format!("/{}/{}", line.domain, sets.join(",")));
            }
        }
    }
    c.finish()
}

/// Concurrent DNS queries in flight to the upstreams (dnsmasq's default is
/// 150): with each port limited to `plan::bridge::DNS_RATE` queries a
/// second, one sibling flooding names a slow upstream never answers holds
/// at most a fraction of these until dnsmasq gives up on them.
pub const DNS_FORWARD_MAX: u32 = 16_384;
/// Concurrent DNS-over-TCP connections (dnsmasq's default is 20): with each
/// source limited to `plan::gateway_guard::TCP_DNS_PER_SOURCE`, many
/// sandboxes have to collude to fill them.
pub const MAX_TCP_CONNECTIONS: u32 = 100;

/// The line that has dnsmasq answer reserved MACs only; present exactly
/// when dnsmasq serves the bridge's DHCPv4.
const LEASES_ONLY_KNOWN: &str = "dhcp-ignore=tag:!known";

/// Whether the dnsmasq configuration `conf` serves DHCPv4 leases (false
/// where corral's own DHCP server has them).
pub(crate) fn serves_leases(conf: &str) -> bool {
    conf.lines().any(|l| l == LEASES_ONLY_KNOWN)
}

/// DHCP leases only by reservation: one `MAC,address` line per bound port
/// in the reservations file (re-read on SIGHUP, leases kept); a client
/// whose MAC has no reservation gets no answer at all, so no sandbox can
/// take an address that is not its own, let alone the whole pool.
/// (The file's path goes to dnsmasq on its command line, like every path.)
fn dhcp_leases(c: &mut Conf, spec: &GatewaySpec) {
    c.comment("DHCP: only reserved MAC addresses get a lease (one per bound port); client-supplied names never enter DNS");
    let net = spec.subnet_v4.trunc();
    let mask = net.netmask();
    let lease = spec.lease_time.as_secs();
    c.kv(
        "dhcp-range",
        format!("{},static,{mask},{lease}s", net.network()),
    );
    c.line(LEASES_ONLY_KNOWN);
    // dnsmasq finds a lease by client identifier (option 61) before
    // chaddr: a DECLINE or RELEASE naming a sibling's identifier would
    // reach the sibling's lease. The bridge binds chaddr to the port, and
    // no nft rule can read a variable-position option, so the identifier
    // is ignored and the MAC alone names the client.
    c.line("dhcp-ignore-clid");
}

/// IPv6 addressing, on profiles with a /64 only: router advertisements
/// for SLAAC (autonomous flag on, no DHCPv6), the gateway's link-local
/// address as the router and, with a resolver, the gateway's v6 address as
/// DNS server (RDNSS). Each sandbox forms its address from its MAC
/// (modified EUI-64), which is the address corral bound its port to
/// (`plan::bindings::slaac_address`); a guest with privacy extensions or
/// stable-privacy addresses forms others, which its port drops
/// (docs/gateway.md). dnsmasq sends advertisements only on an interface
/// named by `interface=`: naming the bridge also has it listen on the
/// bridge's link-local address, where the rules accept no DNS, and on
/// loopback unless told `except-interface=lo`.
fn router_advertisements(c: &mut Conf, spec: &GatewaySpec) {
    let Some(net) = spec
        .subnet_v6
        .filter(|n| n.prefix_len() == SLAAC_PREFIX_LEN)
    else {
        return;
    };
    c.comment("IPv6: announce the profile's /64 for SLAAC (no DHCPv6); each sandbox forms the EUI-64 address its port is bound to");
    c.kv("interface", &spec.bridge);
    // `interface=` adds the loopback interface by itself: dnsmasq would
    // listen on 127.0.0.1 too (and a second gateway could not start).
    c.kv("except-interface", "lo");
    c.line("enable-ra");
    c.kv(
        "dhcp-range",
        format!("{},ra-only,{SLAAC_PREFIX_LEN}", net.network()),
    );
    match (spec.gateway_v6, &spec.dns) {
        (
            Some(gw6),
            DnsService::Forward { .. } | DnsService::Filtered { .. } | DnsService::Elsewhere,
        ) => {
            c.kv("dhcp-option", format!("option6:dns-server,[{gw6}]"));
        }
        _ => c.kv("dhcp-option", "option6:dns-server"),
    }
}

/// An answer holding an address in corral's reserved list becomes
/// NXDOMAIN before dnsmasq adds anything to a learned set (it checks
/// `bogus-nxdomain` ahead of the `nftset` adds, over UDP and TCP alike), so
/// no listed name can lead into a reserved range even for the moment the
/// plan's reserved drop would take to refuse it. `stop-dns-rebind` strips
/// only the private ranges; this is the whole list.
fn refuse_reserved_answers(c: &mut Conf) {
    c.comment("answers into corral's reserved ranges (IANA special-purpose registries) become NXDOMAIN and are never learned");
    for net in corral_sandbox_core::reserved::reserved_nets() {
        c.kv("bogus-nxdomain", net);
    }
}

/// How much of the resolver one sandbox can hold at once.
fn dns_capacity(c: &mut Conf) {
    c.kv("dns-forward-max", DNS_FORWARD_MAX);
    c.kv("max-tcp-connections", MAX_TCP_CONNECTIONS);
}

/// Hardening shared by every resolver corral runs.
fn common_dns(c: &mut Conf) {
    // Private answers would let an allowed name point into the host's LAN
    // (and into the allow set); plain names never leave the host.
    c.line("stop-dns-rebind");
    c.line("domain-needed");
    c.line("no-negcache");
    // Every query, how it was settled and each address answered, with the
    // asker's address: corral's audit trail reads them from the log.
    c.kv("log-queries", "extra");
}

/// dnsmasq writes a non-default port as `addr#port`.
fn server_addr(up: &SocketAddr) -> String {
    match up.port() {
        53 => up.ip().to_string(),
        port => format!("{}#{port}", up.ip()),
    }
}

#[derive(Default)]
struct Conf {
    text: String,
    /// The first value that cannot be written safely.
    refused: Option<String>,
}

impl Conf {
    fn push(&mut self, line: String) {
        if line.contains(['\n', '\r', '\0']) && self.refused.is_none() {
            self.refused = Some(format!(
                "`{}` holds a line break or NUL, which would start a new directive",
                line.escape_debug()
            ));
        } else if line.len() > MAX_LINE && self.refused.is_none() {
            self.refused = Some(format!(
                "a {}-byte line (`{}…`) is longer than dnsmasq reads ({MAX_LINE} bytes)",
                line.len(),
                line.chars().take(40).collect::<String>().escape_debug()
            ));
        }
        self.text.push_str(&line);
        self.text.push('\n');
    }

    fn line(&mut self, l: &str) {
        self.push(l.to_owned());
    }

    fn kv(&mut self, k: &str, v: impl std::fmt::Display) {
        self.push(format!("{k}={v}"));
    }

    fn comment(&mut self, l: &str) {
        self.push(format!("# {l}"));
    }

    fn finish(self) -> Result<String, GatewayError> {
        match self.refused {
            None => Ok(self.text),
            Some(reason) => Err(GatewayError::Render(reason)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{DnsTiming, tests::profile};
    use corral_sandbox_core::EgressMode;

    fn ups() -> Vec<SocketAddr> {
        vec![
            "198.18.0.53:53".parse().unwrap(),
            "[2001:db8::53]:5353".parse().unwrap(),
        ]
    }

    fn directives(text: &str) -> Vec<&str> {
        text.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn filtered_resolver() {
        let mut p = profile(
            EgressMode::Allowlist,
            &["api.example.com:443", "*.cdn.test", "198.51.100.0/24"],
            "10.99.2.0/24",
        );
        p.subnet_v6 = Some("fd00:99:2::/64".parse().unwrap());
        let spec = GatewaySpec::from_profile(&p, &ups(), DnsTiming::default()).unwrap();
        let text = render(&spec).unwrap();
        let d = directives(&text);
        for want in [
            "no-hosts",
            "no-resolv",
            "bind-interfaces",
            "listen-address=10.99.2.1",
            "listen-address=fd00:99:2::1",
            "dhcp-range=10.99.2.0,static,255.255.255.0,3600s",
            "dhcp-ignore=tag:!known",
            "dhcp-ignore-clid",
            "dns-forward-max=16384",
            "max-tcp-connections=100",
            "dhcp-option=option:router,10.99.2.1",
            "dhcp-option=option:dns-server,10.99.2.1",
            "dhcp-ignore-names",
            "cache-size=0",
            "max-ttl=60",
            "stop-dns-rebind",
            "address=/#/",
            "server=/api.example.com/198.18.0.53",
            "server=/api.example.com/2001:db8::53#5353",
            "address=/*.api.example.com/",
            "server=/*.cdn.test/198.18.0.53",
            "nftset=/api.example.com/4#inet#corral#claude-dns4-443,6#inet#corral#claude-dns6-443",
            "nftset=/cdn.test/4#inet#corral#claude-dns4,6#inet#corral#claude-dns6",
            // Every range of the one reserved list, the issue-26 ones too.
            "bogus-nxdomain=198.18.0.0/15",
            "bogus-nxdomain=2001::/23",
            "bogus-nxdomain=3fff::/20",
        ] {
            assert!(d.contains(&want), "missing `{want}` in:\n{text}");
        }
        // Every forwarding line names a domain: nothing unlisted is forwarded.
        assert!(
            d.iter()
                .filter(|l| l.starts_with("server="))
                .all(|l| l.starts_with("server=/"))
        );
        assert!(!text.contains("port=0"));
        assert_eq!(
            d.iter()
                .filter(|l| l.starts_with("bogus-nxdomain="))
                .count(),
            corral_sandbox_core::reserved::reserved_nets().len()
        );
    }

    #[test]
    fn only_a_v6_profile_with_a_64_announces_its_prefix() {
        let ra = [
            "interface=cb-claude",
            "except-interface=lo",
            "enable-ra",
            "dhcp-range=fd00:99:2::,ra-only,64",
        ];
        let mut p = profile(EgressMode::Allowlist, &["api.example.com"], "10.99.2.0/24");
        let d =
            render(&GatewaySpec::from_profile(&p, &ups(), DnsTiming::default()).unwrap()).unwrap();
        assert!(
            !d.contains("enable-ra") && !d.contains("interface="),
            "v4 only:\n{d}"
        );
        p.subnet_v6 = Some("fd00:99:2::/64".parse().unwrap());
        let d =
            render(&GatewaySpec::from_profile(&p, &ups(), DnsTiming::default()).unwrap()).unwrap();
        let lines = directives(&d);
        for want in ra
            .iter()
            .chain(&["dhcp-option=option6:dns-server,[fd00:99:2::1]"])
        {
            assert!(lines.contains(want), "missing `{want}` in:\n{d}");
        }
        // No resolver on `none`: the prefix and router, no DNS server.
        let mut none = profile(EgressMode::None, &[], "10.99.1.0/24");
        none.subnet_v6 = Some("fd00:99:1::/64".parse().unwrap());
        let d =
            render(&GatewaySpec::from_profile(&none, &[], DnsTiming::default()).unwrap()).unwrap();
        let lines = directives(&d);
        assert!(lines.contains(&"dhcp-range=fd00:99:1::,ra-only,64"), "{d}");
        assert!(lines.contains(&"dhcp-option=option6:dns-server"), "{d}");
        // SLAAC needs a /64: another length is not announced.
        p.subnet_v6 = Some("fd00:99:2::/112".parse().unwrap());
        let d =
            render(&GatewaySpec::from_profile(&p, &ups(), DnsTiming::default()).unwrap()).unwrap();
        assert!(!d.contains("enable-ra"), "{d}");
    }

    #[test]
    fn corrals_gateway_leaves_dnsmasq_nothing_to_serve() {
        let mut p = profile(
            EgressMode::Allowlist,
            &["api.example.com:443"],
            "10.99.2.0/24",
        );
        p.subnet_v6 = Some("fd00:99:2::/64".parse().unwrap());
        p.dns = corral_sandbox_core::DnsPolicy::Corral;
        let spec = GatewaySpec::from_profile(&p, &ups(), DnsTiming::default()).unwrap();
        assert_eq!(spec.dns, DnsService::Elsewhere);
        let d = render(&spec).unwrap();
        // No DNS socket, no names, no sets: corral's resolver has them.
        assert!(d.contains("\nport=0\n"), "{d}");
        assert!(
            !d.contains("nftset") && !d.contains("server=") && !d.contains("api.example.com"),
            "{d}"
        );
        // No DHCPv4 and no advertisements: corral's gateway sends them
        // (and tells the sandboxes the gateway resolves, both ways).
        assert!(!serves_leases(&d), "{d}");
        assert!(
            !d.contains("dhcp-option") && !d.contains("dhcp-range") && !d.contains("enable-ra"),
            "{d}"
        );
    }

    #[test]
    fn forwarder_and_leases_only() {
        let p = profile(EgressMode::Internet, &[], "10.99.5.0/24");
        let spec = GatewaySpec::from_profile(&p, &ups(), DnsTiming::default()).unwrap();
        let d = render(&spec).unwrap();
        assert!(
            d.contains("\nserver=198.18.0.53\n") && d.contains("\nbogus-priv\n"),
            "{d}"
        );
        assert!(!d.contains("nftset") && !d.contains("address=/#/"), "{d}");
        assert!(serves_leases(&d), "{d}");

        let p = profile(EgressMode::None, &[], "10.99.1.0/24");
        let spec = GatewaySpec::from_profile(&p, &[], DnsTiming::default()).unwrap();
        let d = render(&spec).unwrap();
        assert!(
            d.contains("\nport=0\n") && d.contains("\ndhcp-option=option:dns-server\n"),
            "{d}"
        );
        assert!(!d.contains("server="), "{d}");
    }

    #[test]
    fn addresses_only_allowlist_refuses_every_name() {
        let p = profile(EgressMode::Allowlist, &["192.0.2.7"], "10.99.3.0/24");
        let spec = GatewaySpec::from_profile(&p, &[], DnsTiming::default()).unwrap();
        let d = render(&spec).unwrap();
        assert!(
            d.contains("\naddress=/#/\n") && !d.contains("server=") && !d.contains("nftset"),
            "{d}"
        );
    }

    #[test]
    fn no_path_and_no_overlong_line_is_written() {
        let names: Vec<String> = (0..60).map(|i| format!("name{i:03}.example.com")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let p = profile(EgressMode::Allowlist, &refs, "10.99.2.0/24");
        let spec = GatewaySpec::from_profile(&p, &ups(), DnsTiming::default()).unwrap();
        let text = render(&spec).unwrap();
        assert!(text.lines().all(|l| l.len() <= MAX_LINE), "{text}");
        let sets: Vec<&str> = text.lines().filter(|l| l.starts_with("nftset=")).collect();
        assert!(sets.len() > 1, "{text}");
        for n in &names {
            assert_eq!(
                sets.iter()
                    .filter(|l| l.contains(&format!("/{n}/")))
                    .count(),
                1,
                "{n}"
            );
        }
        for key in ["pid-file", "dhcp-leasefile", "log-facility", "conf-file"] {
            assert!(!text.contains(key), "{key} in:\n{text}");
        }
    }

    #[test]
    fn a_value_with_a_line_break_is_refused() {
        let mut c = Conf::default();
        c.kv("pid-file", "/x\nconf-file=/y");
        let err = c.finish().unwrap_err().to_string();
        assert!(err.contains("line break"), "{err}");
        let mut c = Conf::default();
        c.kv("server", "x".repeat(MAX_LINE));
        assert!(c.finish().is_err());
    }

    proptest::proptest! {
        /// Law: a filtered resolver never has a catch-all upstream, always
        /// refuses by default, and forwards only names the allowlist admits.
        #[test]
        fn filtered_configs_forward_only_admitted_domains(
            hosts in proptest::collection::vec("[a-c]{1,2}(\\.[a-c]{1,2}){0,2}\\.test", 0..4),
            wilds in proptest::collection::vec("[a-c]{1,2}(\\.[a-c]{1,2}){0,1}\\.test", 0..3),
        ) {
            let mut allow: Vec<String> = hosts.clone();
            allow.extend(wilds.iter().map(|w| format!("*.{w}")));
            allow.push("192.0.2.1".to_owned());
            let refs: Vec<&str> = allow.iter().map(String::as_str).collect();
            let p = profile(EgressMode::Allowlist, &refs, "10.99.2.0/24");
            let spec = GatewaySpec::from_profile(&p, &ups(), DnsTiming::default()).unwrap();
            let DnsService::Filtered { names, .. } = &spec.dns else {
                panic!("allowlist profile without a filtered resolver");
            };
            let text = render(&spec).unwrap();
            let d = directives(&text);
            proptest::prop_assert!(d.contains(&"address=/#/"));
            for line in d.iter().filter(|l| l.starts_with("server=")) {
                let domain = line
                    .strip_prefix("server=/")
                    .and_then(|r| r.split('/').next())
                    .unwrap_or_else(|| panic!("catch-all upstream: {line}"));
                let probe = match domain.strip_prefix("*.") {
                    Some(w) => format!("x.{w}"),
                    None => domain.to_owned(),
                };
                proptest::prop_assert!(names.admits(&probe), "{line} forwards {probe}");
            }
        }
    }
}
