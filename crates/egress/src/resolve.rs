//! Host names → addresses, for the allowlist sets of a plan.
//!
//! A [`Resolver`] answers A and AAAA for one name; [`resolve_profiles`]
//! resolves every `host` entry of every allowlist profile once and returns a
//! [`Resolution`], the input `HostPlan::build` turns into set elements.
//! Wildcard entries are never resolved here: only the gateway resolver can
//! learn which subdomains exist (it fills the `<profile>-dns4/6` sets).
//!
//! The resolution is plain data (serializable) so a caller can persist it
//! next to the applied configuration and recompute the same plan later.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, ToSocketAddrs};

use corral_sandbox_core::{AllowTarget, EgressMode, HostName, ProfileSet};
use serde::{Deserialize, Serialize};

/// Resolved addresses per host name (sorted, deduplicated).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolution {
    addrs: BTreeMap<String, Vec<IpAddr>>,
}

impl Resolution {
    /// An empty resolution.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record the addresses of `host` (replacing earlier ones).
    pub fn insert(&mut self, host: &HostName, addrs: impl IntoIterator<Item = IpAddr>) {
        let set: BTreeSet<IpAddr> = addrs.into_iter().collect();
        self.addrs
            .insert(host.normalized(), set.into_iter().collect());
    }

    /// The addresses of `host`; `None` when it was never resolved.
    pub fn get(&self, host: &HostName) -> Option<&[IpAddr]> {
        self.addrs.get(&host.normalized()).map(Vec::as_slice)
    }

    /// Number of names recorded.
    pub fn len(&self) -> usize {
        self.addrs.len()
    }

    /// True when no name is recorded.
    pub fn is_empty(&self) -> bool {
        self.addrs.is_empty()
    }
}

/// Resolving a name failed in a way that must stop the apply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// A name of a profile that does not allow unresolved names has no address.
    #[error(
        "host `{host}` of profile `{profile}` resolved to no address ({reason}); fix the name, check the host's resolver, or set `allow_unresolved = true` on the profile"
    )]
    Unresolved {
        /// The profile.
        profile: String,
        /// The name.
        host: String,
        /// What the resolver said.
        reason: String,
    },
}

/// Why a name has no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LookupError {
    /// The host's resolver (`getaddrinfo`) failed.
    #[error("the host's resolver failed: {0}")]
    System(String),
    /// A fixed table has no entry for the name.
    #[error("no static answer for this name")]
    NoStaticAnswer,
}

/// Answers A and AAAA queries for one name.
pub trait Resolver: Send + Sync {
    /// All addresses of `host`; an empty list or an error means "none".
    fn lookup(&self, host: &HostName) -> Result<Vec<IpAddr>, LookupError>;
}

/// The host's own resolver (`getaddrinfo`, A and AAAA).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolver for SystemResolver {
    fn lookup(&self, host: &HostName) -> Result<Vec<IpAddr>, LookupError> {
        (host.normalized().as_str(), 0u16)
            .to_socket_addrs()
            .map(|it| it.map(|sa| sa.ip()).collect())
            // io::Error is not Clone; its text is all a caller shows.
            .map_err(|e| LookupError::System(e.to_string()))
    }
}

/// A fixed table of answers, for tests and the drill.
#[derive(Debug, Clone, Default)]
pub struct StaticResolver {
    answers: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// An empty table: every name resolves to nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Answer `addrs` for `host` (case-insensitive).
    pub fn with(mut self, host: &str, addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        let key = host.trim_end_matches('.').to_ascii_lowercase();
        self.answers.entry(key).or_default().extend(addrs);
        self
    }
}

impl Resolver for StaticResolver {
    fn lookup(&self, host: &HostName) -> Result<Vec<IpAddr>, LookupError> {
        self.answers
            .get(&host.normalized())
            .cloned()
            .ok_or(LookupError::NoStaticAnswer)
    }
}

/// Resolve every `host` entry of every allowlist profile once.
///
/// A name with no address is an error unless its profile sets
/// `allow_unresolved`, in which case it is recorded with no addresses.
pub fn resolve_profiles(
    profiles: &ProfileSet,
    resolver: &dyn Resolver,
) -> Result<Resolution, ResolveError> {
    let mut out = Resolution::new();
    let mut cache: HashMap<String, Result<Vec<IpAddr>, LookupError>> = HashMap::new();
    for profile in profiles {
        if profile.mode != EgressMode::Allowlist {
            continue;
        }
        for entry in &profile.allow {
            let AllowTarget::Host(host) = &entry.target else {
                continue;
            };
            let answer = cache
                .entry(host.normalized())
                .or_insert_with(|| resolver.lookup(host))
                .clone();
            let addrs = match answer {
                Ok(addrs) if !addrs.is_empty() => addrs,
                failed => {
                    if !profile.allow_unresolved {
                        return Err(ResolveError::Unresolved {
                            profile: profile.name.to_string(),
                            host: host.to_string(),
                            reason: failed
                                .err()
                                .map_or_else(|| "empty answer".to_owned(), |e| e.to_string()),
                        });
                    }
                    Vec::new()
                }
            };
            out.insert(host, addrs);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::profile;

    #[test]
    fn static_answers_are_case_insensitive_and_sorted() {
        let r = StaticResolver::new().with(
            "API.example.com",
            ["192.0.2.2".parse().unwrap(), "192.0.2.1".parse().unwrap()],
        );
        let set = ProfileSet::new(vec![profile(
            "dev",
            "cb-dev",
            "10.90.0.0/24",
            EgressMode::Allowlist,
            &["api.example.com:443/tcp", "*.example.org"],
        )])
        .unwrap();
        let res = resolve_profiles(&set, &r).unwrap();
        assert_eq!(res.len(), 1, "wildcards are not resolved");
        let host = HostName::new("api.EXAMPLE.com").unwrap();
        assert_eq!(
            res.get(&host).unwrap(),
            &[
                "192.0.2.1".parse::<IpAddr>().unwrap(),
                "192.0.2.2".parse().unwrap()
            ]
        );
    }

    #[test]
    fn unresolved_is_an_error_unless_allowed() {
        let mut p = profile(
            "dev",
            "cb-dev",
            "10.90.0.0/24",
            EgressMode::Allowlist,
            &["nowhere.example.com"],
        );
        let set = ProfileSet::new(vec![p.clone()]).unwrap();
        let err = resolve_profiles(&set, &StaticResolver::new()).unwrap_err();
        assert!(err.to_string().contains("allow_unresolved"), "{err}");
        p.allow_unresolved = true;
        let set = ProfileSet::new(vec![p]).unwrap();
        let res = resolve_profiles(&set, &StaticResolver::new()).unwrap();
        let host = HostName::new("nowhere.example.com").unwrap();
        assert_eq!(res.get(&host), Some(&[][..]));
    }

    #[test]
    fn system_resolver_answers_localhost() {
        let addrs = SystemResolver
            .lookup(&HostName::new("localhost").unwrap())
            .unwrap();
        assert!(addrs.iter().any(|a| a.is_loopback()), "{addrs:?}");
    }
}
