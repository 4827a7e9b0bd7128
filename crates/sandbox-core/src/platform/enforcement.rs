//! Egress classification: how strongly a sandbox's egress policy is held,
//! and where. The trust order is the derived `Ord` of [`Enforcement`]; the
//! site is reported beside it and never changes the rank.

use std::fmt;

use serde::{Deserialize, Serialize};

/// How a sandbox's egress policy is held, in increasing order of trust.
///
/// "Enforced on this host" and "enforced on an attested executor" are the
/// same rank: both are nftables on a Linux bridge outside the guest. A
/// provider-host filter verified by a canary ranks strictly below them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    /// Nothing outside the guest holds the policy.
    NotEnforced,
    /// A filter on the provider host, proven for one sandbox by a passing
    /// canary. Only the verification gate grants this, never a provider.
    VerifiedPerSandbox,
    /// Host-kernel enforcement corral controls (here or on an attested executor).
    Enforced,
}

impl Enforcement {
    /// Every value, lowest trust first.
    pub const ALL: [Enforcement; 3] = [
        Enforcement::NotEnforced,
        Enforcement::VerifiedPerSandbox,
        Enforcement::Enforced,
    ];
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Enforcement::NotEnforced => "not enforced",
            Enforcement::VerifiedPerSandbox => "verified per sandbox",
            Enforcement::Enforced => "enforced",
        })
    }
}

/// Where the enforcing filter runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnforcementSite {
    /// nftables on this host's profile bridges.
    ThisHost,
    /// nftables on a remote executor the operator attests runs corral's
    /// host enforcement.
    AttestedExecutor,
    /// A filter on the provider's host (Tart Softnet on the Mac).
    ProviderHost,
    /// nftables on an Incus cluster member whose corral's last
    /// attestation passed and is younger than the attestation interval.
    AttestedMember,
}

impl fmt::Display for EnforcementSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EnforcementSite::ThisHost => "this host",
            EnforcementSite::AttestedExecutor => "attested executor",
            EnforcementSite::ProviderHost => "provider host",
            EnforcementSite::AttestedMember => "attested cluster member",
        })
    }
}

/// What separates the guest from the host kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// None: the workload is a host process.
    None,
    /// Namespaces on the host's kernel (containers, bubblewrap).
    SharedKernel,
    /// Its own guest kernel (a virtual machine).
    DedicatedKernel,
}

impl fmt::Display for Isolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Isolation::None => "no isolation",
            Isolation::SharedKernel => "shared kernel",
            Isolation::DedicatedKernel => "dedicated kernel",
        })
    }
}

/// An egress classification: the rank and, when something enforces, where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Classification {
    /// The rank in the trust order.
    pub enforcement: Enforcement,
    /// Where the filter runs; `None` when nothing enforces.
    pub site: Option<EnforcementSite>,
}

impl Classification {
    /// Nothing enforces.
    pub const NONE: Classification = Classification {
        enforcement: Enforcement::NotEnforced,
        site: None,
    };
}

impl Classification {
    /// The classification of work placed on an Incus cluster member, where
    /// `self` is how this host's enforcement of the kind is classified:
    /// on an attested member, host-kernel enforcement keeps its rank (as
    /// on an attested executor) at the attested-member site; on a member
    /// that is not attested nothing is known to enforce — not enforced.
    pub fn on_member(self, attested: bool) -> Classification {
        match (attested, self.enforcement) {
            (false, _) => Classification::NONE,
            (true, Enforcement::Enforced) => Classification {
                enforcement: Enforcement::Enforced,
                site: Some(EnforcementSite::AttestedMember),
            },
            (true, _) => self,
        }
    }
}

impl fmt::Display for Classification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.site {
            Some(site) => write!(f, "{} ({site})", self.enforcement),
            None => write!(f, "{}", self.enforcement),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn classification() -> impl Strategy<Value = Classification> {
        (
            prop::sample::select(Enforcement::ALL.to_vec()),
            prop::option::of(prop::sample::select(vec![
                EnforcementSite::ThisHost,
                EnforcementSite::AttestedExecutor,
                EnforcementSite::ProviderHost,
                EnforcementSite::AttestedMember,
            ])),
        )
            .prop_map(|(enforcement, site)| Classification { enforcement, site })
    }

    proptest! {
        /// An unattested member is not enforced whatever the kind; an
        /// attested one never ranks above what the kind is on this host,
        /// and host-kernel enforcement keeps its rank there.
        #[test]
        fn a_member_ranks_as_attested_executors_do(c in classification(), attested: bool) {
            let on = c.on_member(attested);
            if attested {
                prop_assert_eq!(on.enforcement, c.enforcement);
                if c.enforcement == Enforcement::Enforced {
                    prop_assert_eq!(on.site, Some(EnforcementSite::AttestedMember));
                }
            } else {
                prop_assert_eq!(on, Classification::NONE);
            }
            prop_assert!(on.enforcement <= c.enforcement);
        }
    }

    #[test]
    fn trust_order() {
        assert!(Enforcement::NotEnforced < Enforcement::VerifiedPerSandbox);
        assert!(Enforcement::VerifiedPerSandbox < Enforcement::Enforced);
        let mut sorted = Enforcement::ALL;
        sorted.sort();
        assert_eq!(sorted, Enforcement::ALL);
    }

    #[test]
    fn serde_names() {
        assert_eq!(
            serde_json::to_string(&Enforcement::VerifiedPerSandbox).unwrap(),
            "\"verified-per-sandbox\""
        );
        assert_eq!(
            serde_json::to_string(&EnforcementSite::AttestedExecutor).unwrap(),
            "\"attested-executor\""
        );
    }
}
