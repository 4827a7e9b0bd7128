//! One exchange of corral's resolver: a sandbox's query in, the
//! sandbox's answer out, through the upstream when the policy forwards
//! the query.
//!
//! Upstream, the rebuilt query goes out over UDP from a fresh socket (a
//! random source port) with a random id; only a response from the
//! upstream's address with that id and the same question is taken, and a
//! truncated one is asked again over TCP, so an answer of thousands of
//! records reaches the policy whole (and is cut there). An upstream that
//! does not answer, or answers SERVFAIL or REFUSED, hands the query to the
//! next ([`Upstreams`]). Toward the
//! sandbox, an answer longer than the sandbox's UDP size goes out
//! truncated (the TC bit, no records), so it asks again over TCP.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use super::ede::{EDE_OTHER, ExtendedError};
use super::query::respond;
use super::{Decision, Learned, Policy};

/// The smallest UDP size every client takes (RFC 1035).
const CLASSIC_UDP: usize = 512;

/// Where forwarded queries go, and how long an answer may take: the
/// host's upstream resolvers, asked one after another until one answers.
/// The last one that answered is asked first next time, so a dead first
/// upstream costs one timeout, not one per query.
#[derive(Debug)]
pub struct Upstreams {
    addrs: Vec<SocketAddr>,
    /// The bound of one exchange with one of them (UDP, then TCP if
    /// truncated).
    timeout: Duration,
    /// The index of the one that answered last.
    preferred: AtomicUsize,
}

impl Upstreams {
    /// `addrs` in the order they are tried; `None` when there are none.
    pub fn new(addrs: Vec<SocketAddr>, timeout: Duration) -> Option<Self> {
        (!addrs.is_empty()).then(|| Self {
            addrs,
            timeout,
            preferred: AtomicUsize::new(0),
        })
    }

    /// The upstream resolvers, in the order given.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The upstreams' answer to `asked`: the first that gives a usable one
    /// (not SERVFAIL or REFUSED); when none does, the last such answer, or
    /// why each failed.
    async fn ask(&self, asked: &Message) -> Result<Message, String> {
        let first = self.preferred.load(Ordering::Relaxed) % self.addrs.len();
        let mut refused = None;
        let mut failures = Vec::new();
        for i in (0..self.addrs.len()).map(|k| (first + k) % self.addrs.len()) {
            let addr = self.addrs[i];
            match ask(addr, self.timeout, asked).await {
                Ok(m)
                    if !matches!(
                        m.response_code(),
                        ResponseCode::ServFail | ResponseCode::Refused
                    ) =>
                {
                    self.preferred.store(i, Ordering::Relaxed);
                    return Ok(m);
                }
                Ok(m) => refused = Some(m),
                Err(why) => failures.push(format!("the upstream resolver {addr}: {why}")),
            }
        }
        refused.ok_or_else(|| failures.join("; "))
    }
}

/// How the query came in, which decides how long the answer may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A datagram: the answer fits the client's UDP size or is truncated.
    Udp,
    /// A stream: the answer goes whole.
    Tcp,
}

/// What one exchange gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exchange {
    /// The bytes to send back; `None`: send nothing (not a query, or not
    /// a DNS message at all).
    pub response: Option<Vec<u8>>,
    /// The addresses the response hands out (none when it is truncated).
    pub learned: Vec<Learned>,
    /// Whether a query went upstream.
    pub forwarded: bool,
    /// Addresses cut past the policy's cap.
    pub cut: usize,
    /// Reserved or host-network addresses dropped.
    pub refused: usize,
}

impl Exchange {
    fn silent() -> Self {
        Self {
            response: None,
            learned: Vec::new(),
            forwarded: false,
            cut: 0,
            refused: 0,
        }
    }
}

/// A random query id: an off-path sender must guess it (and the port) to
/// pass an answer off as the upstream's.
fn random_id() -> u16 {
    let mut b = [0u8; 2];
    match getrandom::fill(&mut b) {
        Ok(()) => u16::from_be_bytes(b),
        // No entropy source is a broken host; a clock-derived id still
        // differs between queries.
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as u16),
    }
}

/// Whether `answer` is the upstream's response to `asked`.
fn answers(asked: &Message, answer: &Message) -> bool {
    answer.id() == asked.id()
        && answer.message_type() == MessageType::Response
        && answer.queries() == asked.queries()
}

async fn over_udp(addr: SocketAddr, asked: &Message, bytes: &[u8]) -> std::io::Result<Message> {
    let bind: SocketAddr = if addr.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    };
    let sock = UdpSocket::bind(bind).await?;
    // Connected: the kernel drops datagrams from any other address.
    sock.connect(addr).await?;
    sock.send(bytes).await?;
    let mut buf = vec![0u8; 65_535];
    loop {
        let n = sock.recv(&mut buf).await?;
        if let Ok(m) = Message::from_vec(&buf[..n])
            && answers(asked, &m)
        {
            return Ok(m);
        }
    }
}

async fn over_tcp(addr: SocketAddr, asked: &Message, bytes: &[u8]) -> std::io::Result<Message> {
    let mut s = TcpStream::connect(addr).await?;
    let len = u16::try_from(bytes.len())
        .map_err(|_| std::io::Error::other("query longer than a DNS message"))?;
    s.write_all(&len.to_be_bytes()).await?;
    s.write_all(bytes).await?;
    let mut len = [0u8; 2];
    s.read_exact(&mut len).await?;
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    s.read_exact(&mut buf).await?;
    let m = Message::from_vec(&buf).map_err(|e| std::io::Error::other(e.to_string()))?;
    if answers(asked, &m) {
        Ok(m)
    } else {
        Err(std::io::Error::other("the upstream answered another query"))
    }
}

/// One upstream's answer to `asked`, within `timeout` for each transport.
async fn ask(addr: SocketAddr, timeout: Duration, asked: &Message) -> Result<Message, String> {
    let bytes = asked.to_vec().map_err(|e| e.to_string())?;
    let udp = tokio::time::timeout(timeout, over_udp(addr, asked, &bytes)).await;
    let m = match udp {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => return Err(e.to_string()),
        Err(_) => return Err(format!("no answer within {timeout:?}")),
    };
    if !m.truncated() {
        return Ok(m);
    }
    match tokio::time::timeout(timeout, over_tcp(addr, asked, &bytes)).await {
        Ok(Ok(m)) => Ok(m),
        Ok(Err(e)) => Err(format!("over TCP: {e}")),
        Err(_) => Err(format!("no answer over TCP within {timeout:?}")),
    }
}

/// The most bytes an answer to `query` may take over UDP: the client's
/// EDNS size (at least 512), or 512 without EDNS.
fn udp_limit(query: &Message) -> usize {
    query.extensions().as_ref().map_or(CLASSIC_UDP, |e| {
        usize::from(e.max_payload()).max(CLASSIC_UDP)
    })
}

/// `response` cut to its header and question, with TC set.
fn truncated(response: &Message) -> Option<Vec<u8>> {
    let mut t = Message::new();
    t.set_id(response.id())
        .set_message_type(MessageType::Response)
        .set_op_code(response.op_code())
        .set_recursion_desired(response.recursion_desired())
        .set_recursion_available(response.recursion_available())
        .set_response_code(response.response_code())
        .set_truncated(true);
    for q in response.queries() {
        t.add_query(q.clone());
    }
    t.to_vec().ok()
}

impl Policy {
    /// One exchange for the sandbox's `query` (bytes as received over
    /// `transport`), asking `upstreams` when the policy forwards it.
    pub async fn resolve(
        &self,
        query: &[u8],
        transport: Transport,
        upstreams: &Upstreams,
    ) -> Exchange {
        let Ok(query) = Message::from_vec(query) else {
            return Exchange::silent();
        };
        let (response, learned, forwarded, cut, refused) = match self.decide(&query, random_id()) {
            Decision::Ignore => return Exchange::silent(),
            Decision::Answer(m) => (m, Vec::new(), false, 0, 0),
            Decision::Forward(asked) => match upstreams.ask(&asked).await {
                Ok(answer) => {
                    let a = self.answer(&query, &answer);
                    (a.response, a.learned, true, a.cut, a.refused)
                }
                Err(why) => (
                    respond(
                        &query,
                        ResponseCode::ServFail,
                        Vec::new(),
                        &[ExtendedError::new(EDE_OTHER, why)],
                    ),
                    Vec::new(),
                    true,
                    0,
                    0,
                ),
            },
        };
        let Ok(bytes) = response.to_vec() else {
            return Exchange::silent();
        };
        let (bytes, learned) = if transport == Transport::Udp && bytes.len() > udp_limit(&query) {
            (truncated(&response), Vec::new())
        } else {
            (Some(bytes), learned)
        };
        Exchange {
            response: bytes,
            learned,
            forwarded,
            cut,
            refused,
        }
    }
}
