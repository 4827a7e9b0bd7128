//! `corral explain` and `GET /v1/explain`: would a packet from a sandbox
//! of a profile reach a destination, and which rule says so. The verdict
//! is the kernel's: corral's live tables read back and walked along the
//! kernel's route ([`Host::trace_live`](corral_egress::host::Host::trace_live));
//! beside it, the plan's own walk
//! ([`HostPlan::trace`](corral_egress::plan::HostPlan::trace), with the
//! learned addresses read back), which names the allow entries behind a
//! verdict. Where the live tables differ from the plan the answer says so,
//! lists the drift and gives both verdicts. This module only gathers those
//! inputs, resolves a name through the profile's gateway, and shapes the
//! answer both front-ends render.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use corral_egress::host::{HostDrift, HostError, LiveAsk};
use corral_egress::nft::live_trace::{LiveTrace, LiveVerdict, Route};
use corral_egress::plan::eval::{Flow, Learned};
use corral_egress::plan::explain::{Proto, Question, one_line, reason, verdict_word};
use corral_egress::plan::trace::{Trace, TraceVerdict};
use corral_gateway::Gateway;
use serde::Serialize;

use super::{HostService, Planned};
use crate::reports::DriftView;

/// How long a name query to the gateway resolver may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// Whose packet is explained.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subject {
    /// The profile.
    pub profile: String,
    /// The sandbox, when one was named.
    pub sandbox: Option<String>,
    /// The sandbox's bound IPv4 address (else the profile's first sandbox
    /// address stands in).
    pub v4: Option<Ipv4Addr>,
    /// The sandbox's bound IPv6 address.
    pub v6: Option<Ipv6Addr>,
}

/// A host name, and what the plan and the gateway say about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NameLookup {
    /// The name.
    pub name: String,
    /// The profile's allow entries listing it, as written.
    pub entries: Vec<String>,
    /// The gateway resolver asked (`None`: not asked, see `note`).
    pub resolver: Option<SocketAddr>,
    /// Its answers (A, and AAAA when the profile has IPv6).
    pub addresses: Vec<IpAddr>,
    /// Why it was not asked, or what went wrong.
    pub note: Option<String>,
}

/// One traced address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    /// The destination address.
    pub address: IpAddr,
    /// The kernel's verdict (the live walk's).
    pub verdict: LiveVerdict,
    /// The plan's verdict (the plan's walk's).
    pub plan_verdict: TraceVerdict,
    /// Why, in words.
    pub reason: String,
    /// The verdict, deciding rule and reason as one line.
    pub line: String,
    /// The walk through the plan.
    pub trace: Trace,
    /// The walk through the live rules.
    pub live: LiveTrace,
    /// Where the kernel routes the packet.
    pub route: Route,
}

/// The answer to one question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The profile.
    pub profile: String,
    /// The sandbox, when one was named.
    pub sandbox: Option<String>,
    /// The question, normalised (`DEST[:PORT]/PROTO`).
    pub question: String,
    /// The destination as asked (an address or a name).
    pub dest: String,
    /// The destination port.
    pub port: Option<u16>,
    /// The protocol.
    pub protocol: Proto,
    /// The kernel's: `allow` when every traced address is allowed (and
    /// there is one), `unknown` when none is blocked but the live walk of
    /// one could not be completed, else `block`.
    pub verdict: LiveVerdict,
    /// The plan's, by the same rule.
    pub plan_verdict: TraceVerdict,
    /// Every difference between the plan and corral's live tables (empty:
    /// the kernel holds exactly the plan), as `corral host verify` lists
    /// them.
    pub drift: Vec<DriftView>,
    /// Set when the destination is a name.
    pub name: Option<NameLookup>,
    /// One per address traced.
    pub answers: Vec<Answer>,
    /// Where the plan came from.
    pub plan: String,
}

/// An explanation could not be given.
#[derive(Debug, thiserror::Error)]
pub enum ExplainError {
    /// The plan has no such profile.
    #[error("profile `{profile}` is not in {origin}; `corral profiles` lists the profiles")]
    NoProfile {
        /// The profile asked for.
        profile: String,
        /// Where the plan came from.
        origin: String,
    },
    /// The live rules could not be read back or walked.
    #[error("reading corral's live nftables tables and routes back from {target}")]
    Live {
        /// `this host` or the namespace.
        target: String,
        /// The cause.
        #[source]
        source: HostError,
    },
    /// The learned addresses could not be read from the target.
    #[error("reading the addresses the gateway resolvers learned from {target}")]
    Learned {
        /// `this host` or the namespace.
        target: String,
        /// The cause.
        #[source]
        source: HostError,
    },
}

impl ExplainError {
    /// The caller asked for something that does not exist.
    pub fn is_usage(&self) -> bool {
        matches!(self, ExplainError::NoProfile { .. })
    }
}

impl HostService {
    /// Explains `question` for `subject` against `planned` (see the module
    /// docs). A name is resolved through the profile's gateway resolver
    /// when it runs, as a sandbox would resolve it, so (as for the
    /// sandbox's own query) its answers enter the profile's learned sets.
    pub fn explain(
        &self,
        planned: &Planned,
        subject: &Subject,
        question: &Question,
    ) -> Result<Explanation, ExplainError> {
        let plan = &planned.plan;
        let no_profile = || ExplainError::NoProfile {
            profile: subject.profile.clone(),
            origin: planned.origin.clone(),
        };
        let bridge = plan
            .bridges
            .iter()
            .find(|b| b.profile.as_str() == subject.profile)
            .ok_or_else(no_profile)?;
        let (addresses, name) = match question.ip() {
            Some(ip) => (vec![ip], None),
            None => {
                let lookup = self.resolve(planned, bridge, &question.dest);
                (lookup.addresses.clone(), Some(lookup))
            }
        };
        // Read after resolving: the gateway has just learned its answers.
        let learned = self
            .target
            .host
            .learned()
            .map_err(|source| ExplainError::Learned {
                target: self.target.describe(),
                source,
            })?;
        let traces = addresses
            .iter()
            .map(|&ip| plan_trace(planned, subject, question, ip, &learned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(no_profile)?;
        let asks: Vec<LiveAsk> = traces
            .iter()
            .map(|t| LiveAsk {
                bridge: bridge.name.to_string(),
                flow: t.flow,
            })
            .collect();
        let reading =
            self.target
                .host
                .trace_live(plan, &asks)
                .map_err(|source| ExplainError::Live {
                    target: self.target.describe(),
                    source,
                })?;
        let drifted = !reading.drift.is_empty();
        let answers: Vec<Answer> = traces
            .into_iter()
            .zip(reading.traces)
            .map(|(trace, (pkt, live))| answer(question, trace, live, pkt.route, drifted))
            .collect();
        let verdict =
            if answers.iter().any(|a| a.verdict == LiveVerdict::Block) || answers.is_empty() {
                LiveVerdict::Block
            } else if answers.iter().all(|a| a.verdict == LiveVerdict::Allow) {
                LiveVerdict::Allow
            } else {
                LiveVerdict::Unknown
            };
        let plan_verdict = if !answers.is_empty()
            && answers
                .iter()
                .all(|a| a.plan_verdict == TraceVerdict::Allow)
        {
            TraceVerdict::Allow
        } else {
            TraceVerdict::Block
        };
        Ok(Explanation {
            profile: subject.profile.clone(),
            sandbox: subject.sandbox.clone(),
            question: question.to_string(),
            dest: question.dest.clone(),
            port: question.port,
            protocol: question.proto,
            verdict,
            plan_verdict,
            drift: reading
                .drift
                .into_iter()
                .map(|d| DriftView::from(&HostDrift::Nft(d)))
                .collect(),
            name,
            answers,
            plan: planned.origin.clone(),
        })
    }

    /// What the plan and the profile's running gateway say about `name`.
    fn resolve(
        &self,
        planned: &Planned,
        bridge: &corral_egress::plan::BridgePlan,
        name: &str,
    ) -> NameLookup {
        let mut lookup = NameLookup {
            name: name.to_owned(),
            entries: planned.plan.entries_listing(bridge.profile.as_str(), name),
            resolver: None,
            addresses: Vec::new(),
            note: None,
        };
        let serves = planned
            .config
            .profiles
            .get(bridge.profile.as_str())
            .is_some_and(corral_gateway::serves_dns);
        if !serves {
            lookup.note = Some(format!(
                "profile {} has no gateway resolver: its sandboxes cannot resolve names",
                bridge.profile
            ));
            return lookup;
        }
        match Gateway::new(self.state_dir(), &bridge.name).status() {
            s if s.is_up() => {}
            other => {
                lookup.note = Some(format!(
                    "the gateway of bridge {} is {other}: the name was not resolved",
                    bridge.name
                ));
                return lookup;
            }
        }
        let server = SocketAddr::new(IpAddr::V4(bridge.gateway_v4.addr()), 53);
        lookup.resolver = Some(server);
        let mut types = vec![corral_gateway::wire::TYPE_A];
        if bridge.gateway_v6.is_some() {
            types.push(corral_gateway::wire::TYPE_AAAA);
        }
        for qtype in types {
            let asked = self
                .target
                .host
                .netns()
                .run(|| corral_gateway::probe::query(server, name, qtype, RESOLVE_TIMEOUT));
            match asked {
                Ok(Ok(resp)) if resp.rcode == 0 => {
                    lookup.addresses.extend(resp.answers.iter().map(|r| r.addr));
                }
                Ok(Ok(resp)) if resp.rcode == 3 => {
                    lookup.note = Some(
                        "the gateway resolver answers NXDOMAIN (the name is not on the allowlist, or does not exist)"
                            .to_owned(),
                    );
                }
                Ok(Ok(resp)) => {
                    lookup.note = Some(format!(
                        "the gateway resolver answers DNS response code {} (its upstream resolvers failed)",
                        resp.rcode
                    ));
                }
                Ok(Err(e)) => lookup.note = Some(e.to_string()),
                Err(e) => lookup.note = Some(format!("cannot query from the target: {e}")),
            }
        }
        lookup.addresses.sort();
        lookup.addresses.dedup();
        let pinned = planned
            .config
            .profiles
            .get(bridge.profile.as_str())
            .is_some_and(|p| p.dns == corral_sandbox_core::DnsPolicy::Corral);
        if pinned && lookup.note.is_none() && !lookup.addresses.is_empty() {
            lookup.note = Some(format!(
                "profile {} is on corral's resolver, which opens a learned address only to the sandbox that resolved it: this lookup from the host opened nothing, so the verdict is the sandbox's own (what it resolved itself)",
                bridge.profile
            ));
        }
        lookup
    }
}

/// The plan's walk of a packet from `subject` to `ip`.
fn plan_trace(
    planned: &Planned,
    subject: &Subject,
    question: &Question,
    ip: IpAddr,
    learned: &Learned,
) -> Option<Trace> {
    let plan = &planned.plan;
    let protocol = question.proto.number(ip);
    let src = match ip {
        IpAddr::V4(_) => subject.v4.map(IpAddr::V4),
        IpAddr::V6(_) => subject.v6.map(IpAddr::V6),
    };
    match src {
        Some(src) => Some(plan.trace(
            &Flow {
                protocol,
                src,
                dst: ip,
                dport: question.port,
            },
            learned,
        )),
        None => plan.trace_profile(&subject.profile, protocol, ip, question.port, learned),
    }
}

/// The kernel's verdict word (`allow`, `block`, `unknown`).
pub fn live_word(v: LiveVerdict) -> &'static str {
    match v {
        LiveVerdict::Allow => "allow",
        LiveVerdict::Block => "block",
        LiveVerdict::Unknown => "unknown",
    }
}

fn agrees(live: LiveVerdict, plan: TraceVerdict) -> bool {
    matches!(
        (live, plan),
        (LiveVerdict::Allow, TraceVerdict::Allow) | (LiveVerdict::Block, TraceVerdict::Block)
    )
}

/// What decided in the kernel, in a few words.
fn live_cause(live: &LiveTrace) -> String {
    if let Some(what) = &live.unknown {
        return format!("unknown: {what}");
    }
    if let Some(r) = &live.rule {
        let set = live
            .set
            .as_ref()
            .map(|s| match &s.element {
                Some(e) => format!(
                    " (set {}, element {})",
                    s.name,
                    corral_egress::plan::render::range_text(e)
                ),
                None => format!(" (set {})", s.name),
            })
            .unwrap_or_default();
        return format!(
            "kernel rule {}#{} (handle {}) `{}`{set}",
            r.chain, r.index, r.handle, r.nft
        );
    }
    if let Some(chain) = &live.policy {
        return format!("the policy of base chain {chain} (drop)");
    }
    live.note
        .clone()
        .unwrap_or_else(|| "no live rule stops it (the base chains' policies accept)".to_owned())
}

fn answer(
    question: &Question,
    trace: Trace,
    live: LiveTrace,
    route: Route,
    drifted: bool,
) -> Answer {
    let address = trace.flow.dst;
    let asked = Question {
        dest: address.to_string(),
        ..question.clone()
    }
    .to_string();
    let plan_line = one_line(&trace, &asked);
    let (reason_text, line) = if !drifted && agrees(live.verdict, trace.verdict) {
        (reason(&trace), plan_line)
    } else {
        let plan_word = verdict_word(trace.verdict);
        let cause = live_cause(&live);
        let why = format!(
            "the kernel's rules differ from the plan: {cause} decides; the plan would {plan_word} it: {}",
            reason(&trace)
        );
        let line = format!(
            "{} {asked} from profile {}: {cause}; the plan says: {plan_line}",
            live_word(live.verdict),
            trace.profile.as_deref().unwrap_or("-"),
        );
        (why, line)
    };
    let (reason_text, line) = match &route {
        Route::Refused(why) => (
            format!("{reason_text} (but routing refuses it now: {why})"),
            format!("{line} (but routing refuses it now: {why})"),
        ),
        _ => (reason_text, line),
    };
    Answer {
        address,
        verdict: live.verdict,
        plan_verdict: trace.verdict,
        reason: reason_text,
        line,
        trace,
        live,
        route,
    }
}
