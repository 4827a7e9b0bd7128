//! The EDNS row: data a sandbox puts in an EDNS option of a query for a
//! name its profile lists never reaches the upstream. corral's resolver
//! rebuilds every query (one question, its own id and EDNS, no client
//! option), so the option's bytes stay on the host; the control sends the
//! same query from the simulated host straight to the upstream, whose
//! received messages then hold them.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use corral_egress::netns::Netns;
use corral_gateway::test_upstream::TestUpstream;
use hickory_proto::op::{Edns, Message, MessageType, Query, ResponseCode};
use hickory_proto::rr::rdata::opt::EdnsOption;
use hickory_proto::rr::{Name, RecordType};

use crate::lab::Observed;

/// The probe label of the row.
pub(crate) const EDNS_STRIPPED: &str =
    "EDNS option data in a query for a listed name never reaches the upstream";

/// A private-use EDNS option code (RFC 6891: 65001-65534).
const OPTION: u16 = 65_001;

/// What one query carried and how it went.
pub(super) struct Carried {
    /// What the row observed.
    pub observed: Observed,
    /// How long the query took.
    pub ms: u64,
}

/// An A query for `name` whose EDNS carries `data` in a private option.
fn query_with(name: &str, data: &[u8]) -> Result<Vec<u8>, String> {
    let name = Name::from_ascii(name).map_err(|e| format!("{name}: {e}"))?;
    let mut m = Message::new();
    m.set_id(0x5eed)
        .set_message_type(MessageType::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(name, RecordType::A));
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    edns.options_mut()
        .insert(EdnsOption::Unknown(OPTION, data.to_vec()));
    m.set_edns(edns);
    m.to_vec().map_err(|e| e.to_string())
}

/// Sends `query` to `server` from inside `ns` and returns the response code.
fn exchange(
    ns: &Netns,
    server: SocketAddr,
    query: &[u8],
    timeout: Duration,
) -> Result<ResponseCode, String> {
    let sent = ns
        .run(|| -> std::io::Result<Vec<u8>> {
            let sock = UdpSocket::bind(SocketAddr::from(([0, 0, 0, 0], 0)))?;
            sock.set_read_timeout(Some(timeout))?;
            sock.connect(server)?;
            sock.send(query)?;
            let mut buf = vec![0u8; 4096];
            let n = sock.recv(&mut buf)?;
            buf.truncate(n);
            Ok(buf)
        })
        .map_err(|e| format!("cannot enter the namespace: {e}"))?
        .map_err(|e| format!("no answer from {server}: {e}"))?;
    Message::from_vec(&sent)
        .map(|m| m.response_code())
        .map_err(|e| format!("the answer from {server} is not DNS: {e}"))
}

/// Whether a message `upstream` received after the first `since` holds
/// `data`.
fn arrived(upstream: &TestUpstream, since: usize, data: &[u8]) -> bool {
    upstream
        .received()
        .iter()
        .skip(since)
        .any(|m| m.windows(data.len()).any(|w| w == data))
}

/// The control: the query sent from `host` straight to the upstream at
/// `upstream_addr` carries `data` there.
pub(super) fn control(
    host: &Netns,
    upstream: &TestUpstream,
    upstream_addr: SocketAddr,
    name: &str,
    data: &[u8],
    timeout: Duration,
) -> Observed {
    let since = upstream.received().len();
    let outcome = query_with(name, data).and_then(|q| exchange(host, upstream_addr, &q, timeout));
    match outcome {
        Ok(_) if arrived(upstream, since, data) => Observed::Connected,
        Ok(code) => Observed::Error(format!(
            "the upstream answered {code} but its received messages lack the option's bytes"
        )),
        Err(e) => Observed::Error(e),
    }
}

/// The probe: the query sent from the sandbox's `ns` to its `gateway`.
/// The name must resolve (a refusal would prove nothing about the option),
/// and no message the upstream received may hold `data`.
pub(super) fn probe(
    ns: &Netns,
    gateway: SocketAddr,
    upstream: &TestUpstream,
    name: &str,
    data: &[u8],
    timeout: Duration,
) -> Carried {
    let start = Instant::now();
    let since = upstream.received().len();
    let outcome = query_with(name, data).and_then(|q| exchange(ns, gateway, &q, timeout));
    let ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let forwarded = upstream.received().len() - since;
    let observed = match outcome {
        _ if arrived(upstream, since, data) => Observed::Connected,
        Ok(ResponseCode::NoError) if forwarded > 0 => Observed::Rejected(format!(
            "resolved; the {forwarded} message(s) the upstream received hold none of the option's bytes"
        )),
        Ok(code) => Observed::Error(format!(
            "{name} answered {code} after {forwarded} upstream message(s): the row needs it resolved through the upstream"
        )),
        Err(e) => Observed::Error(e),
    };
    Carried { observed, ms }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_carries_the_data_in_an_option() {
        let q = query_with("api.example.com.", b"corral-drill-edns").unwrap();
        assert!(q.windows(17).any(|w| w == b"corral-drill-edns"));
        let m = Message::from_vec(&q).unwrap();
        let opts = m.extensions().as_ref().unwrap().options();
        assert!(
            opts.as_ref()
                .iter()
                .any(|(code, _)| u16::from(*code) == OPTION)
        );
    }
}
