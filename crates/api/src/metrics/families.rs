//! Every family corrald exports, registered once. Label values are
//! bounded by the configuration (profiles, rule ids, members) or by
//! corral's own vocabularies (states, kinds, outcomes): no sandbox name,
//! address or host name is a label, so a fleet of short-lived sandboxes
//! mints no series per sandbox and the exposition names none.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

/// A sandbox count's labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SandboxLabels {
    /// `running`, `stopped`, `frozen`, `transitioning`, `error`, `unknown`.
    pub state: String,
    /// Its profile, `none` for an unprofiled sandbox.
    pub profile: String,
    /// `container`, `vm`, … (the backend's kind).
    pub kind: String,
}

/// A profile and the rule that blocked.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    /// The profile.
    pub profile: String,
    /// The rule's stable id (`<chain>/<what>`).
    pub rule: String,
}

/// One profile.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProfileLabels {
    /// The profile.
    pub profile: String,
}

/// A profile's kernel counter.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictCounterLabels {
    /// The profile.
    pub profile: String,
    /// `accepted` or `blocked`.
    pub verdict: String,
}

/// A DNS decision.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DnsLabels {
    /// The profile whose gateway decided.
    pub profile: String,
    /// `allowed`, `refused`, or `unrecorded` (over the asker's budget:
    /// counted, not recorded one by one, so which way is unknown).
    pub decision: String,
}

/// A canary run.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CanaryLabels {
    /// The sandbox's profile (`none` when the event names none).
    pub profile: String,
    /// `passed`, `failed` or `refused`.
    pub outcome: String,
}

/// A lifetime's end the reaper enforced.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LifetimeLabels {
    /// `expired` (deleted) or `idle_stopped` (stopped).
    pub event: String,
}

/// A drift reaction.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReactionLabels {
    /// `healed` or `cut`.
    pub reaction: String,
}

/// A part of the host's enforcement.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct AreaLabels {
    /// `nft_inet`, `nft_bridge` (corral's two tables), `bridge`,
    /// `sysctl`, `host` (the host's networks), `port`.
    pub area: String,
}

/// A verdict.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct VerdictLabels {
    /// `passed`, `failed`, `refused`, or `none` (never judged).
    pub verdict: String,
}

/// A cluster standing.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StandingLabels {
    /// `in_rotation` or `drained`.
    pub standing: String,
}

/// A cluster member.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MemberLabels {
    /// The Incus member.
    pub member: String,
}

/// A source the scrape reads.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SourceLabels {
    /// `sandboxes`, `host`, `gateways`, `store`, `cluster`.
    pub source: String,
}

/// The outcomes a canary event can carry; pre-set to zero per profile.
pub const OUTCOMES: [&str; 3] = ["passed", "failed", "refused"];
/// The DNS decisions; pre-set to zero per profile.
pub const DECISIONS: [&str; 3] = ["allowed", "refused", "unrecorded"];
/// The drift areas, each always present (0 or 1).
pub const AREAS: [&str; 6] = ["nft_inet", "nft_bridge", "bridge", "sysctl", "host", "port"];
/// The verdicts, each always present.
pub const VERDICTS: [&str; 4] = ["passed", "failed", "refused", "none"];
/// The cluster standings, each always present.
pub const STANDINGS: [&str; 2] = ["in_rotation", "drained"];
/// The drift reactions, each always present.
pub const REACTIONS: [&str; 2] = ["healed", "cut"];

/// A canary's probes take up to a few seconds (each check is bounded,
/// 2-10 s by default): 10 ms to ~40 s.
fn canary_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.01, 2.0, 13))
}

/// A read-back or a heal is a netlink dump or transaction: 1 ms to ~4 s.
fn host_buckets() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 13))
}

/// The families, each a cheap handle onto what the registry encodes.
#[derive(Debug, Clone)]
pub struct Families {
    /// Sandboxes by state, profile and kind (read at each scrape).
    pub sandboxes: Family<SandboxLabels, Gauge>,
    /// Blocked packets the drop log recorded, by profile and rule.
    pub blocked: Family<RuleLabels, Counter>,
    /// Blocked packets a profile's log budget kept out of the drop log.
    pub blocked_unlogged: Family<ProfileLabels, Counter>,
    /// The kernel's packet counters of each profile's rules, by verdict.
    pub kernel_packets: Family<VerdictCounterLabels, Counter>,
    /// DNS decisions of the gateways' resolvers.
    pub dns: Family<DnsLabels, Counter>,
    /// 1 while a profile's gateway (dnsmasq) runs.
    pub gateway_up: Family<ProfileLabels, Gauge>,
    /// Canary runs by profile and outcome.
    pub canary_runs: Family<CanaryLabels, Counter>,
    /// Each canary run's probing time.
    pub canary_duration: Histogram,
    /// Each read-back of the live host against the plan corrald ran.
    pub verify_duration: Histogram,
    /// Each drift reaction, from the read-back that found it to the host
    /// matching again (heal: a re-apply and read-back) or its ports down.
    pub reaction_duration: Family<ReactionLabels, Histogram, fn() -> Histogram>,
    /// Unix time of the last apply (or refresh) recorded.
    pub applied_at: Gauge,
    /// 1 when the area differs from the plan.
    pub drift: Family<AreaLabels, Gauge>,
    /// Differences from the plan, all areas.
    pub drift_items: Gauge,
    /// Sandboxes by the gate's last verdict.
    pub verdicts: Family<VerdictLabels, Gauge>,
    /// The watchdog's interval; 0 when no watchdog runs.
    pub watchdog_interval: Gauge,
    /// Cluster members by standing.
    pub members: Family<StandingLabels, Gauge>,
    /// 1 while a member is in rotation.
    pub member_in_rotation: Family<MemberLabels, Gauge>,
    /// 1 when the scrape could read the source.
    pub source_up: Family<SourceLabels, Gauge>,
    /// Audit records the trail follower folded in.
    pub trail_records: Counter,
    /// Lifetimes enforced: sandboxes deleted past their time to live,
    /// stopped idle past their limit.
    pub lifetime_ends: Family<LifetimeLabels, Counter>,
}

impl Families {
    /// Every family, registered under `corral_` in `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let f = Self {
            sandboxes: Family::default(),
            blocked: Family::default(),
            blocked_unlogged: Family::default(),
            kernel_packets: Family::default(),
            dns: Family::default(),
            gateway_up: Family::default(),
            canary_runs: Family::default(),
            canary_duration: canary_buckets(),
            verify_duration: host_buckets(),
            reaction_duration: Family::new_with_constructor(host_buckets),
            applied_at: Gauge::default(),
            drift: Family::default(),
            drift_items: Gauge::default(),
            verdicts: Family::default(),
            watchdog_interval: Gauge::default(),
            members: Family::default(),
            member_in_rotation: Family::default(),
            source_up: Family::default(),
            trail_records: Counter::default(),
            lifetime_ends: Family::default(),
        };
        let r = registry;
        r.register(
            "sandboxes",
            "Sandboxes by state, profile and kind, as the provider lists them at the scrape",
            f.sandboxes.clone(),
        );
        r.register(
            "blocked_packets",
            "Packets corral's rules blocked, by profile and deciding rule id, from the drop log (the audit collector's records)",
            f.blocked.clone(),
        );
        r.register(
            "blocked_unlogged_packets",
            "Blocked packets a profile's log budget kept out of the drop log (counted by the kernel, reported by the collector)",
            f.blocked_unlogged.clone(),
        );
        r.register(
            "kernel_packets",
            "Packets each profile's rules accepted or blocked, from the kernel's rule counters (read at the scrape; they restart with each new ruleset: an apply or a heal)",
            f.kernel_packets.clone(),
        );
        r.register(
            "dns_decisions",
            "Names the gateways' resolvers answered (allowed) or refused, by profile",
            f.dns.clone(),
        );
        r.register(
            "gateway_up",
            "1 while the profile's gateway (dnsmasq) runs, 0 when stopped or stale",
            f.gateway_up.clone(),
        );
        r.register(
            "canary_runs",
            "Canary runs (start gate, watchdog, on demand) by profile and outcome",
            f.canary_runs.clone(),
        );
        r.register_with_unit(
            "canary_duration",
            "Each canary run's probing time (its checks run at once: the longest check)",
            Unit::Seconds,
            f.canary_duration.clone(),
        );
        r.register_with_unit(
            "host_verify_duration",
            "Each read-back of the live host against the plan this corrald ran",
            Unit::Seconds,
            f.verify_duration.clone(),
        );
        r.register_with_unit(
            "host_reaction_duration",
            "Each drift reaction: healed (a re-apply of the recorded plan, read back clean) or cut (ports down), from the read-back that found the drift",
            Unit::Seconds,
            f.reaction_duration.clone(),
        );
        r.register(
            "host_applied_timestamp_seconds",
            "Unix time of the last apply or refresh on record (0: nothing applied)",
            f.applied_at.clone(),
        );
        r.register(
            "host_drift",
            "1 when the area differs from the plan in force (a read-back at the scrape)",
            f.drift.clone(),
        );
        r.register(
            "host_drift_items",
            "Differences between the plan in force and the live host, all areas",
            f.drift_items.clone(),
        );
        r.register(
            "sandbox_verdicts",
            "Sandboxes by the verification gate's last verdict (the watchdog's standing)",
            f.verdicts.clone(),
        );
        r.register_with_unit(
            "watchdog_interval",
            "How often the watchdog re-verifies running profiled sandboxes; 0 when none runs",
            Unit::Seconds,
            f.watchdog_interval.clone(),
        );
        r.register(
            "cluster_members",
            "Incus cluster members by standing in corral's rotation (0 and 0 off a cluster)",
            f.members.clone(),
        );
        r.register(
            "cluster_member_in_rotation",
            "1 while the member takes profiled work, 0 while drained",
            f.member_in_rotation.clone(),
        );
        r.register(
            "scrape_source_up",
            "1 when the scrape could read the source; 0 leaves that source's families as last read",
            f.source_up.clone(),
        );
        r.register(
            "audit_records",
            "Audit-trail records folded into these families since corrald started",
            f.trail_records.clone(),
        );
        r.register(
            "sandbox_lifetime_ends",
            "Sandboxes the reaper deleted past their time to live (expired) or stopped idle past their limit (idle_stopped)",
            f.lifetime_ends.clone(),
        );
        for event in ["expired", "idle_stopped"] {
            let _ = f.lifetime_ends.get_or_create(&LifetimeLabels {
                event: event.to_owned(),
            });
        }
        for s in STANDINGS {
            let _ = f.members.get_or_create(&StandingLabels {
                standing: s.to_owned(),
            });
        }
        for r in REACTIONS {
            let _ = f.reaction_duration.get_or_create(&ReactionLabels {
                reaction: r.to_owned(),
            });
        }
        f
    }

    /// Zero series for `profiles`, so a counter exists (and `rate()` has
    /// a start) before its first event.
    pub fn preset_profiles<'a>(&self, profiles: impl IntoIterator<Item = &'a str>) {
        for p in profiles {
            for o in OUTCOMES {
                let _ = self.canary_runs.get_or_create(&CanaryLabels {
                    profile: p.to_owned(),
                    outcome: o.to_owned(),
                });
            }
            for d in DECISIONS {
                let _ = self.dns.get_or_create(&DnsLabels {
                    profile: p.to_owned(),
                    decision: d.to_owned(),
                });
            }
            let _ = self.blocked_unlogged.get_or_create(&ProfileLabels {
                profile: p.to_owned(),
            });
        }
    }
}
