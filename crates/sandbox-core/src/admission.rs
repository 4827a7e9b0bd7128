//! Whether an allowlist admits a DNS name: the one rule behind the
//! gateway resolver's domain rules, the canary's refusal to probe an
//! allowlisted name, `corral explain`'s "which entry lists this name" and
//! a wildcard's coverage ([`HostName::covers`]).
//!
//! A host entry `h` admits exactly `h`; a wildcard `*.w` admits every
//! strict, label-aligned subdomain of `w` and not `w` itself; an address
//! or CIDR admits no name. Names compare as DNS compares them: ASCII case
//! folded, a trailing dot ignored.

use crate::names::HostName;
use crate::profile::{AllowEntry, AllowTarget};

/// One admitted name pattern (lower case, no trailing dot).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NamePattern {
    /// Exactly this name.
    Exact(String),
    /// Any strict subdomain of this name.
    Subdomains(String),
}

impl NamePattern {
    /// The pattern of an allow target; `None` for an address or CIDR.
    pub fn of(target: &AllowTarget) -> Option<Self> {
        match target {
            AllowTarget::Host(h) => Some(Self::Exact(h.normalized())),
            AllowTarget::Wildcard(w) => Some(Self::Subdomains(w.normalized())),
            AllowTarget::Net(_) => None,
        }
    }

    /// The pattern of a name as an allow entry writes it: `*.w` is a
    /// wildcard, anything else a host.
    pub fn from_written(text: &str) -> Self {
        match text.strip_prefix("*.") {
            Some(w) => Self::Subdomains(normalize(w)),
            None => Self::Exact(normalize(text)),
        }
    }

    /// The name the pattern is written around (`h`, or `w` of `*.w`).
    pub fn domain(&self) -> &str {
        match self {
            Self::Exact(d) | Self::Subdomains(d) => d,
        }
    }

    /// Whether this pattern admits `name` (any case, trailing dot ignored).
    pub fn admits(&self, name: &str) -> bool {
        let name = normalize(name);
        match self {
            Self::Exact(h) => name == *h,
            Self::Subdomains(w) => is_strict_subdomain(&name, w),
        }
    }
}

/// Whether any of `entries` admits `name`.
pub fn allowlist_admits(entries: &[AllowEntry], name: &str) -> bool {
    entries
        .iter()
        .filter_map(|e| NamePattern::of(&e.target))
        .any(|p| p.admits(name))
}

/// A name as DNS compares it: lower case, no trailing dot.
pub fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// True when `name` is a strict subdomain of `parent`, label-aligned
/// (`a.example.com` of `example.com`, never `badexample.com`); both
/// already normalized.
pub fn is_strict_subdomain(name: &str, parent: &str) -> bool {
    name.len() > parent.len() + 1
        && name.ends_with(parent)
        && name.as_bytes()[name.len() - parent.len() - 1] == b'.'
}

impl HostName {
    /// True when `other` equals this name or is a subdomain of it.
    pub fn covers(&self, other: &HostName) -> bool {
        let me = self.normalized();
        NamePattern::Exact(me.clone()).admits(other.as_str())
            || NamePattern::Subdomains(me).admits(other.as_str())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Few short labels, so generated names often share suffixes, and
    /// `ab` vs `b` exercises label alignment.
    fn labels(max: usize) -> impl Strategy<Value = Vec<String>> {
        prop::collection::vec(
            prop::sample::select(vec!["a", "b", "ab", "a-b", "x1"]).prop_map(str::to_owned),
            1..=max,
        )
    }

    /// The law said with labels rather than bytes.
    fn spec(pattern_labels: &[String], wildcard: bool, name_labels: &[String]) -> bool {
        let (p, n) = (pattern_labels.len(), name_labels.len());
        if wildcard {
            n > p && name_labels[n - p..] == *pattern_labels
        } else {
            name_labels == pattern_labels
        }
    }

    fn host(labels: &[String]) -> HostName {
        HostName::new(labels.join(".")).unwrap()
    }

    proptest! {
        #[test]
        fn admission_follows_labels_case_and_trailing_dot(
            p in labels(3), n in labels(5), wildcard: bool, upper: bool, dot: bool,
        ) {
            let pattern = if wildcard {
                NamePattern::Subdomains(p.join("."))
            } else {
                NamePattern::Exact(p.join("."))
            };
            let mut name = n.join(".");
            if upper { name = name.to_ascii_uppercase(); }
            if dot { name.push('.'); }
            prop_assert_eq!(pattern.admits(&name), spec(&p, wildcard, &n));
            let written = if wildcard { format!("*.{}", p.join(".")) } else { p.join(".") };
            prop_assert_eq!(NamePattern::from_written(&written.to_ascii_uppercase()), pattern);
        }

        #[test]
        fn covers_is_the_host_or_its_wildcard(p in labels(3), n in labels(5)) {
            prop_assert_eq!(
                host(&p).covers(&host(&n)),
                spec(&p, false, &n) || spec(&p, true, &n)
            );
        }

        #[test]
        fn an_allowlist_admits_what_one_of_its_names_admits(
            entries in prop::collection::vec((labels(2), 0u8..3), 0..4), n in labels(4),
        ) {
            let allow: Vec<AllowEntry> = entries
                .iter()
                .map(|(l, kind)| {
                    let text = match kind {
                        0 => l.join("."),
                        1 => format!("*.{}", l.join(".")),
                        _ => "203.0.113.0/24".to_owned(),
                    };
                    text.parse().unwrap()
                })
                .collect();
            let expected = entries
                .iter()
                .any(|(l, kind)| *kind < 2 && spec(l, *kind == 1, &n));
            prop_assert_eq!(allowlist_admits(&allow, &n.join(".")), expected);
        }
    }

    #[test]
    fn addresses_admit_no_name() {
        let net: AllowEntry = "203.0.113.0/24".parse().unwrap();
        assert_eq!(NamePattern::of(&net.target), None);
        assert!(!allowlist_admits(&[net], "example.com"));
        assert!(!NamePattern::Subdomains("example.com".into()).admits("badexample.com"));
        assert!(!NamePattern::Subdomains("example.com".into()).admits("example.com"));
    }
}
