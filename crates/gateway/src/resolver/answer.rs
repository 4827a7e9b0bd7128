//! An upstream's answer, rebuilt for the sandbox.

use std::net::IpAddr;

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, Record};

use super::ede::{EDE_BLOCKED, EDE_OTHER, ExtendedError};
use super::query::{respond, text};
use super::{Answered, Learned, Policy};

/// Most CNAME hops followed (a chain longer than this is not answered).
const MAX_CHAIN: usize = 8;

impl Policy {
    /// The sandbox's answer to `query` (which [`Policy::decide`] forwarded)
    /// from the upstream's `upstream` (matched to it by the caller).
    pub fn answer(&self, query: &Message, upstream: &Message) -> Answered {
        let nothing = |response| Answered {
            response,
            learned: Vec::new(),
            cut: 0,
            refused: 0,
        };
        let Some(q) = query.queries().first() else {
            return nothing(respond(query, ResponseCode::FormErr, Vec::new(), &[]));
        };
        match upstream.response_code() {
            ResponseCode::NoError => {}
            ResponseCode::NXDomain => {
                return nothing(respond(query, ResponseCode::NXDomain, Vec::new(), &[]));
            }
            other => {
                return nothing(respond(
                    query,
                    ResponseCode::ServFail,
                    Vec::new(),
                    &[ExtendedError::new(
                        EDE_OTHER,
                        format!("the upstream resolver answered {other}"),
                    )],
                ));
            }
        }
        let qtype = q.query_type();
        let mut current = q.name().to_lowercase();
        let mut out: Vec<Record> = Vec::new();
        for _ in 0..=MAX_CHAIN {
            let alias = upstream.answers().iter().find_map(|r| match r.data() {
                RData::CNAME(c) if r.name().to_lowercase() == current => Some((r, c.0.clone())),
                _ => None,
            });
            let Some((record, target)) = alias else {
                break;
            };
            let target_text = text(&target);
            if !self.names.admits(&target_text) {
                return nothing(respond(
                    query,
                    ResponseCode::NXDomain,
                    Vec::new(),
                    &[ExtendedError::new(
                        EDE_BLOCKED,
                        format!(
                            "blocked by corral profile `{}`: `{}` is an alias of `{target_text}`, which is not on its allowlist; ask the operator to allow `{target_text}`",
                            self.profile,
                            text(q.name()),
                        ),
                    )],
                ));
            }
            let mut kept = Record::from_rdata(
                current.clone(),
                self.clamp_ttl(record.ttl()),
                RData::CNAME(hickory_proto::rr::rdata::CNAME(target.to_lowercase())),
            );
            kept.set_dns_class(hickory_proto::rr::DNSClass::IN);
            out.push(kept);
            current = target.to_lowercase();
        }
        let (mut learned, mut cut, mut refused) = (Vec::new(), 0, 0);
        for r in upstream.answers() {
            if r.name().to_lowercase() != current || r.record_type() != qtype {
                continue;
            }
            let addr = match r.data() {
                RData::A(a) => IpAddr::V4(a.0),
                RData::AAAA(a) => IpAddr::V6(a.0),
                _ => continue,
            };
            if self.refuses(addr) {
                refused += 1;
                continue;
            }
            if learned.len() >= self.answer_cap {
                cut += 1;
                continue;
            }
            let ttl = self.clamp_ttl(r.ttl());
            let rdata = match addr {
                IpAddr::V4(v4) => RData::A(hickory_proto::rr::rdata::A(v4)),
                IpAddr::V6(v6) => RData::AAAA(hickory_proto::rr::rdata::AAAA(v6)),
            };
            out.push(Record::from_rdata(current.clone(), ttl, rdata));
            learned.push(Learned {
                name: text(&current),
                addr,
                ttl,
            });
        }
        if learned.is_empty() && refused > 0 {
            // As dnsmasq's `bogus-nxdomain`: the name leads nowhere it may.
            return Answered {
                refused,
                ..nothing(respond(
                    query,
                    ResponseCode::NXDomain,
                    Vec::new(),
                    &[ExtendedError::new(
                        EDE_BLOCKED,
                        format!(
                            "blocked by corral profile `{}`: every address of `{}` is reserved or the host's own",
                            self.profile,
                            text(q.name())
                        ),
                    )],
                ))
            };
        }
        let errors: Vec<ExtendedError> = (cut > 0)
            .then(|| {
                ExtendedError::new(
                    EDE_OTHER,
                    format!(
                        "corral profile `{}` hands out at most {} addresses an answer; {cut} more were cut",
                        self.profile, self.answer_cap
                    ),
                )
            })
            .into_iter()
            .collect();
        Answered {
            response: respond(query, ResponseCode::NoError, out, &errors),
            learned,
            cut,
            refused,
        }
    }
}
