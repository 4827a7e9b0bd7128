//! corral's resolver on a bridge: UDP and TCP on the gateway address,
//! bound to the bridge's device, each query one [`Policy::resolve`], and
//! every address an answer hands out learned into the profile's sets
//! *before* the answer leaves (docs/gateway.md, "corral's resolver on a
//! bridge"). A learn that fails — the set full, the set gone — turns the
//! answer into a refusal naming why, so no sandbox ever holds an address
//! its profile's rules would not let through.
//!
//! Bounds, each what dnsmasq's configuration bounds today: queries in
//! flight upstream ([`Bounds::in_flight`]; over it a query is dropped, as a
//! resolver that is out of room does), TCP connections
//! ([`Bounds::tcp_connections`]; over it a connection is closed at once),
//! and how long a TCP connection may sit idle. The per-source rates are the
//! bridge's nftables rules', in front of any socket.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use corral_egress::nft::LearnElement;
use corral_egress::plan::AddrFamily;
use hickory_proto::op::{Message, ResponseCode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::Semaphore;

use super::askers::Askers;
use super::audit::{AuditRecord, AuditSink, Outcome};
use super::ede::{EDE_BLOCKED, EDE_OTHER, ExtendedError};
use super::query::{respond, text};
use super::recorded::RecordId;
use super::{Learned, Policy, Transport, Upstreams};
use crate::approvals::{Approvals, Held};
use crate::names::LearnSets;
use crate::render::{DNS_FORWARD_MAX, MAX_TCP_CONNECTIONS};

/// Where learned addresses go: the profile's sets in the host's kernel
/// ([`NftLearner`]), or a test's stand-in.
pub trait Learn: Send + Sync {
    /// Adds every element, or none of them.
    fn learn(&self, elements: &[LearnElement]) -> Result<(), LearnFailure>;
}

/// Why addresses could not be learned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LearnFailure {
    /// A set is at its size; it keeps what it has.
    Full {
        /// The set, when the kernel's refusal named it.
        set: Option<String>,
    },
    /// Anything else (the set or table gone, netlink refused).
    Other(String),
}

/// Learns into `table inet corral` of the network namespace the calling
/// thread is in.
#[derive(Debug, Clone, Copy, Default)]
pub struct NftLearner;

impl Learn for NftLearner {
    fn learn(&self, elements: &[LearnElement]) -> Result<(), LearnFailure> {
        match corral_egress::nft::learn(elements) {
            Ok(_) => Ok(()),
            Err(e) if e.is_set_full() => Err(LearnFailure::Full { set: e.set_named() }),
            Err(e) => Err(LearnFailure::Other(e.to_string())),
        }
    }
}

/// The server's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Queries being answered at once (UDP and TCP together).
    pub in_flight: usize,
    /// TCP connections open at once.
    pub tcp_connections: usize,
    /// How long a TCP connection may wait for its next query.
    pub tcp_idle: Duration,
    /// The least an address stays learned, however short its TTL (a TTL
    /// of 0 must not become an element that never expires, nor one gone
    /// before the client connects).
    pub learn_floor: Duration,
    /// Added to every learned address's TTL: the client's TTL counts from
    /// when it got the answer, the element's from just before.
    pub learn_grace: Duration,
}

impl Default for Bounds {
    fn default() -> Self {
        Self {
            in_flight: DNS_FORWARD_MAX as usize,
            tcp_connections: MAX_TCP_CONNECTIONS as usize,
            tcp_idle: Duration::from_secs(10),
            learn_floor: Duration::from_secs(10),
            learn_grace: Duration::from_secs(5),
        }
    }
}

/// What the server did, counted since it started.
#[derive(Debug, Default)]
pub struct Counters {
    /// Responses sent.
    pub answered: AtomicU64,
    /// Queries that went upstream.
    pub forwarded: AtomicU64,
    /// Addresses learned (an address learned into two sets counts once).
    pub learned: AtomicU64,
    /// Answers refused because a learn failed.
    pub learn_failed: AtomicU64,
    /// Addresses cut past the answer cap.
    pub cut: AtomicU64,
    /// Queries dropped: no room in flight, or a TCP connection over the cap.
    pub dropped: AtomicU64,
}

/// One profile's resolver on one bridge.
pub struct Resolver {
    policy: Policy,
    sets: LearnSets,
    upstreams: Upstreams,
    learner: Arc<dyn Learn>,
    askers: Askers,
    bounds: Bounds,
    in_flight: Arc<Semaphore>,
    tcp: Arc<Semaphore>,
    record: Option<(PathBuf, RecordId)>,
    audit: Option<Arc<dyn AuditSink>>,
    approvals: Option<Approvals>,
    /// What it did.
    pub counters: Counters,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver")
            .field("profile", &self.policy.profile)
            .field("upstreams", &self.upstreams.addrs())
            .field("bounds", &self.bounds)
            .finish_non_exhaustive()
    }
}

/// Binds the resolver's sockets at `addr` (the gateway's address, port
/// 53), bound to `device` so only queries arriving on that bridge reach
/// them. Must be called in the network namespace of the bridge and inside
/// a tokio runtime.
pub fn bind(addr: SocketAddr, device: &str) -> io::Result<(UdpSocket, TcpListener)> {
    let udp = std::net::UdpSocket::bind(addr)?;
    bind_to_device(&udp, device)?;
    udp.set_nonblocking(true)?;
    let tcp = std::net::TcpListener::bind(addr)?;
    bind_to_device(&tcp, device)?;
    tcp.set_nonblocking(true)?;
    Ok((UdpSocket::from_std(udp)?, TcpListener::from_std(tcp)?))
}

fn bind_to_device(sock: &impl std::os::fd::AsRawFd, device: &str) -> io::Result<()> {
    let name = device.as_bytes();
    if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("`{device}` is not an interface name"),
        ));
    }
    // SAFETY: the fd is open for the call; `name` is valid for its
    // length, which the kernel reads (no NUL needed with an explicit
    // length).
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

impl Resolver {
    /// A resolver with `policy`, learning into `sets` through `learner`,
    /// each address pinned to the sandbox of `askers` that asked.
    pub fn new(
        policy: Policy,
        sets: LearnSets,
        upstreams: Upstreams,
        learner: Arc<dyn Learn>,
        askers: Askers,
        bounds: Bounds,
    ) -> Self {
        Self {
            in_flight: Arc::new(Semaphore::new(bounds.in_flight)),
            tcp: Arc::new(Semaphore::new(bounds.tcp_connections)),
            policy,
            sets,
            upstreams,
            learner,
            askers,
            bounds,
            record: None,
            audit: None,
            approvals: None,
            counters: Counters::default(),
        }
    }

    /// Serves only while the record at `path` is still the version `id`:
    /// once the apply rewrites or removes it, every query is refused until
    /// the resolver is replaced, so a changed policy is never served from
    /// the old one.
    pub fn watching(mut self, path: PathBuf, id: RecordId) -> Self {
        self.record = Some((path, id));
        self
    }

    /// Holds lookups of names the policy does not admit for the operator
    /// to decide (`approvals = "ask"`), through `approvals`.
    pub fn holding(mut self, approvals: Approvals) -> Self {
        self.approvals = Some(approvals);
        self
    }

    /// Records every decision in `sink`.
    pub fn with_audit(mut self, sink: Arc<dyn AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    /// Whether the policy it serves is still the recorded one.
    pub fn is_current(&self) -> bool {
        self.record
            .as_ref()
            .is_none_or(|(path, id)| RecordId::of(path) == Some(*id))
    }

    /// How long `l` stays learned.
    fn lifetime(&self, l: &Learned) -> Duration {
        Duration::from_secs(u64::from(l.ttl)).max(self.bounds.learn_floor) + self.bounds.learn_grace
    }

    /// The elements of `learned` for the sets `sets` gives each family,
    /// each pinned to the address of its family of the sandbox that asked
    /// from `from` (none for a source that is no sandbox, or a sandbox
    /// without an address of that family: no one gains the address).
    fn elements(
        &self,
        sets: impl Fn(AddrFamily) -> Vec<String>,
        learned: &[Learned],
        from: IpAddr,
    ) -> Vec<LearnElement> {
        let mut out = Vec::new();
        for l in learned {
            let family = AddrFamily::of(l.addr);
            let Some(asker) = self.askers.pin(from, family) else {
                continue;
            };
            for set in sets(family) {
                out.push(LearnElement {
                    set,
                    addr: l.addr,
                    asker: Some(asker),
                    timeout: Some(self.lifetime(l)),
                });
            }
        }
        out
    }

    /// The answer to one query's bytes from `from`, with its addresses
    /// learned and the decision recorded; `None`: send nothing.
    pub async fn answer(
        &self,
        query: &[u8],
        transport: Transport,
        from: IpAddr,
    ) -> Option<Vec<u8>> {
        if !self.is_current() {
            return self.replaced(query);
        }
        let approved = match self.held(query, from).await {
            Ok(approved) => approved,
            Err(refusal) => return refusal,
        };
        let approving;
        let policy = match &approved {
            Some(name) => {
                approving = self.policy.admitting(name);
                &approving
            }
            None => &self.policy,
        };
        let ex = policy.resolve(query, transport, &self.upstreams).await;
        if ex.forwarded {
            self.counters.forwarded.fetch_add(1, Ordering::Relaxed);
        }
        self.counters
            .cut
            .fetch_add(ex.cut as u64, Ordering::Relaxed);
        let response = ex.response?;
        self.counters.answered.fetch_add(1, Ordering::Relaxed);
        // A response was made, so the bytes were a query that parses.
        let asked = Message::from_vec(query).ok()?;
        let question = asked.queries().first();
        let name = question.map(|q| text(q.name())).unwrap_or_default();
        let qtype = question
            .map(|q| q.query_type().to_string())
            .unwrap_or_default();
        let mut record = AuditRecord {
            src: from,
            name,
            qtype,
            outcome: if ex.forwarded || response.get(3).is_some_and(|b| b & 0x0f == 0) {
                Outcome::Answered
            } else {
                Outcome::Refused
            },
            addresses: ex.learned.iter().map(|l| l.addr).collect(),
            set: None,
        };
        // Forwarded and answered: its name picks the classes to learn
        // into (none on an `internet` profile, whose rules need no
        // learned address).
        let elements = if approved.is_some() {
            self.elements(|f| self.sets.approved_sets(f), &ex.learned, from)
        } else {
            self.elements(|f| self.sets.sets_for(&record.name, f), &ex.learned, from)
        };
        let sent = if elements.is_empty() {
            Some(response)
        } else {
            match self.learner.learn(&elements) {
                Ok(()) => {
                    self.counters
                        .learned
                        .fetch_add(ex.learned.len() as u64, Ordering::Relaxed);
                    Some(response)
                }
                Err(why) => {
                    self.counters.learn_failed.fetch_add(1, Ordering::Relaxed);
                    record.addresses.clear();
                    if let LearnFailure::Full { set } = &why {
                        record.outcome = Outcome::Full;
                        record.set.clone_from(set);
                    }
                    self.unlearned(&asked, &record.name, &why)
                }
            }
        };
        if let Some(sink) = &self.audit {
            sink.record(&record);
        }
        sent
    }

    /// A lookup of an unlisted name put to the operator, when the profile
    /// asks: `Ok(Some(name))` once approved, `Ok(None)` when nothing was
    /// held, `Err` with the refusal to send (denied, undecided, or not
    /// held).
    async fn held(&self, query: &[u8], from: IpAddr) -> Result<Option<String>, Option<Vec<u8>>> {
        let Some(approvals) = &self.approvals else {
            return Ok(None);
        };
        let Ok(asked) = Message::from_vec(query) else {
            return Ok(None);
        };
        let Some(name) = self.policy.unlisted(&asked) else {
            return Ok(None);
        };
        let profile = &self.policy.profile;
        let (code, text) = match approvals.hold(from, &name).await {
            // The policy may have changed while the lookup waited.
            Held::Granted if !self.is_current() => return Err(self.replaced(query)),
            Held::Granted => return Ok(Some(name)),
            Held::Denied { id } => (
                ResponseCode::NXDomain,
                format!(
                    "blocked by corral profile `{profile}`: the operator denied `{name}` (approval {id})"
                ),
            ),
            Held::Unanswered { id, waited } => (
                ResponseCode::NXDomain,
                format!(
                    "blocked by corral profile `{profile}`: `{name}` is not on its allowlist and the operator did not decide within {} s (approval {id}); ask again to put it to the operator once more",
                    waited.as_secs()
                ),
            ),
            Held::NotHeld(why) => (
                ResponseCode::Refused,
                format!(
                    "corral profile `{profile}`: `{name}` is not on its allowlist and was not put to the operator: {why}"
                ),
            ),
        };
        self.counters.answered.fetch_add(1, Ordering::Relaxed);
        if let Some(sink) = &self.audit {
            sink.record(&AuditRecord {
                src: from,
                name: name.clone(),
                qtype: asked
                    .queries()
                    .first()
                    .map(|q| q.query_type().to_string())
                    .unwrap_or_default(),
                outcome: Outcome::Refused,
                addresses: Vec::new(),
                set: None,
            });
        }
        Err(respond(
            &asked,
            code,
            Vec::new(),
            &[ExtendedError::new(EDE_BLOCKED, text)],
        )
        .to_vec()
        .ok())
    }

    /// The refusal of a resolver whose record changed.
    fn replaced(&self, query: &[u8]) -> Option<Vec<u8>> {
        let asked = Message::from_vec(query).ok()?;
        if asked.message_type() != hickory_proto::op::MessageType::Query {
            return None;
        }
        self.counters.answered.fetch_add(1, Ordering::Relaxed);
        let text = format!(
            "corral profile `{}`: its resolver is being replaced (the profile changed); ask again in a moment",
            self.policy.profile
        );
        respond(
            &asked,
            ResponseCode::ServFail,
            Vec::new(),
            &[ExtendedError::new(EDE_OTHER, text)],
        )
        .to_vec()
        .ok()
    }

    /// The refusal sent instead of an answer whose addresses could not be
    /// learned.
    fn unlearned(&self, asked: &Message, name: &str, why: &LearnFailure) -> Option<Vec<u8>> {
        let (code, text) = match why {
            LearnFailure::Full { .. } => (
                ResponseCode::Refused,
                format!(
                    "corral profile `{}`: its learned addresses are at their limit, so `{name}` gets no new address until some expire; ask the operator to raise the profile's `learned_max`",
                    self.policy.profile
                ),
            ),
            LearnFailure::Other(e) => (
                ResponseCode::ServFail,
                format!(
                    "corral profile `{}`: `{name}` was answered but its addresses could not be allowed ({e})",
                    self.policy.profile
                ),
            ),
        };
        respond(
            asked,
            code,
            Vec::new(),
            &[ExtendedError::new(EDE_OTHER, text)],
        )
        .to_vec()
        .ok()
    }

    /// Serves `sock` until it fails: each datagram answered in its own
    /// task, at most [`Bounds::in_flight`] at once.
    pub async fn serve_udp(self: Arc<Self>, sock: UdpSocket) -> io::Result<()> {
        let sock = Arc::new(sock);
        let mut buf = vec![0u8; 65_535];
        loop {
            let (n, from) = sock.recv_from(&mut buf).await?;
            let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let query = buf[..n].to_vec();
            let (me, sock) = (self.clone(), sock.clone());
            tokio::spawn(async move {
                if let Some(r) = me.answer(&query, Transport::Udp, from.ip()).await {
                    // A send that fails (the sandbox gone) has no one to
                    // tell.
                    let _ = sock.send_to(&r, from).await;
                }
                drop(permit);
            });
        }
    }

    /// Serves `listener` until it fails: each connection in its own task,
    /// at most [`Bounds::tcp_connections`] at once, its queries answered in
    /// order.
    pub async fn serve_tcp(self: Arc<Self>, listener: TcpListener) -> io::Result<()> {
        loop {
            let (stream, peer) = listener.accept().await?;
            let Ok(permit) = self.tcp.clone().try_acquire_owned() else {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                drop(stream);
                continue;
            };
            let me = self.clone();
            tokio::spawn(async move {
                // A connection that breaks ends its own task only.
                let _ = me.connection(stream, peer.ip()).await;
                drop(permit);
            });
        }
    }

    async fn connection(&self, mut stream: TcpStream, peer: IpAddr) -> io::Result<()> {
        loop {
            let mut len = [0u8; 2];
            match tokio::time::timeout(self.bounds.tcp_idle, stream.read_exact(&mut len)).await {
                Ok(Ok(_)) => {}
                // Idle too long, or closed: either way the connection ends.
                Ok(Err(_)) | Err(_) => return Ok(()),
            }
            let mut query = vec![0u8; usize::from(u16::from_be_bytes(len))];
            tokio::time::timeout(self.bounds.tcp_idle, stream.read_exact(&mut query))
                .await
                .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))??;
            let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
                return Ok(());
            };
            let response = self.answer(&query, Transport::Tcp, peer).await;
            drop(permit);
            let Some(r) = response else { continue };
            let Ok(n) = u16::try_from(r.len()) else {
                continue;
            };
            stream.write_all(&n.to_be_bytes()).await?;
            stream.write_all(&r).await?;
        }
    }
}
