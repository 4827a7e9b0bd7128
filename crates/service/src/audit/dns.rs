//! DNS decisions from the gateway's own words: each gateway's dnsmasq
//! runs with `log-queries=extra`, which writes every query, how it was
//! settled and every address answered, each line carrying the query's
//! serial number and the asker's address:
//!
//! ```text
//! Dec  1 10:32:06 dnsmasq[22141]: 1 10.90.0.5/49471 query[A] evil.test from 10.90.0.5
//! Dec  1 10:32:06 dnsmasq[22141]: 1 10.90.0.5/49471 config evil.test is NXDOMAIN
//! Dec  1 10:32:16 dnsmasq[22348]: 2 10.90.0.5/60340 forwarded up.test to 198.18.0.53
//! Dec  1 10:32:16 dnsmasq[22348]: 2 10.90.0.5/60340 reply up.test is 198.51.100.7
//! ```
//!
//! A name settled by the configuration as NXDOMAIN (`address=/#/`, the
//! allowlist's catch-all) is a refusal; a name answered from upstream
//! (`reply`, `cached`) is an answer, with every address in it. A reply's
//! lines come together, so an answer is complete when a line of another
//! query (or the end of what was read) follows it.
//!
//! What one sandbox can put in the trail is bounded: an answer records its
//! first [`MAX_ADDRESSES`] addresses and counts the rest (`omitted`); an
//! asker gets [`MAX_DECISIONS_PER_READ`] decisions per read of the log
//! (the collector reads every 200 ms), the rest counted in one
//! `dns_suppressed` record. Adds the kernel refused because a learned set
//! was full (`nftset inet corral <set> Error: …`, one line per address)
//! become one `learn_refused` count per set and read.

use std::collections::BTreeMap;
use std::net::IpAddr;

use corral_sandbox_core::audit::{DnsDecision, NetRecord};

/// Queries waiting for their reply (forwarded upstream) kept at most; an
/// upstream that never answers must not grow this without bound.
const MAX_PENDING: usize = 1024;

/// Addresses one answer records; the rest are counted.
pub const MAX_ADDRESSES: usize = 64;
/// Decisions one asker gets recorded per read of the gateway's log.
pub const MAX_DECISIONS_PER_READ: u64 = 64;

/// A query seen, not yet settled.
#[derive(Debug, Clone)]
struct Pending {
    src: IpAddr,
    name: String,
    qtype: String,
    addresses: Vec<IpAddr>,
    answered: bool,
}

/// Turns one gateway's log lines into DNS decisions (see the module docs).
#[derive(Debug)]
pub struct DnsTracker {
    profile: String,
    pending: BTreeMap<u64, Pending>,
    last_serial: Option<u64>,
    /// Decisions recorded this read, per asker.
    recorded: BTreeMap<IpAddr, u64>,
    /// Decisions over the budget this read, per asker.
    suppressed: BTreeMap<IpAddr, u64>,
    /// Refused learned-set adds this read, per set.
    refused: BTreeMap<String, u64>,
}

impl DnsTracker {
    /// A tracker for the gateway of `profile`.
    pub fn new(profile: &str) -> Self {
        Self {
            profile: profile.to_owned(),
            pending: BTreeMap::new(),
            last_serial: None,
            recorded: BTreeMap::new(),
            suppressed: BTreeMap::new(),
            refused: BTreeMap::new(),
        }
    }

    /// Feeds one log line; returns the decisions it completes.
    pub fn line(&mut self, line: &str) -> Vec<NetRecord> {
        let mut out = Vec::new();
        if let Some(set) = refused_add(line) {
            *self.refused.entry(set.to_owned()).or_insert(0) += 1;
            return out;
        }
        let Some(q) = parse(line) else {
            return out;
        };
        if self.last_serial.is_some_and(|s| s != q.serial) {
            self.flush_answered(&mut out);
        }
        self.last_serial = Some(q.serial);
        match q.what {
            What::Query { qtype, name } => {
                if self.pending.len() >= MAX_PENDING {
                    self.pending.pop_first();
                }
                self.pending.insert(
                    q.serial,
                    Pending {
                        src: q.src,
                        name,
                        qtype,
                        addresses: Vec::new(),
                        answered: false,
                    },
                );
            }
            What::Config { value } => {
                if let Some(p) = self.pending.remove(&q.serial) {
                    let record = match value.parse::<IpAddr>() {
                        Ok(a) => NetRecord::DnsAnswered(self.decision(p, vec![a])),
                        Err(_) => NetRecord::DnsRefused(self.decision(p, Vec::new())),
                    };
                    self.emit(&mut out, record);
                }
            }
            What::Answer { value } => {
                if let Some(p) = self.pending.get_mut(&q.serial) {
                    p.answered = true;
                    if let Ok(a) = value.parse::<IpAddr>() {
                        p.addresses.push(a);
                    }
                }
            }
        }
        out
    }

    /// Feeds one line of corral's resolver's own trail (`resolver.jsonl`,
    /// `corral_gateway::resolver::AuditRecord`); returns its decision,
    /// within the asker's budget like dnsmasq's. A line that is not a
    /// record (a partial write cut by a crash) is skipped.
    pub fn resolver_line(&mut self, line: &str) -> Vec<NetRecord> {
        use corral_gateway::resolver::{AuditRecord, Outcome};
        let mut out = Vec::new();
        let Ok(r) = serde_json::from_str::<AuditRecord>(line) else {
            return out;
        };
        let p = Pending {
            src: r.src,
            name: r.name,
            qtype: r.qtype,
            addresses: Vec::new(),
            answered: true,
        };
        let record = match r.outcome {
            Outcome::Answered => NetRecord::DnsAnswered(self.decision(p, r.addresses)),
            Outcome::Refused => NetRecord::DnsRefused(self.decision(p, Vec::new())),
            Outcome::Full => {
                let set = r
                    .set
                    .unwrap_or_else(|| format!("{} learned set", self.profile));
                *self.refused.entry(set).or_insert(0) += 1;
                NetRecord::DnsRefused(self.decision(p, Vec::new()))
            }
        };
        self.emit(&mut out, record);
        out
    }

    /// Everything answered so far (call at the end of what was read),
    /// then the counts of what this read did not record one by one; the
    /// budgets start again.
    pub fn flush(&mut self) -> Vec<NetRecord> {
        let mut out = Vec::new();
        self.flush_answered(&mut out);
        for (src, decisions) in std::mem::take(&mut self.suppressed) {
            out.push(NetRecord::DnsSuppressed {
                profile: self.profile.clone(),
                src,
                decisions,
            });
        }
        for (set, addresses) in std::mem::take(&mut self.refused) {
            out.push(NetRecord::LearnRefused {
                profile: self.profile.clone(),
                set,
                addresses,
            });
        }
        self.recorded.clear();
        out
    }

    /// Records `record` within its asker's budget, or counts it.
    fn emit(&mut self, out: &mut Vec<NetRecord>, record: NetRecord) {
        let (NetRecord::DnsAnswered(d) | NetRecord::DnsRefused(d)) = &record else {
            out.push(record);
            return;
        };
        let n = self.recorded.entry(d.src).or_insert(0);
        if *n < MAX_DECISIONS_PER_READ {
            *n += 1;
            out.push(record);
        } else {
            *self.suppressed.entry(d.src).or_insert(0) += 1;
        }
    }

    fn flush_answered(&mut self, out: &mut Vec<NetRecord>) {
        let done: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, p)| p.answered)
            .map(|(s, _)| *s)
            .collect();
        for s in done {
            if let Some(p) = self.pending.remove(&s) {
                let addresses = p.addresses.clone();
                let record = NetRecord::DnsAnswered(self.decision(p, addresses));
                self.emit(out, record);
            }
        }
    }

    fn decision(&self, p: Pending, mut addresses: Vec<IpAddr>) -> DnsDecision {
        let omitted = addresses.len().saturating_sub(MAX_ADDRESSES) as u64;
        addresses.truncate(MAX_ADDRESSES);
        DnsDecision {
            omitted,
            sandbox: None,
            profile: self.profile.clone(),
            src: p.src,
            name: p.name.trim_end_matches('.').to_ascii_lowercase(),
            qtype: p.qtype,
            addresses,
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Line {
    serial: u64,
    src: IpAddr,
    what: What,
}

#[derive(Debug, PartialEq, Eq)]
enum What {
    Query { qtype: String, name: String },
    Config { value: String },
    Answer { value: String },
}

/// The set named by dnsmasq's line for an add the kernel refused
/// (`nftset inet corral agent-dns4 Error: Could not process rule: …`).
fn refused_add(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once("]: nftset ")?;
    let mut words = rest.split(' ');
    let (_family, _table, set) = (words.next()?, words.next()?, words.next()?);
    (words.next()? == "Error:").then_some(set)
}

/// One `log-queries=extra` line (`None`: any other line).
fn parse(line: &str) -> Option<Line> {
    let (_, rest) = line.split_once("]: ")?;
    let mut words = rest.split(' ');
    let serial: u64 = words.next()?.parse().ok()?;
    let (addr, _port) = words.next()?.rsplit_once('/')?;
    let src: IpAddr = addr.parse().ok()?;
    let verb = words.next()?;
    let name = words.next()?.to_owned();
    let what = if let Some(t) = verb
        .strip_prefix("query[")
        .and_then(|v| v.strip_suffix(']'))
    {
        What::Query {
            qtype: t.to_owned(),
            name,
        }
    } else {
        // `<verb> NAME is VALUE`
        if words.next()? != "is" {
            return None;
        }
        let value = words.next()?.to_owned();
        match verb {
            "config" => What::Config { value },
            "reply" | "cached" => What::Answer { value },
            _ => return None,
        }
    };
    Some(Line { serial, src, what })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "\
Dec  1 10:32:06 dnsmasq[22141]: started, version 2.90 cachesize 150
Dec  1 10:32:06 dnsmasq[22141]: 1 10.90.0.5/49471 query[A] Evil.test from 10.90.0.5
Dec  1 10:32:06 dnsmasq[22141]: 1 10.90.0.5/49471 config evil.test is NXDOMAIN
Dec  1 10:32:16 dnsmasq[22141]: 2 10.90.0.6/60340 query[A] up.test from 10.90.0.6
Dec  1 10:32:16 dnsmasq[22141]: 2 10.90.0.6/60340 forwarded up.test to 198.18.0.53
Dec  1 10:32:16 dnsmasq[22141]: 3 10.90.0.5/42214 query[AAAA] up.test from 10.90.0.5
Dec  1 10:32:16 dnsmasq[22141]: 3 10.90.0.5/42214 forwarded up.test to 198.18.0.53
Dec  1 10:32:16 dnsmasq[22141]: 2 10.90.0.6/60340 reply up.test is <CNAME>
Dec  1 10:32:16 dnsmasq[22141]: 2 10.90.0.6/60340 reply cdn.up.test is 198.51.100.7
Dec  1 10:32:16 dnsmasq[22141]: 2 10.90.0.6/60340 reply cdn.up.test is 198.51.100.8
Dec  1 10:32:16 dnsmasq[22141]: 3 10.90.0.5/42214 reply up.test is 2001:db8::7
";

    #[test]
    fn refusals_and_answers_come_out_once_each_with_every_address() {
        let mut t = DnsTracker::new("dev");
        let mut out: Vec<NetRecord> = LOG.lines().flat_map(|l| t.line(l)).collect();
        out.extend(t.flush());
        assert_eq!(out.len(), 3, "{out:#?}");
        let NetRecord::DnsRefused(r) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!((r.name.as_str(), r.qtype.as_str()), ("evil.test", "A"));
        assert_eq!(r.src, "10.90.0.5".parse::<IpAddr>().unwrap());
        assert_eq!(r.profile, "dev");
        let NetRecord::DnsAnswered(a) = &out[1] else {
            panic!("{out:?}")
        };
        assert_eq!(a.name, "up.test");
        assert_eq!(a.addresses.len(), 2);
        let NetRecord::DnsAnswered(b) = &out[2] else {
            panic!("{out:?}")
        };
        assert_eq!(b.qtype, "AAAA");
        assert_eq!(b.addresses, ["2001:db8::7".parse::<IpAddr>().unwrap()]);
    }

    #[test]
    fn a_reply_read_in_a_later_batch_still_completes_its_query() {
        let mut t = DnsTracker::new("dev");
        let lines: Vec<&str> = LOG.lines().collect();
        let mut out: Vec<NetRecord> = lines[..7].iter().flat_map(|l| t.line(l)).collect();
        out.extend(t.flush());
        assert_eq!(out.len(), 1);
        let mut later: Vec<NetRecord> = lines[7..].iter().flat_map(|l| t.line(l)).collect();
        later.extend(t.flush());
        assert_eq!(later.len(), 2);
    }

    #[test]
    fn other_lines_and_garbage_are_ignored() {
        let mut t = DnsTracker::new("dev");
        for l in [
            "",
            "Dec  1 10:32:06 dnsmasq[1]: read /etc/hosts - 3 names",
            "Dec  1 10:32:06 dnsmasq[1]: x y/z query[A] a from b",
            "Dec  1 10:32:06 dnsmasq[1]: 9 10.0.0.1/5 config never.seen is NXDOMAIN",
        ] {
            assert!(t.line(l).is_empty(), "{l}");
        }
        assert!(t.flush().is_empty());
    }

    #[test]
    fn pending_queries_are_bounded() {
        let mut t = DnsTracker::new("dev");
        for s in 0..(MAX_PENDING as u64 + 10) {
            t.line(&format!(
                "D dnsmasq[1]: {s} 10.0.0.1/5 query[A] n{s}.test from 10.0.0.1"
            ));
        }
        assert_eq!(t.pending.len(), MAX_PENDING);
    }

    #[test]
    fn corrals_resolver_lines_become_decisions_within_the_same_budget() {
        let mut t = DnsTracker::new("dev");
        let line = |src: &str, name: &str, outcome: &str, extra: &str| {
            format!(r#"{{"src":"{src}","name":"{name}","qtype":"A","outcome":"{outcome}"{extra}}}"#)
        };
        let mut out = t.resolver_line(&line(
            "10.0.0.5",
            "api.example.com",
            "answered",
            r#","addresses":["192.0.2.1"]"#,
        ));
        // An escaped control byte stays as written, never dropped.
        out.extend(t.resolver_line(&line("10.0.0.5", "x\\\\001y.evil.test", "refused", "")));
        out.extend(t.resolver_line(&line(
            "10.0.0.5",
            "big.example.com",
            "full",
            r#","set":"dev-dns4""#,
        )));
        out.extend(t.resolver_line("{\"src\":\"10.0.0.5\",\"na"));
        out.extend(t.flush());
        assert!(
            matches!(&out[0], NetRecord::DnsAnswered(d) if d.addresses == ["192.0.2.1".parse::<IpAddr>().unwrap()]),
            "{out:?}"
        );
        assert!(
            matches!(&out[1], NetRecord::DnsRefused(d) if d.name == "x\\001y.evil.test"),
            "{out:?}"
        );
        assert!(
            matches!(&out[2], NetRecord::DnsRefused(d) if d.name == "big.example.com"),
            "{out:?}"
        );
        assert!(
            matches!(&out[3], NetRecord::LearnRefused { set, addresses: 1, .. } if set == "dev-dns4"),
            "{out:?}"
        );
        assert_eq!(out.len(), 4, "{out:?}");
        // Past the budget: counted, not recorded one by one.
        let mut out = Vec::new();
        for i in 0..MAX_DECISIONS_PER_READ + 5 {
            out.extend(t.resolver_line(&line("10.0.0.6", &format!("n{i}.test"), "refused", "")));
        }
        out.extend(t.flush());
        assert!(
            out.iter()
                .any(|r| matches!(r, NetRecord::DnsSuppressed { decisions: 5, .. })),
            "{out:?}"
        );
    }

    #[test]
    fn one_asker_cannot_flood_the_trail() {
        let mut t = DnsTracker::new("dev");
        let n = MAX_DECISIONS_PER_READ + 40;
        let mut out = Vec::new();
        for s in 0..n {
            for src in ["10.0.0.1", "10.0.0.2"] {
                // The second asker stays under its budget: the control.
                if src == "10.0.0.2" && s >= 3 {
                    continue;
                }
                out.extend(t.line(&format!(
                    "D dnsmasq[1]: {s}{} {src}/5 query[A] n{s}.test from {src}",
                    &src[7..]
                )));
                out.extend(t.line(&format!(
                    "D dnsmasq[1]: {s}{} {src}/5 config n{s}.test is NXDOMAIN",
                    &src[7..]
                )));
            }
        }
        out.extend(t.flush());
        let from = |a: &str| {
            out.iter()
                .filter(|r| matches!(r, NetRecord::DnsRefused(d) if d.src.to_string() == a))
                .count() as u64
        };
        assert_eq!(from("10.0.0.1"), MAX_DECISIONS_PER_READ);
        assert_eq!(from("10.0.0.2"), 3);
        let suppressed: Vec<_> = out
            .iter()
            .filter_map(|r| match r {
                NetRecord::DnsSuppressed { src, decisions, .. } => {
                    Some((src.to_string(), *decisions))
                }
                _ => None,
            })
            .collect();
        assert_eq!(suppressed, [("10.0.0.1".to_owned(), 40)]);
        // The next read starts a new budget.
        let next = t.line("D dnsmasq[1]: 999 10.0.0.1/5 query[A] again.test from 10.0.0.1");
        assert!(next.is_empty());
        let next = t.line("D dnsmasq[1]: 999 10.0.0.1/5 config again.test is NXDOMAIN");
        assert_eq!(next.len(), 1);
    }

    #[test]
    fn long_answers_keep_their_first_addresses_and_count_the_rest() {
        let mut t = DnsTracker::new("dev");
        t.line("D dnsmasq[1]: 7 10.0.0.1/5 query[A] flood.test from 10.0.0.1");
        for i in 0..300 {
            t.line(&format!(
                "D dnsmasq[1]: 7 10.0.0.1/5 reply flood.test is 45.0.{}.{}",
                i / 256,
                i % 256
            ));
        }
        let out = t.flush();
        let [NetRecord::DnsAnswered(d)] = out.as_slice() else {
            panic!("{out:?}")
        };
        assert_eq!(d.addresses.len(), MAX_ADDRESSES);
        assert_eq!(d.omitted, 300 - MAX_ADDRESSES as u64);
    }

    #[test]
    fn refused_adds_are_counted_per_set() {
        let mut t = DnsTracker::new("dev");
        let full = "D dnsmasq[1]: nftset inet corral dev-dns4 Error: Could not process rule: Too many open files in system";
        for _ in 0..5 {
            assert!(t.line(full).is_empty());
        }
        // Any other nftset line is not a refusal.
        t.line("D dnsmasq[1]: nftset add inet corral dev-dns4 45.0.0.1");
        let out = t.flush();
        assert_eq!(
            out,
            [NetRecord::LearnRefused {
                profile: "dev".to_owned(),
                set: "dev-dns4".to_owned(),
                addresses: 5,
            }]
        );
        assert!(t.flush().is_empty(), "counted once");
    }
}
