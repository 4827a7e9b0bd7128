//! Profile-set validation: the rules a [`ProfileSet`] guarantees to every
//! consumer. All rules run and every failure is returned; a set with one bad
//! profile yields no set at all.

use std::fmt;

use ipnet::{Ipv4Net, Ipv6Net};

use super::{EgressMode, Profile, ProfileSet};

/// Smallest IPv4 subnet that holds a gateway and at least two sandboxes
/// (a /29 has six host addresses; a /30 only two).
pub const MAX_V4_PREFIX: u8 = 29;

/// Smallest IPv6 subnet corral accepts (a /120 has 256 addresses).
pub const MAX_V6_PREFIX: u8 = 120;

/// The profile field a validation failure is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProfileField {
    /// `name`.
    Name,
    /// `bridge`.
    Bridge,
    /// `subnet` (IPv4).
    Subnet,
    /// `subnet_v6`.
    SubnetV6,
    /// `mode`.
    Mode,
    /// `allow`.
    Allow,
    /// `dns`.
    Dns,
}

impl ProfileField {
    /// The key as written in `corral.toml`.
    pub fn key(self) -> &'static str {
        match self {
            ProfileField::Name => "name",
            ProfileField::Bridge => "bridge",
            ProfileField::Subnet => "subnet",
            ProfileField::SubnetV6 => "subnet_v6",
            ProfileField::Mode => "mode",
            ProfileField::Allow => "allow",
            ProfileField::Dns => "dns",
        }
    }
}

impl fmt::Display for ProfileField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// One broken rule, tied to the profile (by position and name) and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile \"{profile}\": {field}: {problem}")]
pub struct ValidationError {
    /// Position of the profile in the input (0-based), so callers can point
    /// at the line it came from.
    pub index: usize,
    /// The profile's name.
    pub profile: String,
    /// The offending field.
    pub field: ProfileField,
    /// What is wrong and how to fix it.
    pub problem: String,
}

/// Every broken rule of a profile set, in input order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidationErrors(pub Vec<ValidationError>);

impl fmt::Display for ValidationErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0.len();
        write!(
            f,
            "{n} problem{} in the profiles:",
            if n == 1 { "" } else { "s" }
        )?;
        for e in &self.0 {
            write!(f, "\n  {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationErrors {}

impl ProfileSet {
    /// Validate `profiles` as a whole; nothing is returned unless all pass.
    pub fn new(profiles: Vec<Profile>) -> Result<Self, ValidationErrors> {
        let errors = validate(&profiles);
        if errors.is_empty() {
            Ok(Self::from_validated(profiles))
        } else {
            Err(ValidationErrors(errors))
        }
    }
}

/// Check every rule; the returned list is empty when the set is valid.
fn validate(profiles: &[Profile]) -> Vec<ValidationError> {
    let mut errors = Vec::new();
    for (index, p) in profiles.iter().enumerate() {
        let mut push = |field, problem: String| {
            errors.push(ValidationError {
                index,
                profile: p.name.to_string(),
                field,
                problem,
            });
        };
        check_single(p, &mut push);
        for earlier in &profiles[..index] {
            check_pair(earlier, p, &mut push);
        }
    }
    errors
}

fn check_single(p: &Profile, push: &mut impl FnMut(ProfileField, String)) {
    if p.subnet_v4.trunc() != p.subnet_v4 {
        push(
            ProfileField::Subnet,
            format!(
                "{} has host bits set; write the network address, {}",
                p.subnet_v4,
                p.subnet_v4.trunc()
            ),
        );
    }
    if p.subnet_v4.prefix_len() > MAX_V4_PREFIX {
        push(
            ProfileField::Subnet,
            format!(
                "{} is too small: a profile needs a gateway plus at least 2 sandboxes, so the IPv4 prefix must be /{MAX_V4_PREFIX} or shorter",
                p.subnet_v4
            ),
        );
    }
    if let Some(why) = unusable_v4(p.subnet_v4) {
        push(
            ProfileField::Subnet,
            format!(
                "{} is {why}, which cannot hold a bridge; use a private range such as 10.231.0.0/16",
                p.subnet_v4
            ),
        );
    }
    if let Some(v6) = p.subnet_v6 {
        if let Some(why) = unusable_v6(v6) {
            push(
                ProfileField::SubnetV6,
                format!(
                    "{v6} is {why}, which cannot hold a bridge; use a unique-local range such as fd00:c0a1::/48"
                ),
            );
        }
        if v6.trunc() != v6 {
            push(
                ProfileField::SubnetV6,
                format!(
                    "{v6} has host bits set; write the network address, {}",
                    v6.trunc()
                ),
            );
        }
        if v6.prefix_len() > MAX_V6_PREFIX {
            push(
                ProfileField::SubnetV6,
                format!(
                    "{v6} is too small: a profile needs a gateway plus at least 2 sandboxes, so the IPv6 prefix must be /{MAX_V6_PREFIX} or shorter"
                ),
            );
        }
    }
    match p.mode {
        EgressMode::Allowlist if p.allow.is_empty() => push(
            ProfileField::Allow,
            "mode is allowlist but the allowlist is empty; add entries, or use mode \
                \"none\" for no egress"
                .to_owned(),
        ),
        EgressMode::None | EgressMode::Internet if !p.allow.is_empty() => {
            let mode = if p.mode == EgressMode::None {
                "none"
            } else {
                "internet"
            };
            push(
                ProfileField::Allow,
                format!(
                    "allow entries have no effect in mode \"{mode}\"; remove them, or set \
                        mode = \"allowlist\""
                ),
            );
        }
        _ => {}
    }
}

fn check_pair(earlier: &Profile, p: &Profile, push: &mut impl FnMut(ProfileField, String)) {
    if earlier.name == p.name {
        push(
            ProfileField::Name,
            format!(
                "profile name \"{}\" is used twice; give each profile its own name",
                p.name
            ),
        );
    }
    if earlier.bridge == p.bridge {
        push(
            ProfileField::Bridge,
            format!(
                "bridge \"{}\" is already used by profile \"{}\"; each profile needs its \
                    own bridge",
                p.bridge, earlier.name
            ),
        );
    }
    if overlaps_v4(earlier.subnet_v4, p.subnet_v4) {
        push(
            ProfileField::Subnet,
            format!(
                "{} overlaps {} of profile \"{}\"; give each profile a separate subnet",
                p.subnet_v4, earlier.subnet_v4, earlier.name
            ),
        );
    }
    if let (Some(a), Some(b)) = (earlier.subnet_v6, p.subnet_v6)
        && overlaps_v6(a, b)
    {
        push(
            ProfileField::SubnetV6,
            format!(
                "{b} overlaps {a} of profile \"{}\"; give each profile a separate subnet",
                earlier.name
            ),
        );
    }
}

/// Why an IPv4 subnet cannot be a bridge subnet, if it cannot: it touches
/// "this network", loopback, link-local, multicast or reserved space.
fn unusable_v4(net: Ipv4Net) -> Option<&'static str> {
    let special: [(&str, &str); 5] = [
        ("0.0.0.0/8", "in \"this network\" (0.0.0.0/8)"),
        ("127.0.0.0/8", "in loopback space (127.0.0.0/8)"),
        ("169.254.0.0/16", "in link-local space (169.254.0.0/16)"),
        ("224.0.0.0/4", "in multicast space (224.0.0.0/4)"),
        ("240.0.0.0/4", "in reserved space (240.0.0.0/4)"),
    ];
    special.into_iter().find_map(|(range, why)| {
        // Invariant: the literals above are valid CIDRs (tested).
        let range: Ipv4Net = range.parse().ok()?;
        overlaps_v4(range, net).then_some(why)
    })
}

/// IPv6 counterpart of [`unusable_v4`]: loopback, link-local, multicast.
fn unusable_v6(net: Ipv6Net) -> Option<&'static str> {
    let special: [(&str, &str); 4] = [
        ("::/128", "the unspecified address"),
        ("::1/128", "the loopback address"),
        ("fe80::/10", "in link-local space (fe80::/10)"),
        ("ff00::/8", "in multicast space (ff00::/8)"),
    ];
    special.into_iter().find_map(|(range, why)| {
        let range: Ipv6Net = range.parse().ok()?;
        overlaps_v6(range, net).then_some(why)
    })
}

/// Two prefixes overlap exactly when one contains the other's network address.
pub(crate) fn overlaps_v4(a: Ipv4Net, b: Ipv4Net) -> bool {
    let (a, b) = (a.trunc(), b.trunc());
    a.contains(&b.network()) || b.contains(&a.network())
}

/// IPv6 counterpart of [`overlaps_v4`].
pub(crate) fn overlaps_v6(a: Ipv6Net, b: Ipv6Net) -> bool {
    let (a, b) = (a.trunc(), b.trunc());
    a.contains(&b.network()) || b.contains(&a.network())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{AllowEntry, BlockAction, DnsPolicy};

    fn profile(name: &str, bridge: &str, subnet: &str) -> Profile {
        Profile {
            name: name.parse().unwrap(),
            bridge: bridge.parse().unwrap(),
            subnet_v4: subnet.parse().unwrap(),
            subnet_v6: None,
            mode: EgressMode::None,
            allow: Vec::new(),
            block: BlockAction::Reject,
            dns: DnsPolicy::Gateway,
            allow_unresolved: false,
            learned_max: crate::profile::DEFAULT_LEARNED_MAX,
            approvals: Default::default(),
            flows: Default::default(),
            deny: Vec::new(),
        }
    }

    fn problems(ps: Vec<Profile>) -> Vec<String> {
        ProfileSet::new(ps)
            .unwrap_err()
            .0
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn valid_set_passes() {
        let set = ProfileSet::new(vec![
            profile("a", "br-a", "10.0.1.0/24"),
            profile("b", "br-b", "10.0.2.0/29"),
        ])
        .unwrap();
        assert_eq!(set.names(), ["a", "b"]);
    }

    #[test]
    fn duplicates_and_overlaps_are_all_reported() {
        let got = problems(vec![
            profile("a", "br-a", "10.0.0.0/16"),
            profile("a", "br-a", "10.0.5.0/24"),
        ]);
        assert_eq!(
            got,
            [
                "profile \"a\": name: profile name \"a\" is used twice; give each profile \
                    its own name",
                "profile \"a\": bridge: bridge \"br-a\" is already used by profile \"a\"; \
                    each profile needs its own bridge",
                "profile \"a\": subnet: 10.0.5.0/24 overlaps 10.0.0.0/16 of profile \
                    \"a\"; give each profile a separate subnet",
            ]
        );
    }

    #[test]
    fn v6_overlap_and_size() {
        let mut a = profile("a", "br-a", "10.0.1.0/24");
        a.subnet_v6 = Some("fd00::/64".parse().unwrap());
        let mut b = profile("b", "br-b", "10.0.2.0/24");
        b.subnet_v6 = Some("fd00::/121".parse().unwrap());
        let got = problems(vec![a, b]);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].contains("IPv6 prefix must be /120 or shorter"));
        assert!(got[1].contains("overlaps fd00::/64"));
    }

    #[test]
    fn small_subnet_and_host_bits() {
        let got = problems(vec![profile("a", "br-a", "10.0.0.5/30")]);
        assert_eq!(got.len(), 2);
        assert!(got[0].contains("write the network address, 10.0.0.4/30"));
        assert!(got[1].contains("IPv4 prefix must be /29 or shorter"));
    }

    #[test]
    fn special_ranges_are_refused() {
        let got = problems(vec![profile("a", "br-a", "127.1.0.0/16")]);
        assert_eq!(
            got,
            [
                "profile \"a\": subnet: 127.1.0.0/16 is in loopback space (127.0.0.0/8), which cannot hold a bridge; use a private range such as 10.231.0.0/16"
            ]
        );
        for bad in ["0.0.0.0/0", "169.254.0.0/24", "224.1.0.0/16", "250.0.0.0/8"] {
            assert_eq!(problems(vec![profile("a", "br-a", bad)]).len(), 1, "{bad}");
        }
        let mut v6 = profile("a", "br-a", "10.0.0.0/24");
        v6.subnet_v6 = Some("fe80::/64".parse().unwrap());
        let got = problems(vec![v6]);
        assert!(got[0].contains("link-local space (fe80::/10)"), "{got:?}");
        let mut ok = profile("a", "br-a", "100.64.0.0/24");
        ok.subnet_v6 = Some("2001:db8::/64".parse().unwrap());
        assert!(ProfileSet::new(vec![ok]).is_ok());
    }

    #[test]
    fn allowlist_rules() {
        let mut a = profile("a", "br-a", "10.0.1.0/24");
        a.mode = EgressMode::Allowlist;
        let mut b = profile("b", "br-b", "10.0.2.0/24");
        b.mode = EgressMode::Internet;
        b.allow = vec!["192.0.2.1".parse::<AllowEntry>().unwrap()];
        let got = problems(vec![a, b]);
        assert!(got[0].contains("the allowlist is empty"), "{got:?}");
        assert!(got[1].contains("no effect in mode \"internet\""), "{got:?}");
    }
}
