//! Just enough of the DNS wire format (RFC 1035) for corral's probes and
//! its test upstream: one-question queries, and responses that carry A and
//! AAAA records with their TTLs. Everything else in a response is skipped,
//! never interpreted.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

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

const CLASS_IN: u16 = 1;
const HEADER_LEN: usize = 12;
/// Compression pointers may chain; a legitimate name never needs more hops.
const MAX_POINTER_HOPS: usize = 64;

/// Why a DNS message could not be built or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The name cannot be written as DNS labels.
    #[error("name `{0}` is not encodable in DNS: each label must be 1 to 63 bytes, 255 in total")]
    BadName(String),
    /// The message ended before a field it announced.
    #[error("DNS message is truncated (needed byte {needed} of {len})")]
    Truncated {
        /// Offset that was needed.
        needed: usize,
        /// Message length.
        len: usize,
    },
    /// A compressed name points in a loop or too deep.
    #[error("DNS name compression loops or nests deeper than {MAX_POINTER_HOPS} pointers")]
    PointerLoop,
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
    QuestionCount(u16),
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

/// Builds a recursive query for `name` of type `qtype`.
pub fn encode_query(id: u16, name: &str, qtype: u16) -> Result<Vec<u8>, WireError> {
    let mut out = Vec::with_capacity(HEADER_LEN + name.len() + 6);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(&0x0100u16.to_be_bytes()); // RD
    out.extend_from_slice(&[0, 1, 0, 0, 0, 0, 0, 0]);
    encode_name(name, &mut out)?;
    out.extend_from_slice(&qtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    Ok(out)
}

/// Reads the one question of a query.
pub fn parse_query(msg: &[u8]) -> Result<Question, WireError> {
    let id = read_u16(msg, 0)?;
    let qdcount = read_u16(msg, 4)?;
    if qdcount != 1 {
        return Err(WireError::QuestionCount(qdcount));
    }
    let (name, end) = decode_name(msg, HEADER_LEN)?;
    let qtype = read_u16(msg, end)?;
    Ok(Question { id, name, qtype })
}

/// Builds the response to `query` (the raw query, whose question is echoed)
/// with `rcode` and one record per address matching the queried type.
pub fn encode_response(
    query: &[u8],
    rcode: u8,
    addrs: &[IpAddr],
    ttl: u32,
) -> Result<Vec<u8>, WireError> {
    let q = parse_query(query)?;
    let (_, qend) = decode_name(query, HEADER_LEN)?;
    let question = query
        .get(HEADER_LEN..qend + 4)
        .ok_or(WireError::Truncated {
            needed: qend + 4,
            len: query.len(),
        })?;
    let records: Vec<Vec<u8>> = addrs
        .iter()
        .filter_map(|addr| match (addr, q.qtype) {
            (IpAddr::V4(a), TYPE_A) => Some((TYPE_A, a.octets().to_vec())),
            (IpAddr::V6(a), TYPE_AAAA) => Some((TYPE_AAAA, a.octets().to_vec())),
            _ => None,
        })
        .map(|(rtype, data)| {
            let mut rr = vec![0xc0, HEADER_LEN as u8]; // pointer to the question name
            rr.extend_from_slice(&rtype.to_be_bytes());
            rr.extend_from_slice(&CLASS_IN.to_be_bytes());
            rr.extend_from_slice(&ttl.to_be_bytes());
            rr.extend_from_slice(&(data.len() as u16).to_be_bytes());
            rr.extend_from_slice(&data);
            rr
        })
        .collect();
    let mut out = Vec::with_capacity(HEADER_LEN + question.len() + records.len() * 28);
    out.extend_from_slice(&q.id.to_be_bytes());
    // QR, RD copied as set, RA, and the code.
    out.extend_from_slice(&(0x8180u16 | u16::from(rcode & 0x0f)).to_be_bytes());
    out.extend_from_slice(&1u16.to_be_bytes());
    out.extend_from_slice(&(records.len() as u16).to_be_bytes());
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.extend_from_slice(question);
    for rr in records {
        out.extend_from_slice(&rr);
    }
    Ok(out)
}

/// Reads a response to the query with id `expected_id`.
pub fn parse_response(msg: &[u8], expected_id: u16) -> Result<Response, WireError> {
    let id = read_u16(msg, 0)?;
    let flags = read_u16(msg, 2)?;
    let qr = flags & 0x8000 != 0;
    if id != expected_id || !qr {
        return Err(WireError::NotOurResponse {
            expected: expected_id,
            got: id,
            qr,
        });
    }
    let qdcount = read_u16(msg, 4)?;
    let ancount = read_u16(msg, 6)?;
    let mut off = HEADER_LEN;
    for _ in 0..qdcount {
        off = decode_name(msg, off)?.1 + 4;
    }
    let mut answers = Vec::new();
    for _ in 0..ancount {
        off = decode_name(msg, off)?.1;
        let rtype = read_u16(msg, off)?;
        let ttl = u32::from(read_u16(msg, off + 4)?) << 16 | u32::from(read_u16(msg, off + 6)?);
        let rdlen = usize::from(read_u16(msg, off + 8)?);
        let data = msg
            .get(off + 10..off + 10 + rdlen)
            .ok_or(WireError::Truncated {
                needed: off + 10 + rdlen,
                len: msg.len(),
            })?;
        let addr = match (rtype, data.len()) {
            (TYPE_A, 4) => Some(IpAddr::V4(Ipv4Addr::new(
                data[0], data[1], data[2], data[3],
            ))),
            (TYPE_AAAA, 16) => {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(data);
                Some(IpAddr::V6(Ipv6Addr::from(octets)))
            }
            _ => None,
        };
        if let Some(addr) = addr {
            answers.push(AddrRecord { addr, ttl });
        }
        off += 10 + rdlen;
    }
    Ok(Response {
        id,
        rcode: (flags & 0x0f) as u8,
        answers,
    })
}

fn encode_name(name: &str, out: &mut Vec<u8>) -> Result<(), WireError> {
    let trimmed = name.strip_suffix('.').unwrap_or(name);
    let bad = || WireError::BadName(name.to_owned());
    if trimmed.len() > 253 {
        return Err(bad());
    }
    if !trimmed.is_empty() {
        for label in trimmed.split('.') {
            if label.is_empty() || label.len() > 63 {
                return Err(bad());
            }
            out.push(label.len() as u8);
            out.extend_from_slice(label.as_bytes());
        }
    }
    out.push(0);
    Ok(())
}

/// Decodes the (possibly compressed) name at `start`; returns it in lower
/// case and the offset just past it in the original position.
fn decode_name(msg: &[u8], start: usize) -> Result<(String, usize), WireError> {
    let mut labels: Vec<String> = Vec::new();
    let mut off = start;
    let mut end = None;
    let mut hops = 0;
    loop {
        let len = *msg.get(off).ok_or(WireError::Truncated {
            needed: off,
            len: msg.len(),
        })?;
        if len & 0xc0 == 0xc0 {
            let low = *msg.get(off + 1).ok_or(WireError::Truncated {
                needed: off + 1,
                len: msg.len(),
            })?;
            end.get_or_insert(off + 2);
            hops += 1;
            if hops > MAX_POINTER_HOPS {
                return Err(WireError::PointerLoop);
            }
            off = usize::from(len & 0x3f) << 8 | usize::from(low);
            continue;
        }
        if len == 0 {
            let end = end.unwrap_or(off + 1);
            return Ok((labels.join("."), end));
        }
        let label = msg
            .get(off + 1..off + 1 + usize::from(len))
            .ok_or(WireError::Truncated {
                needed: off + 1 + usize::from(len),
                len: msg.len(),
            })?;
        labels.push(String::from_utf8_lossy(label).to_ascii_lowercase());
        off += 1 + usize::from(len);
    }
}

fn read_u16(msg: &[u8], off: usize) -> Result<u16, WireError> {
    match msg.get(off..off + 2) {
        Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
        None => Err(WireError::Truncated {
            needed: off + 2,
            len: msg.len(),
        }),
    }
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
        let mut msg = encode_query(1, "a", TYPE_A).unwrap();
        // Make the question name a pointer to itself.
        msg[12] = 0xc0;
        msg[13] = 12;
        assert_eq!(decode_name(&msg, 12), Err(WireError::PointerLoop));
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
