//! Which names a filtered resolver answers, and the dnsmasq domain rules
//! that say exactly that.
//!
//! dnsmasq matches `server=/d/` and `address=/d/` on `d` *and every
//! subdomain*, the most specific rule winning; `/*.d/` matches strict
//! subdomains only. So the allowlist compiles to:
//! - a host entry `h`: `server=/h/<upstream>` plus `address=/*.h/` (NXDOMAIN
//!   for its subdomains), unless a wildcard already admits `h`'s subdomains;
//! - a wildcard `*.w`: `server=/*.w/<upstream>` (the apex `w` is not
//!   admitted unless listed itself);
//! - everything else: `address=/#/` (NXDOMAIN, never forwarded).
//!
//! These semantics were measured against dnsmasq 2.90 (see docs/gateway.md).

use std::collections::BTreeSet;

use corral_egress::plan::AddrFamily;
use corral_egress::plan::names::dns_set;
pub use corral_sandbox_core::admission::NamePattern;
use corral_sandbox_core::admission::is_strict_subdomain;
use corral_sandbox_core::{AllowEntry, PortRange, Profile, Protocol};

/// The set of names a filtered resolver answers, deduplicated and sorted so
/// the rendered configuration is stable across applies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameRules {
    patterns: BTreeSet<NamePattern>,
    /// Every name (an `internet` profile): no pattern is consulted.
    any: bool,
}

/// A (protocol, ports) class of allow entries.
type Class = (Option<Protocol>, Option<PortRange>);

/// One `nftset=` line: a domain and the learned sets its answers feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetLine {
    /// The domain (it and its subdomains, as dnsmasq matches it).
    pub domain: String,
    /// Family and name of every set.
    pub sets: Vec<(AddrFamily, String)>,
}

/// Which learned sets an admitted name's answers feed, as corral's own
/// resolver decides it: the sets of the (protocol, ports) class of every
/// allow entry that admits the name itself — exactly, unlike dnsmasq's
/// longest-domain `nftset=` lines ([`NameRules::set_lines`]), so a name
/// under a wildcard never feeds the class of a host entry above it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnSets {
    profile: corral_sandbox_core::ProfileName,
    entries: Vec<(NamePattern, Class)>,
    v6: bool,
    approvals: bool,
}

impl LearnSets {
    /// The learned sets of `profile`'s name entries.
    pub fn of(profile: &Profile) -> Self {
        Self {
            profile: profile.name.clone(),
            entries: profile
                .allow
                .iter()
                .filter_map(|e| NamePattern::of(&e.target).map(|p| (p, (e.protocol, e.ports))))
                .collect(),
            v6: profile.subnet_v6.is_some(),
            approvals: profile.approvals != corral_sandbox_core::Approvals::Off,
        }
    }

    /// The set of `family` that addresses of a name the operator approved
    /// go to (the all-ports class, which the plan has for a profile with
    /// `approvals = "ask"`); none without approvals, and none for IPv6 on
    /// a profile without an IPv6 subnet.
    pub fn approved_sets(&self, family: AddrFamily) -> Vec<String> {
        if !self.approvals || (family == AddrFamily::V6 && !self.v6) {
            return Vec::new();
        }
        vec![dns_set(&self.profile, family, None, None)]
    }

    /// The sets of `family` that addresses of `name` (lower case, no
    /// final dot) go to: none for a name no entry admits, and none for
    /// IPv6 on a profile without an IPv6 subnet.
    pub fn sets_for(&self, name: &str, family: AddrFamily) -> Vec<String> {
        if family == AddrFamily::V6 && !self.v6 {
            return Vec::new();
        }
        let classes: BTreeSet<Class> = self
            .entries
            .iter()
            .filter(|(p, _)| p.admits(name))
            .map(|(_, c)| *c)
            .collect();
        classes
            .into_iter()
            .map(|c| dns_set(&self.profile, family, c.0, c.1))
            .collect()
    }
}

/// One dnsmasq domain directive, before upstream addresses are attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DomainRule {
    /// Forward queries matching this dnsmasq domain spec (`d` or `*.d`).
    Forward(String),
    /// Answer NXDOMAIN for this dnsmasq domain spec, never forwarding.
    Refuse(String),
}

impl NameRules {
    /// The name patterns of a profile's allow entries (addresses and CIDRs
    /// carry no name and are skipped).
    pub fn from_allow(entries: &[AllowEntry]) -> Self {
        let patterns = entries
            .iter()
            .filter_map(|e| NamePattern::of(&e.target))
            .collect();
        Self {
            patterns,
            any: false,
        }
    }

    /// True when no name is admitted (the resolver answers NXDOMAIN to all).
    pub fn is_empty(&self) -> bool {
        !self.any && self.patterns.is_empty()
    }

    /// The admitted patterns, sorted.
    pub fn patterns(&self) -> impl Iterator<Item = &NamePattern> {
        self.patterns.iter()
    }

    /// True when the resolver should answer `name` (lower-cased, trailing dot
    /// ignored). This is the specification the rendered rules implement.
    pub fn admits(&self, name: &str) -> bool {
        self.any || self.patterns.iter().any(|p| p.admits(name))
    }

    /// These rules and exactly `name` besides (a name the operator
    /// approved).
    pub fn with_exact(&self, name: &str) -> Self {
        let mut more = self.clone();
        more.patterns.insert(NamePattern::Exact(name.to_owned()));
        more
    }

    /// Rules that admit every name: an `internet` profile's, whose
    /// resolver forwards any name (and still rebuilds every query and
    /// answer).
    pub fn any_name() -> Self {
        Self {
            patterns: BTreeSet::new(),
            any: true,
        }
    }

    /// The dnsmasq domain rules, in a stable order.
    pub fn domain_rules(&self) -> Vec<DomainRule> {
        let mut rules = Vec::new();
        for p in &self.patterns {
            match p {
                NamePattern::Exact(h) => {
                    rules.push(DomainRule::Forward(h.clone()));
                    if !self.subdomains_admitted(h) {
                        rules.push(DomainRule::Refuse(format!("*.{h}")));
                    }
                }
                NamePattern::Subdomains(w) => rules.push(DomainRule::Forward(format!("*.{w}"))),
            }
        }
        rules
    }

    /// The domains whose answers go into the profile's nft sets. An nftset
    /// domain matches the name and all its subdomains (dnsmasq 2.90 does not
    /// accept `*.` there), which is safe: names the rules refuse never get an
    /// upstream answer, so they never add an address.
    pub fn set_domains(&self) -> Vec<String> {
        let domains: BTreeSet<String> = self
            .patterns
            .iter()
            .map(|p| match p {
                NamePattern::Exact(h) | NamePattern::Subdomains(h) => h.clone(),
            })
            .collect();
        domains.into_iter().collect()
    }

    /// The `nftset=` lines of a profile: one per domain whose answers feed
    /// nft sets, each naming every learned set (one per (protocol, ports)
    /// class and family, `plan::names::dns_set`) the answers go to.
    ///
    /// dnsmasq applies only the line of the longest domain matching a
    /// query (measured on 2.90), so each domain's line carries the classes
    /// of every entry admitting names that select it: its own host entry,
    /// and every wildcard at or above it. A name under a wildcard that is
    /// also listed as a host entry (or a wildcard's apex listed as one)
    /// thus also feeds the host entry's classes; dnsmasq cannot tell the
    /// two apart (see docs/gateway.md).
    pub fn set_lines(profile: &Profile) -> Vec<SetLine> {
        let entries: Vec<(NamePattern, Class)> = profile
            .allow
            .iter()
            .filter_map(|e| NamePattern::of(&e.target).map(|p| (p, (e.protocol, e.ports))))
            .collect();
        let domains: BTreeSet<&str> = entries
            .iter()
            .map(|(p, _)| match p {
                NamePattern::Exact(d) | NamePattern::Subdomains(d) => d.as_str(),
            })
            .collect();
        let mut families = vec![AddrFamily::V4];
        if profile.subnet_v6.is_some() {
            families.push(AddrFamily::V6);
        }
        domains
            .into_iter()
            .map(|d| {
                let classes: BTreeSet<Class> = entries
                    .iter()
                    .filter(|(p, _)| match p {
                        NamePattern::Exact(h) => h == d,
                        NamePattern::Subdomains(w) => w == d || is_strict_subdomain(d, w),
                    })
                    .map(|(_, c)| *c)
                    .collect();
                let mut sets = Vec::new();
                for c in &classes {
                    for f in &families {
                        sets.push((*f, dns_set(&profile.name, *f, c.0, c.1)));
                    }
                }
                SetLine {
                    domain: d.to_owned(),
                    sets,
                }
            })
            .collect()
    }

    /// True when some wildcard admits every strict subdomain of `host`.
    fn subdomains_admitted(&self, host: &str) -> bool {
        self.patterns.iter().any(|p| match p {
            NamePattern::Subdomains(w) => w == host || is_strict_subdomain(host, w),
            NamePattern::Exact(_) => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rules(entries: &[&str]) -> NameRules {
        let parsed: Vec<AllowEntry> = entries.iter().map(|e| e.parse().unwrap()).collect();
        NameRules::from_allow(&parsed)
    }

    #[test]
    fn host_entries_are_exact_and_wildcards_strict() {
        let r = rules(&["API.example.com:443", "*.cdn.test", "198.51.100.0/24"]);
        assert!(r.admits("api.example.com"));
        assert!(r.admits("api.example.com."));
        assert!(!r.admits("x.api.example.com"));
        assert!(!r.admits("example.com"));
        assert!(r.admits("a.cdn.test"));
        assert!(r.admits("a.b.cdn.test"));
        assert!(!r.admits("cdn.test"));
        assert!(!r.admits("evilcdn.test"));
        assert_eq!(
            r.domain_rules(),
            vec![
                DomainRule::Forward("api.example.com".into()),
                DomainRule::Refuse("*.api.example.com".into()),
                DomainRule::Forward("*.cdn.test".into()),
            ]
        );
        assert_eq!(r.set_domains(), vec!["api.example.com", "cdn.test"]);
    }

    #[test]
    fn a_wildcard_over_a_host_drops_the_refusal() {
        let r = rules(&["example.com", "*.example.com", "a.b.example.com"]);
        assert_eq!(
            r.domain_rules(),
            vec![
                DomainRule::Forward("a.b.example.com".into()),
                DomainRule::Forward("example.com".into()),
                DomainRule::Forward("*.example.com".into()),
            ]
        );
        assert!(r.admits("example.com") && r.admits("x.a.b.example.com"));
    }

    #[test]
    fn each_domain_feeds_exactly_its_classes_sets() {
        let mut p = crate::spec::tests::profile(
            corral_sandbox_core::EgressMode::Allowlist,
            &[
                "api.example.com:443/tcp",
                "api.example.com:80/tcp",
                "*.cdn.test:8443/tcp",
                "img.cdn.test:53/udp",
                "other.test",
            ],
            "10.99.2.0/24",
        );
        p.subnet_v6 = Some("fd00:99:2::/64".parse().unwrap());
        let lines = NameRules::set_lines(&p);
        let show: Vec<String> = lines
            .iter()
            .map(|l| {
                let sets: Vec<&str> = l.sets.iter().map(|(_, s)| s.as_str()).collect();
                format!("{} {}", l.domain, sets.join(","))
            })
            .collect();
        assert_eq!(
            show,
            [
                "api.example.com claude-dns4-tcp-80,claude-dns6-tcp-80,claude-dns4-tcp-443,claude-dns6-tcp-443",
                "cdn.test claude-dns4-tcp-8443,claude-dns6-tcp-8443",
                // A host entry under a wildcard: dnsmasq picks this line
                // for img.cdn.test and its subdomains alike.
                "img.cdn.test claude-dns4-tcp-8443,claude-dns6-tcp-8443,claude-dns4-udp-53,claude-dns6-udp-53",
                "other.test claude-dns4,claude-dns6",
            ]
        );
    }

    #[test]
    fn corrals_resolver_feeds_only_the_classes_that_admit_the_name() {
        let p = crate::spec::tests::profile(
            corral_sandbox_core::EgressMode::Allowlist,
            &[
                "api.example.com:443/tcp",
                "*.cdn.test:8443/tcp",
                "img.cdn.test:53/udp",
            ],
            "10.99.2.0/24",
        );
        let sets = LearnSets::of(&p);
        let v4 = |n: &str| sets.sets_for(n, AddrFamily::V4);
        assert_eq!(v4("API.example.com."), ["claude-dns4-tcp-443"]);
        assert_eq!(
            v4("img.cdn.test"),
            ["claude-dns4-tcp-8443", "claude-dns4-udp-53"]
        );
        // Where dnsmasq's longest-domain line would add udp/53.
        assert_eq!(v4("x.img.cdn.test"), ["claude-dns4-tcp-8443"]);
        assert!(v4("cdn.test").is_empty());
        assert!(v4("x.api.example.com").is_empty());
        // No IPv6 subnet, no IPv6 set.
        assert!(sets.sets_for("api.example.com", AddrFamily::V6).is_empty());
    }

    #[test]
    fn only_addresses_means_no_names() {
        assert!(rules(&["192.0.2.1", "2001:db8::/32"]).is_empty());
    }

    fn arb_name() -> impl Strategy<Value = String> {
        proptest::collection::vec(prop_oneof!["a", "b", "c"], 1..4).prop_map(|l| l.join("."))
    }

    /// Models dnsmasq's matching: the rule whose domain matches most
    /// specifically wins; `/#/` (refuse) matches everything last.
    fn dnsmasq_forwards(rules: &[DomainRule], name: &str) -> bool {
        let matches = |spec: &str| -> Option<usize> {
            match spec.strip_prefix("*.") {
                Some(d) => is_strict_subdomain(name, d).then_some(d.len() + 1),
                None => (name == spec || is_strict_subdomain(name, spec)).then_some(spec.len()),
            }
        };
        let mut best: Option<(usize, bool)> = None;
        for r in rules {
            let (spec, fwd) = match r {
                DomainRule::Forward(s) => (s, true),
                DomainRule::Refuse(s) => (s, false),
            };
            if let Some(len) = matches(spec)
                && best.is_none_or(|(b, _)| len > b)
            {
                best = Some((len, fwd));
            }
        }
        best.is_some_and(|(_, fwd)| fwd)
    }

    proptest! {
        /// Law: under dnsmasq's most-specific-match rule, the rendered rules
        /// forward exactly the names the allowlist admits.
        #[test]
        fn rendered_rules_forward_exactly_the_admitted_names(
            hosts in proptest::collection::vec(arb_name(), 0..4),
            wilds in proptest::collection::vec(arb_name(), 0..3),
            probe in arb_name(),
        ) {
            let mut entries: Vec<String> = hosts.iter().map(|h| format!("{h}.test")).collect();
            entries.extend(wilds.iter().map(|w| format!("*.{w}.test")));
            let refs: Vec<&str> = entries.iter().map(String::as_str).collect();
            let r = rules(&refs);
            let name = format!("{probe}.test");
            prop_assert_eq!(dnsmasq_forwards(&r.domain_rules(), &name), r.admits(&name));
        }
    }
}
