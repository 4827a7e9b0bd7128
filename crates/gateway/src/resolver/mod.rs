//! corral's own resolver policy, the first piece of the gateway that
//! replaces dnsmasq (docs/gateway.md, "corral's resolver policy"): what a
//! sandbox's query may become upstream, and what an upstream's answer may
//! become for the sandbox ([`Policy::decide`], [`Policy::answer`]: pure,
//! messages in, messages out), one exchange with the upstream
//! ([`Policy::resolve`]), and the server on a bridge that learns every
//! address it hands out before the answer leaves ([`Resolver`]). dnsmasq
//! still serves every bridge in production today.
//!
//! Both ways are rebuilt, never passed on as sent:
//! - **a query** goes upstream as one question (A or AAAA, class IN) for a
//!   name the profile admits, in lower case (the letter case of a name is
//!   a channel: one bit a letter), with corral's own id, the recursion bit
//!   and corral's own EDNS (no client option, no extra record);
//! - **an answer** comes back as the client's question and, from the
//!   upstream's answer section, only the CNAME chain from that name
//!   through names the profile admits and the A/AAAA records at its end:
//!   no authority or additional records, no reserved or host-network
//!   address, at most [`Policy::answer_cap`] addresses, every TTL clamped
//!   to [`Policy::ttl_floor`]..=[`Policy::ttl_ceiling`].
//!
//! Every refusal carries an Extended DNS Error (RFC 8914) whose text names
//! the profile and what to ask the operator for, when the client sent
//! EDNS (a response may carry EDNS only then, RFC 6891 §7).

mod answer;
mod askers;
mod audit;
mod ede;
mod exchange;
mod hosted;
mod query;
pub(crate) mod recorded;
mod serve;
#[cfg(test)]
mod tests;

use std::net::IpAddr;

use hickory_proto::op::Message;
use ipnet::IpNet;

use crate::names::NameRules;
use corral_sandbox_core::{EgressMode, Profile};

pub use askers::Askers;
pub use audit::{AUDIT_FILE, AuditRecord, AuditSink, FileSink, Outcome};
pub use ede::{EDE_BLOCKED, EDE_NOT_SUPPORTED, EDE_OTHER, ExtendedError, extended_errors};
pub use exchange::{Exchange, Transport, Upstreams};
pub use hosted::Hosted;
pub use recorded::{
    RESOLVER_FILE, RecordId, Recorded, ResolverSpec, UPSTREAM_TIMEOUT, record_all, recorded,
};
pub use serve::{Bounds, Counters, Learn, LearnFailure, NftLearner, Resolver, bind};

/// The most addresses one answer hands out unless a policy says otherwise
/// (a hostile authority may answer thousands; every one would be learned).
pub const DEFAULT_ANSWER_CAP: usize = 32;

/// The EDNS payload size corral offers and answers with (the DNS flag day
/// 2020 value: no fragmented UDP).
pub const EDNS_PAYLOAD: u16 = 1232;

/// A profile's resolver policy.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The profile, as refusals name it.
    pub profile: String,
    /// The names it admits.
    pub names: NameRules,
    /// Most addresses one answer carries; the rest are cut.
    pub answer_cap: usize,
    /// Least TTL handed out, seconds.
    pub ttl_floor: u32,
    /// Most TTL handed out, seconds.
    pub ttl_ceiling: u32,
    /// Addresses no answer may hold: corral's reserved list and the host's
    /// own networks.
    pub refused_nets: Vec<IpNet>,
}

impl Policy {
    /// The policy of `profile`'s allowlist: the default cap, TTLs up to
    /// the gateway's client cap, corral's reserved list and
    /// `host_networks` refused.
    pub fn for_profile(profile: &Profile, host_networks: &[IpNet]) -> Policy {
        let mut refused_nets = corral_sandbox_core::reserved::reserved_nets();
        refused_nets.extend_from_slice(host_networks);
        Policy {
            profile: profile.name.to_string(),
            names: match profile.mode {
                EgressMode::Internet => NameRules::any_name(),
                _ => NameRules::from_allow(&profile.allow),
            },
            answer_cap: DEFAULT_ANSWER_CAP,
            ttl_floor: 0,
            ttl_ceiling: u32::try_from(crate::DnsTiming::default().client_ttl_cap.as_secs())
                .unwrap_or(u32::MAX),
            refused_nets,
        }
    }

    fn clamp_ttl(&self, ttl: u32) -> u32 {
        ttl.clamp(self.ttl_floor, self.ttl_ceiling.max(self.ttl_floor))
    }

    fn refuses(&self, addr: IpAddr) -> bool {
        self.refused_nets.iter().any(|n| n.contains(&addr))
    }
}

/// What to do with a sandbox's query.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Send this query upstream (the sandbox's, rebuilt), then hand the
    /// upstream's answer to [`Policy::answer`].
    Forward(Message),
    /// Answer the sandbox with this at once; nothing goes upstream.
    Answer(Message),
    /// Send nothing: the message is not a query (answering a response
    /// would let two resolvers bounce messages off each other).
    Ignore,
}

/// An address an answer handed out, which the profile's sets learn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Learned {
    /// The name that holds it (the end of the CNAME chain), lower case,
    /// without the final dot.
    pub name: String,
    /// The address.
    pub addr: IpAddr,
    /// Its TTL as handed out (clamped).
    pub ttl: u32,
}

/// The sandbox's answer, rebuilt from the upstream's.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered {
    /// What the sandbox gets.
    pub response: Message,
    /// The addresses in it.
    pub learned: Vec<Learned>,
    /// Addresses past [`Policy::answer_cap`], cut.
    pub cut: usize,
    /// Addresses in [`Policy::refused_nets`], dropped.
    pub refused: usize,
}
