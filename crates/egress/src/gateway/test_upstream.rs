//! A tiny authoritative-looking DNS server for tests and the drill: it
//! answers configured names with A/AAAA records and a TTL, NXDOMAIN for
//! everything else, and logs every query it receives — the log is the proof
//! that a query did (or did not) leave the host.
//!
//! Bind it inside the "internet" namespace (e.g. via
//! [`crate::netns::Netns::run`]); the socket keeps its namespace, so the
//! serving thread may run anywhere.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use super::wire::{self, Question, RCODE_NOERROR, RCODE_NXDOMAIN};

#[derive(Debug, Default)]
struct State {
    records: HashMap<String, (Vec<IpAddr>, u32)>,
    log: Vec<Question>,
}

/// A running test upstream; stops when dropped.
#[derive(Debug)]
pub struct TestUpstream {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl TestUpstream {
    /// Binds UDP `addr` in the calling thread's namespace and starts serving.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let sock = UdpSocket::bind(addr)?;
        // Short reads let the thread notice `stop` promptly.
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = sock.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let state = Arc::clone(&state);
            let stop = Arc::clone(&stop);
            std::thread::Builder::new()
                .name("test-upstream".into())
                .spawn(move || serve(&sock, &state, &stop))?
        };
        Ok(Self {
            addr,
            state,
            stop,
            thread: Some(thread),
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

    /// Every query received so far, in order.
    pub fn queries(&self) -> Vec<Question> {
        self.lock().log.clone()
    }

    /// The names of every query received so far, in order.
    pub fn queried_names(&self) -> Vec<String> {
        self.lock().log.iter().map(|q| q.name.clone()).collect()
    }

    /// Forgets the query log.
    pub fn clear_log(&self) {
        self.lock().log.clear();
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
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(sock: &UdpSocket, state: &Mutex<State>, stop: &AtomicBool) {
    let mut buf = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        let (n, peer) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        let msg = &buf[..n];
        let Ok(q) = wire::parse_query(msg) else {
            continue;
        };
        let answer = {
            let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
            st.log.push(q.clone());
            st.records.get(&q.name).cloned()
        };
        let reply = match answer {
            Some((addrs, ttl)) => wire::encode_response(msg, RCODE_NOERROR, &addrs, ttl),
            None => wire::encode_response(msg, RCODE_NXDOMAIN, &[], 0),
        };
        if let Ok(reply) = reply {
            let _ = sock.send_to(&reply, peer);
        }
    }
}

fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}
