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

use std::collections::BTreeMap;
use std::net::IpAddr;

use corral_sandbox_core::audit::{DnsDecision, NetRecord};

/// Queries waiting for their reply (forwarded upstream) kept at most; an
/// upstream that never answers must not grow this without bound.
const MAX_PENDING: usize = 1024;

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
}

impl DnsTracker {
    /// A tracker for the gateway of `profile`.
    pub fn new(profile: &str) -> Self {
        Self {
            profile: profile.to_owned(),
            pending: BTreeMap::new(),
            last_serial: None,
        }
    }

    /// Feeds one log line; returns the decisions it completes.
    pub fn line(&mut self, line: &str) -> Vec<NetRecord> {
        let mut out = Vec::new();
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
                    match value.parse::<IpAddr>() {
                        Ok(a) => out.push(NetRecord::DnsAnswered(self.decision(p, vec![a]))),
                        Err(_) => out.push(NetRecord::DnsRefused(self.decision(p, Vec::new()))),
                    }
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

    /// Everything answered so far (call at the end of what was read).
    pub fn flush(&mut self) -> Vec<NetRecord> {
        let mut out = Vec::new();
        self.flush_answered(&mut out);
        out
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
                out.push(NetRecord::DnsAnswered(self.decision(p, addresses)));
            }
        }
    }

    fn decision(&self, p: Pending, addresses: Vec<IpAddr>) -> DnsDecision {
        DnsDecision {
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
}
