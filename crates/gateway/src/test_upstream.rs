//! A tiny authoritative-looking DNS server for tests and the drill: it
//! answers configured names with A/AAAA records and a TTL, NXDOMAIN for
//! everything else, over UDP and TCP (an answer too long for a datagram —
//! thousands of records, as a hostile authority sends — goes out over UDP
//! truncated and whole over TCP), and logs every query it receives —
//! the log is the proof that a query did (or did not) leave the host.
//!
//! Bind it inside the "internet" namespace (e.g. via
//! [`crate::netns::Netns::run`]); the socket keeps its namespace, so the
//! serving thread may run anywhere.

use std::collections::HashMap;
use std::io;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::wire::{self, Question, RCODE_NOERROR, RCODE_NXDOMAIN};

#[derive(Debug, Default)]
struct State {
    records: HashMap<String, (Vec<IpAddr>, u32)>,
    silent: Vec<String>,
    log: Vec<Question>,
    received: Vec<Vec<u8>>,
}

/// A running test upstream; stops when dropped.
#[derive(Debug)]
pub struct TestUpstream {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl TestUpstream {
    /// Binds UDP and TCP `addr` in the calling thread's namespace and starts
    /// serving (a port of 0 picks one free for both).
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let sock = UdpSocket::bind(addr)?;
        // Short reads let the threads notice `stop` promptly.
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = sock.local_addr()?;
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let udp = {
            let (state, stop) = (Arc::clone(&state), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("test-upstream-udp".into())
                .spawn(move || serve_udp(&sock, &state, &stop))?
        };
        let tcp = {
            let (state, stop) = (Arc::clone(&state), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("test-upstream-tcp".into())
                .spawn(move || serve_tcp(&listener, &state, &stop))?
        };
        Ok(Self {
            addr,
            state,
            stop,
            threads: vec![udp, tcp],
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers `name` with `addrs` (A and/or AAAA by family) and `ttl`,
    /// replacing what it answered before. An empty list gives NOERROR with
    /// no records.
    pub fn set(&self, name: &str, addrs: &[IpAddr], ttl: u32) {
        self.lock()
            .records
            .insert(normalize(name), (addrs.to_vec(), ttl));
    }

    /// Never answers `domain` or any name under it (queries are still
    /// logged): an authority that is down or slower than any timeout.
    pub fn silence(&self, domain: &str) {
        self.lock().silent.push(normalize(domain));
    }

    /// Every query received so far, in order.
    pub fn queries(&self) -> Vec<Question> {
        self.lock().log.clone()
    }

    /// The names of every query received so far, in order.
    pub fn queried_names(&self) -> Vec<String> {
        self.lock().log.iter().map(|q| q.name.clone()).collect()
    }

    /// Every message received so far, byte for byte as it arrived (for
    /// TCP without its length prefix), garbage included: what a sandbox
    /// managed to carry to an authority, whatever the names say.
    pub fn received(&self) -> Vec<Vec<u8>> {
        self.lock().received.clone()
    }

    /// Forgets the query log and the received messages.
    pub fn clear_log(&self) {
        let mut st = self.lock();
        st.log.clear();
        st.received.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State half-updated
        // (each update is one insert or push), so poisoning is ignored.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for TestUpstream {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The largest answer sent over UDP (the EDNS size most resolvers
/// advertise); a longer one goes out truncated.
const UDP_MAX: usize = 1232;

fn serve_udp(sock: &UdpSocket, state: &Mutex<State>, stop: &AtomicBool) {
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        let Ok((n, peer)) = sock.recv_from(&mut buf) else {
            continue;
        };
        if let Some(mut reply) = answer(&buf[..n], state) {
            // Many records (a hostile authority's answer) do not fit a
            // datagram: say so, and the resolver retries over TCP.
            if reply.len() > UDP_MAX {
                reply = wire::truncated(&reply).unwrap_or_default();
            }
            let _ = sock.send_to(&reply, peer);
        }
    }
}

fn serve_tcp(listener: &TcpListener, state: &Arc<Mutex<State>>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                // One thread per connection: a client may keep its connection
                // open (dnsmasq does) while opening another. The thread ends
                // when the peer closes or goes quiet for 2 s.
                let state = Arc::clone(state);
                let _ = std::thread::Builder::new()
                    .name("test-upstream-conn".into())
                    .spawn(move || serve_stream(stream, &state));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// One TCP connection: length-prefixed queries until the peer closes.
fn serve_stream(mut stream: TcpStream, state: &Mutex<State>) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    loop {
        let mut len = [0u8; 2];
        stream.read_exact(&mut len)?;
        let mut msg = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut msg)?;
        if let Some(reply) = answer(&msg, state) {
            let n = u16::try_from(reply.len()).map_err(io::Error::other)?;
            stream.write_all(&n.to_be_bytes())?;
            stream.write_all(&reply)?;
        }
    }
}

/// Logs the query and builds its answer (`None` for garbage).
fn answer(msg: &[u8], state: &Mutex<State>) -> Option<Vec<u8>> {
    let q = {
        let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
        st.received.push(msg.to_vec());
        wire::parse_query(msg).ok()?
    };
    let records = {
        let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
        st.log.push(q.clone());
        let silent = st
            .silent
            .iter()
            .any(|d| q.name == *d || q.name.ends_with(&format!(".{d}")));
        if silent {
            return None;
        }
        st.records.get(&q.name).cloned()
    };
    let reply = match records {
        Some((addrs, ttl)) => wire::encode_response(msg, RCODE_NOERROR, &addrs, ttl),
        None => wire::encode_response(msg, RCODE_NXDOMAIN, &[], 0),
    };
    reply.ok()
}

fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}
