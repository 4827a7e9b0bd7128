//! A [`Server`] running on a thread of its own inside a network namespace,
//! until the handle is dropped: a UDP socket on port 67 bound to the
//! bridge receives (after every rule of `table bridge corral` and `table
//! inet corral` has passed the datagram), and each reply leaves by its
//! client's port (a packet socket on the port itself).

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use corral_egress::link::Links;
use corral_egress::netns::Netns;
use dhcproto::Decodable;
use dhcproto::v4::{MAGIC, Message, SERVER_PORT};
use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, SockaddrIn, sockopt};
use tokio::sync::oneshot;

use super::frame::reply_frame;
use super::lease_file::LeaseBook;
use super::{Network, Reservation, Server, recorded_reservations};
use crate::files::DHCP_RESERVATIONS_FILE;
use crate::on_port::PortSender;
use crate::resolver::RecordId;

const ETH_P_IP: u16 = 0x0800;
/// The fixed BOOTP header and the magic cookie: anything shorter is no
/// DHCP message.
const MIN_MESSAGE: usize = 240;

/// What a hosted server has done.
#[derive(Debug, Default)]
pub struct DhcpCounters {
    /// Replies sent.
    pub replied: AtomicU64,
    /// Datagrams that got no reply (not DHCP, no reservation, DECLINE,
    /// RELEASE, ...).
    pub ignored: AtomicU64,
    /// Replies that could not be sent or leases that could not be
    /// recorded.
    pub failed: AtomicU64,
}

/// A DHCP server serving one bridge; dropping it stops it and closes its
/// socket.
#[derive(Debug)]
pub struct HostedDhcp {
    server: Arc<Mutex<Server>>,
    counters: Arc<DhcpCounters>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl HostedDhcp {
    /// Serves `server` on `bridge` inside `ns`, keeping leases in
    /// `lease_dir` (the gateway's directory). Returns once the socket is
    /// bound (an error here: nothing runs).
    pub fn start(ns: &Netns, server: Server, bridge: &str, lease_dir: &Path) -> io::Result<Self> {
        Self::spawn(ns, server, bridge, lease_dir, None)
    }

    /// Serves `network` on `bridge` inside `ns` by the reservations the
    /// apply records in `dir` (the gateway's directory), re-read whenever
    /// the record changes, checked at every message: a port bound a moment
    /// ago is answered at its first DISCOVER, one unbound is not. A record
    /// that cannot be read answers nobody until it can. Leases are kept in
    /// `dir`.
    pub fn serve_recorded(
        ns: &Netns,
        network: Network,
        bridge: &str,
        dir: &Path,
    ) -> io::Result<Self> {
        let mut source = RecordedReservations::new(dir);
        let reservations = source.read().map_err(io::Error::other)?;
        Self::spawn(
            ns,
            Server::new(network, reservations),
            bridge,
            dir,
            Some(source),
        )
    }

    fn spawn(
        ns: &Netns,
        server: Server,
        bridge: &str,
        lease_dir: &Path,
        mut source: Option<RecordedReservations>,
    ) -> io::Result<Self> {
        let mut book = LeaseBook::open(lease_dir)?;
        let server = Arc::new(Mutex::new(server));
        let counters = Arc::new(DhcpCounters::default());
        let ns = ns.try_clone()?;
        let device = bridge.to_owned();
        let (stop, stopped) = oneshot::channel::<()>();
        let (ready, bound) = std::sync::mpsc::channel::<io::Result<()>>();
        let (s, c) = (Arc::clone(&server), Arc::clone(&counters));
        let thread = std::thread::Builder::new()
            .name(format!("dhcp-{device}"))
            .spawn(move || {
                let served = ns.enter_and_run_async(|| async move {
                    let setup = async {
                        let mac = bridge_mac(&device).await?;
                        let sock = bind(&device)?;
                        let out = PortSender::open()?;
                        Ok::<_, io::Error>((mac, sock, out))
                    };
                    let (mac, sock, out) = match setup.await {
                        Ok(v) => v,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    let serve = async {
                        let mut buf = vec![0u8; 1500];
                        loop {
                            let Ok((n, _)) = sock.recv_from(&mut buf).await else {
                                return;
                            };
                            let mut server = s.lock().unwrap_or_else(PoisonError::into_inner);
                            if let Some(src) = source.as_mut() {
                                src.refresh(&mut server);
                            }
                            handle(&server, &buf[..n], mac, &out, &mut book, &c);
                        }
                    };
                    tokio::select! {
                        () = serve => {}
                        _ = stopped => {}
                    }
                });
                drop(served);
            })?;
        let thread = crate::started::await_ready(thread, &bound, "corral's DHCP server", bridge)?;
        Ok(Self {
            server,
            counters,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Replaces the reservations; the next message is answered by them.
    pub fn set_reservations(&self, reservations: Vec<Reservation>) {
        self.server
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .set_reservations(reservations);
    }

    /// What it has done so far.
    pub fn counters(&self) -> &DhcpCounters {
        &self.counters
    }

    /// Whether it still serves (a socket error ends its thread).
    pub fn is_serving(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

/// The reservations record of one gateway directory, and the version of
/// it last read (shared by the DHCP server and the router advertiser).
#[derive(Debug)]
pub(crate) struct RecordedReservations {
    dir: PathBuf,
    path: PathBuf,
    id: Option<RecordId>,
}

impl RecordedReservations {
    pub(crate) fn new(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            path: dir.join(DHCP_RESERVATIONS_FILE),
            id: None,
        }
    }

    pub(crate) fn read(&mut self) -> Result<Vec<Reservation>, String> {
        self.id = RecordId::of(&self.path);
        recorded_reservations(&self.dir)
    }

    /// The reservations when the record changed since last read; none
    /// (closed: nobody is answered) when it cannot be read.
    pub(crate) fn changed(&mut self) -> Option<Vec<Reservation>> {
        if RecordId::of(&self.path) == self.id {
            return None;
        }
        match self.read() {
            Ok(r) => Some(r),
            Err(e) => {
                self.id = None;
                tracing::error!(error = %e, "corral's gateway: its reservations cannot be read; no client is answered until they can");
                Some(Vec::new())
            }
        }
    }

    /// Takes the record into `server` when it changed since last read.
    fn refresh(&mut self, server: &mut Server) {
        if let Some(r) = self.changed() {
            server.set_reservations(r);
        }
    }
}

impl Drop for HostedDhcp {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn handle(
    server: &Server,
    datagram: &[u8],
    bridge_mac: [u8; 6],
    out: &PortSender,
    book: &mut LeaseBook,
    c: &DhcpCounters,
) {
    let reply = (datagram.len() >= MIN_MESSAGE && datagram[236..240] == MAGIC)
        .then(|| Message::from_bytes(datagram).ok())
        .flatten()
        .and_then(|m| server.reply(&m));
    let Some(reply) = reply else {
        c.ignored.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let gateway = server.network().gateway;
    let sent = reply_frame(&reply, bridge_mac, gateway)
        .and_then(|f| out.send(reply.port.as_str(), reply.to_mac, ETH_P_IP, &f));
    if let Err(e) = sent {
        c.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(port = %reply.port, error = %e, "a DHCP reply could not be sent");
        return;
    }
    c.replied.fetch_add(1, Ordering::Relaxed);
    if let Some(g) = reply.granted {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        if let Err(e) = book.grant(&g, now) {
            c.failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(mac = %g.mac, error = %e, "a DHCP lease could not be recorded");
        }
    }
}

async fn bridge_mac(bridge: &str) -> io::Result<[u8; 6]> {
    let failed = |e: corral_egress::link::LinkError| io::Error::other(e.to_string());
    let links = Links::connect().map_err(failed)?;
    let link = links.require(bridge).await.map_err(failed)?;
    link.mac.ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("bridge `{bridge}` has no Ethernet address"),
        )
    })
}

/// 0.0.0.0:67 bound to `device` before the bind, so servers of other
/// bridges (each bound to its own) share the port.
fn bind(device: &str) -> io::Result<tokio::net::UdpSocket> {
    let fd = socket::socket(
        AddressFamily::Inet,
        SockType::Datagram,
        SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
        None,
    )?;
    socket::setsockopt(&fd, sockopt::ReuseAddr, &true)?;
    socket::setsockopt(
        &fd,
        sockopt::BindToDevice,
        &std::ffi::OsString::from(device),
    )?;
    socket::bind(
        fd.as_raw_fd(),
        &SockaddrIn::from(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SERVER_PORT)),
    )?;
    tokio::net::UdpSocket::from_std(std::net::UdpSocket::from(fd))
}
