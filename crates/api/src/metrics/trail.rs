//! The event families, folded from the audit trail as it grows. The trail
//! is where every writer on this host lands — the collector's drop-log
//! and DNS records, the store's lifecycle and verification events, the
//! kernel watch's drift reactions — whichever process wrote them (corrald,
//! `corral verify`, `corral host watch`), so nothing has to be wired into
//! each writer, and a count here always has a record behind it that
//! `corral log` shows. Counting starts at the trail's end when corrald
//! starts, as a Prometheus counter does (a restart is a reset).

use std::time::Duration;

use corral_sandbox_core::audit::NetRecord;
use corral_sandbox_core::verify::EventOutcome;
use corral_service::audit::{AuditLine, Entry, Follower};
use corral_service::hooks::Event;

use super::families::{
    CanaryLabels, DnsLabels, Families, LifetimeLabels, ProfileLabels, ReactionLabels, RuleLabels,
};

/// How often the follower reads what was appended.
pub const POLL: Duration = Duration::from_millis(500);

fn seconds(ms: u64) -> f64 {
    // Millisecond counts fit f64 exactly far beyond any real duration.
    #[allow(clippy::cast_precision_loss)]
    let s = ms as f64 / 1000.0;
    s
}

impl Families {
    /// Count one record of the trail.
    pub fn fold(&self, line: &AuditLine) {
        self.trail_records.inc();
        match &line.entry {
            Entry::Net(NetRecord::Blocked(b)) => {
                self.blocked
                    .get_or_create(&RuleLabels {
                        profile: b.profile.clone(),
                        rule: b.rule.clone(),
                    })
                    .inc();
            }
            Entry::Net(NetRecord::Suppressed { profile, packets }) => {
                self.blocked_unlogged
                    .get_or_create(&ProfileLabels {
                        profile: profile.clone(),
                    })
                    .inc_by(*packets);
            }
            Entry::Net(NetRecord::DnsAnswered(d)) => self.dns_decision(&d.profile, "allowed", 1),
            Entry::Net(NetRecord::DnsRefused(d)) => self.dns_decision(&d.profile, "refused", 1),
            Entry::Net(NetRecord::DnsSuppressed {
                profile, decisions, ..
            }) => self.dns_decision(profile, "unrecorded", *decisions),
            Entry::Sandbox(Event::Verification(v)) => {
                let outcome = match v.outcome {
                    EventOutcome::Passed => "passed",
                    EventOutcome::Failed => "failed",
                    EventOutcome::Refused => "refused",
                };
                self.canary_runs
                    .get_or_create(&CanaryLabels {
                        profile: v
                            .profile
                            .as_ref()
                            .map_or_else(|| "none".to_owned(), |p| p.as_str().to_owned()),
                        outcome: outcome.to_owned(),
                    })
                    .inc();
                // A refused run probed nothing: no duration to tell.
                if let Some(longest) = v.checks.iter().map(|c| c.elapsed_ms).max() {
                    self.canary_duration.observe(seconds(longest));
                }
            }
            Entry::Sandbox(Event::HostDrift { reaction, ms, .. }) => {
                // `heal failed, cut` ends in a cut.
                let reaction = if reaction == "healed" {
                    "healed"
                } else {
                    "cut"
                };
                self.reaction_duration
                    .get_or_create(&ReactionLabels {
                        reaction: reaction.to_owned(),
                    })
                    .observe(seconds(*ms));
            }
            Entry::Sandbox(e @ (Event::Expired { .. } | Event::IdleStopped { .. })) => {
                self.lifetime_ends
                    .get_or_create(&LifetimeLabels {
                        event: e.type_name().to_owned(),
                    })
                    .inc();
            }
            _ => {}
        }
    }

    fn dns_decision(&self, profile: &str, decision: &str, n: u64) {
        self.dns
            .get_or_create(&DnsLabels {
                profile: profile.to_owned(),
                decision: decision.to_owned(),
            })
            .inc_by(n);
    }

    /// Fold what `trail` reads, every [`POLL`], on a thread of its own for
    /// the process's life.
    pub fn follow(&self, mut trail: Follower) -> std::io::Result<()> {
        let families = self.clone();
        std::thread::Builder::new()
            .name("metrics-trail".to_owned())
            .spawn(move || {
                loop {
                    for line in trail.poll() {
                        families.fold(&line);
                    }
                    std::thread::sleep(POLL);
                }
            })
            .map(|_| ())
    }
}
