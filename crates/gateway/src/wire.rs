//! The DNS messages corral's probes and its test upstream exchange:
//! one-question queries, and responses carrying A and AAAA records with
//! their TTLs. Encoding and decoding are `hickory-proto`'s; this module
//! only narrows them to what corral needs (other records of a response are
//! skipped, never interpreted) and keeps corral's own error words.

use std::net::IpAddr;

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA};
use hickory_proto::rr::{Name, RData, Record, RecordType};

/// Record type A (IPv4 address).
pub const TYPE_A: u16 = 1;
/// Record type AAAA (IPv6 address).
pub const TYPE_AAAA: u16 = 28;
/// Record type TXT, the usual carrier of DNS tunnels.
pub const TYPE_TXT: u16 = 16;
/// Response code: no error.
pub const RCODE_NOERROR: u8 = 0;
/// Response code: server failure.
pub const RCODE_SERVFAIL: u8 = 2;
/// Response code: the name does not exist.
pub const RCODE_NXDOMAIN: u8 = 3;
/// Response code: the server refuses to answer.
pub const RCODE_REFUSED: u8 = 5;

/// The longest name DNS can carry, in text form without the final dot.
const MAX_NAME: usize = 253;

/// Why a DNS message could not be built or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The name cannot be written as DNS labels.
    #[error("name `{0}` is not encodable in DNS: each label must be 1 to 63 bytes, 255 in total")]
    BadName(String),
    /// The bytes are not a well-formed DNS message (truncated, a
    /// compression loop, a bad label...).
    #[error("not a well-formed DNS message: {0}")]
    Malformed(String),
    /// The message is not the response to our query.
    #[error("DNS message is not a response to query id {expected} (got id {got}, qr={qr})")]
    NotOurResponse {
        /// Our query id.
        expected: u16,
        /// The id in the message.
        got: u16,
        /// Whether the QR bit (response) was set.
        qr: bool,
    },
    /// A query must carry exactly one question.
    #[error("DNS query carries {0} questions; exactly one is supported")]
    QuestionCount(usize),
}

/// The single question of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Message id.
    pub id: u16,
    /// Queried name, lower case, without a trailing dot.
    pub name: String,
    /// Queried type (`TYPE_A`, `TYPE_AAAA`, ...).
    pub qtype: u16,
}

/// One address record of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddrRecord {
    /// The address (A or AAAA data).
    pub addr: IpAddr,
    /// Time to live in seconds, as the server gave it.
    pub ttl: u32,
}

/// A parsed response: its code and its address answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Message id.
    pub id: u16,
    /// Response code (`RCODE_*`).
    pub rcode: u8,
    /// A and AAAA records of the answer section, in order.
    pub answers: Vec<AddrRecord>,
}

fn malformed(e: impl std::fmt::Display) -> WireError {
    WireError::Malformed(e.to_string())
}

/// `name` as an absolute DNS name; empty labels and over-long names or
/// labels are refused.
fn dns_name(name: &str) -> Result<Name, WireError> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    let bad = || WireError::BadName(name.to_owned());
    if trimmed.len() > MAX_NAME
        || (!trimmed.is_empty() && trimmed.split('.').any(|l| l.is_empty() || l.len() > 63))
    {
        return Err(bad());
    }
    // Labels as bytes: a probe may ask for any name, host-name rules or not.
    let labels = trimmed
        .split('.')
        .filter(|l| !l.is_empty())
        .map(str::as_bytes);
    Name::from_labels(labels).map_err(|_| bad())
}

/// A name as corral compares names: lower case, no trailing dot.
fn name_text(n: &Name) -> String {
    n.iter()
        .map(|label| String::from_utf8_lossy(label).to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(".")
}

/// Builds a recursive query for `name` of type `qtype`.
pub fn encode_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, WireError> {
    let mut m = Message::new();
    m.set_id(id)
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(dns_name(name)?, RecordType::from(qtype)));
    m.to_vec().map_err(malformed)
}

fn only_question(m: &Message) -> Result<&Query, WireError> {
    match m.queries() {
        [q] => Ok(q),
        qs => Err(WireError::QuestionCount(qs.len())),
    }
}

/// Reads the one question of a query.
pub fn parse_query(msg: &[u8]) -> Result<Question, WireError> {
    let m = Message::from_vec(msg).map_err(malformed)?;
    let q = only_question(&m)?;
    Ok(Question {
        id: m.id(),
        name: name_text(q.name()),
        qtype: u16::from(q.query_type()),
    })
}

/// Builds the response to `query` (the raw query, whose question is echoed)
/// with `rcode` and one record per address matching the queried type.
pub fn encode_response(
    query: &[u8],
    rcode: u8,
    addrs: &[IpAddr],
    ttl: u32,
) -> Result<Vec<u8>, WireError> {
    let asked = Message::from_vec(query).map_err(malformed)?;
    let q = only_question(&asked)?.clone();
    let mut m = Message::new();
    m.set_id(asked.id())
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(asked.recursion_desired())
        .set_recursion_available(true)
        .set_response_code(ResponseCode::from(0, rcode & 0x0f));
    for addr in addrs {
        let data = match (addr, q.query_type()) {
            (IpAddr::V4(a), RecordType::A) => RData::A(A(*a)),
            (IpAddr::V6(a), RecordType::AAAA) => RData::AAAA(AAAA(*a)),
            _ => continue,
        };
        m.add_answer(Record::from_rdata(q.name().clone(), ttl, data));
    }
    m.add_query(q);
    m.to_vec().map_err(malformed)
}

/// `reply` with its records dropped and the TC bit set: what a server
/// sends over UDP when the answer does not fit, so the client asks again
/// over TCP.
pub fn truncated(reply: &[u8]) -> Result<Vec<u8>, WireError> {
    let mut m = Message::from_vec(reply).map_err(malformed)?;
    m.take_answers();
    m.set_truncated(true);
    m.to_vec().map_err(malformed)
}

/// Reads a response to the query with id `expected_id`.
pub fn parse_response(msg: &[u8], expected_id: u16) -> Result<Response, WireError> {
    let m = Message::from_vec(msg).map_err(malformed)?;
    let qr = m.message_type() == MessageType::Response;
    if m.id() != expected_id || !qr {
        return Err(WireError::NotOurResponse {
            expected: expected_id,
            got: m.id(),
            qr,
        });
    }
    let answers = m
        .answers()
        .iter()
        .filter_map(|r| {
            let addr = match r.data() {
                RData::A(a) => IpAddr::V4(a.0),
                RData::AAAA(a) => IpAddr::V6(a.0),
                _ => return None,
            };
            Some(AddrRecord { addr, ttl: r.ttl() })
        })
        .collect();
    Ok(Response {
        id: m.id(),
        rcode: m.response_code().low(),
        answers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn query_and_response_round_trip() {
        let q = encode_query(0xbeef, "Api.Example.com.", TYPE_A).unwrap();
        let question = parse_query(&q).unwrap();
        assert_eq!(
            question,
            Question {
                id: 0xbeef,
                name: "api.example.com".into(),
                qtype: TYPE_A
            }
        );
        let addrs: Vec<IpAddr> = vec![
            "198.18.0.1".parse().unwrap(),
            "2001:db8::1".parse().unwrap(),
        ];
        let r = encode_response(&q, RCODE_NOERROR, &addrs, 42).unwrap();
        let parsed = parse_response(&r, 0xbeef).unwrap();
        assert_eq!(parsed.rcode, RCODE_NOERROR);
        // Only the A record matches an A query.
        assert_eq!(
            parsed.answers,
            vec![AddrRecord {
                addr: addrs[0],
                ttl: 42
            }]
        );
    }

    #[test]
    fn nxdomain_and_wrong_id() {
        let q = encode_query(7, "x.test", TYPE_AAAA).unwrap();
        let r = encode_response(&q, RCODE_NXDOMAIN, &[], 0).unwrap();
        assert_eq!(parse_response(&r, 7).unwrap().rcode, RCODE_NXDOMAIN);
        assert!(matches!(
            parse_response(&r, 8),
            Err(WireError::NotOurResponse { .. })
        ));
        // A query is not a response.
        assert!(parse_response(&q, 7).is_err());
    }

    #[test]
    fn refuses_bad_names_and_pointer_loops() {
        assert!(encode_query(1, &"a".repeat(64), TYPE_A).is_err());
        assert!(encode_query(1, "a..b", TYPE_A).is_err());
        assert!(encode_query(1, &"a.".repeat(128), TYPE_A).is_err());
        let mut msg = encode_query(1, "a", TYPE_A).unwrap();
        // Make the question name a pointer to itself.
        msg[12] = 0xc0;
        msg[13] = 12;
        assert!(matches!(parse_query(&msg), Err(WireError::Malformed(_))));
    }

    #[test]
    fn a_response_from_another_implementation_reads_the_same() {
        // dig-style response bytes for `a.test A` with one answer using a
        // compression pointer, as RFC 1035 writes it by hand.
        let msg: Vec<u8> = [
            &[0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0][..],
            &[1, b'a', 4, b't', b'e', b's', b't', 0, 0, 1, 0, 1],
            &[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 7],
        ]
        .concat();
        let r = parse_response(&msg, 0x1234).unwrap();
        assert_eq!(
            r.answers,
            vec![AddrRecord {
                addr: "192.0.2.7".parse().unwrap(),
                ttl: 60
            }]
        );
    }

    proptest! {
        #[test]
        fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = parse_query(&bytes);
            let _ = parse_response(&bytes, 0);
        }

        #[test]
        fn names_round_trip(labels in proptest::collection::vec("[a-z0-9-]{1,20}", 1..6)) {
            let name = labels.join(".");
            let q = encode_query(3, &name, TYPE_TXT).unwrap();
            prop_assert_eq!(parse_query(&q).unwrap().name, name);
        }
    }
}
