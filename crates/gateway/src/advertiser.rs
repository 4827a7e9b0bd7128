//! corral's own router advertisements on one bridge (`dns = "corral"`
//! profiles with a /64): what dnsmasq's `enable-ra` did, sent the way
//! corral's DHCP server answers, out of one port at a time.
//!
//! - **Solicited.** A router solicitation from a bound sandbox (its source
//!   is the EUI-64 link-local address of its MAC or its reserved IPv6
//!   address, both of which the bridge binds to its port) is answered with the advertisement ([`crate::advert`]) out
//!   of that port alone, to that MAC, at most once a second per port. A
//!   solicitation from an address no reservation derives (`::`, a
//!   quarantined port, a forged source) gets nothing. So a sandbox can
//!   neither make a sibling receive anything nor learn when one asked.
//! - **Unsolicited.** Every [`UNSOLICITED_EVERY`] each bound port gets the
//!   advertisement, as a router repeats it well inside its 1,800 s
//!   lifetime.
//!
//! The solicitations are read on a raw ICMPv6 socket bound to the bridge,
//! filtered to type 133, joined to all-routers (ff02::2) there.

use std::collections::HashMap;
use std::io;
use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use corral_egress::netns::Netns;
use ipnet::Ipv6Net;

use crate::advert::{Advertisement, Router};
use crate::dhcp::{RecordedReservations, Reservation};
use crate::on_port::PortSender;

/// How often every bound port gets an advertisement unasked.
pub const UNSOLICITED_EVERY: Duration = Duration::from_secs(200);
/// The least time between two answers out of one port.
const PER_PORT_GAP: Duration = Duration::from_secs(1);
/// How long a read waits, so a stop is seen this soon.
const POLL: Duration = Duration::from_millis(250);
const ROUTER_SOLICITATION: u8 = 133;
const ETH_P_IPV6: u16 = 0x86dd;
/// `ICMP6_FILTER` (linux/icmpv6.h), at level `IPPROTO_ICMPV6`.
const ICMP6_FILTER: libc::c_int = 1;

/// What an advertiser has done.
#[derive(Debug, Default)]
pub struct AdvertCounters {
    /// Advertisements sent (answers and unsolicited ones).
    pub sent: AtomicU64,
    /// Solicitations that got no answer (no reservation derives their
    /// source, or their port was answered within the last second).
    pub ignored: AtomicU64,
    /// Advertisements that could not be sent.
    pub failed: AtomicU64,
}

/// Router advertisements on one bridge; dropping it stops them.
#[derive(Debug)]
pub struct HostedAdverts {
    counters: Arc<AdvertCounters>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl HostedAdverts {
    /// Advertises `prefix` (and `dns` as the resolver, when given) on
    /// `bridge` inside `ns`, to the ports the reservations recorded in
    /// `dir` (the gateway's directory) name, re-read when they change.
    /// Returns once the socket is ready (an error here: nothing runs).
    pub fn start(
        ns: &Netns,
        prefix: Ipv6Net,
        dns: Option<Ipv6Addr>,
        bridge: &str,
        dir: &Path,
    ) -> io::Result<Self> {
        let counters = Arc::new(AdvertCounters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let ns = ns.try_clone()?;
        let device = bridge.to_owned();
        let mut source = RecordedReservations::new(dir);
        let (ready, set_up) = std::sync::mpsc::channel::<io::Result<()>>();
        let (c, s) = (Arc::clone(&counters), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name(format!("ra-{device}"))
            .spawn(move || {
                let ran = ns.enter_and_run(move || {
                    let mut setup = || -> io::Result<_> {
                        let router = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()?
                            .block_on(Router::of_bridge(&device))?;
                        let sock = solicitations(&device)?;
                        let out = PortSender::open()?;
                        let reservations = source.read().map_err(io::Error::other)?;
                        Ok((router, sock, out, reservations))
                    };
                    let (router, sock, out, reservations) = match setup() {
                        Ok(v) => v,
                        Err(e) => {
                            let _ = ready.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready.send(Ok(()));
                    let advert = Advertisement {
                        router,
                        prefix,
                        dns,
                    };
                    let mut serve = Serve {
                        advert,
                        out,
                        reservations,
                        last: HashMap::new(),
                        counters: &c,
                    };
                    serve.everyone();
                    let mut next_round = Instant::now() + UNSOLICITED_EVERY;
                    while !s.load(Ordering::Relaxed) {
                        if let Some(r) = source.changed() {
                            serve.reservations = r;
                        }
                        match receive(&sock) {
                            Ok(Some(from)) => serve.solicited(from),
                            Ok(None) => {}
                            Err(e) => {
                                tracing::error!(bridge = %device, error = %e, "corral's router advertisements: the socket failed; stopping");
                                return;
                            }
                        }
                        if Instant::now() >= next_round {
                            serve.everyone();
                            next_round = Instant::now() + UNSOLICITED_EVERY;
                        }
                    }
                });
                drop(ran);
            })?;
        let thread =
            crate::started::await_ready(thread, &set_up, "corral's router advertisements", bridge)?;
        Ok(Self {
            counters,
            stop,
            thread: Some(thread),
        })
    }

    /// What it has done so far.
    pub fn counters(&self) -> &AdvertCounters {
        &self.counters
    }

    /// Whether it still serves (a socket error ends its thread).
    pub fn is_serving(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for HostedAdverts {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Serve<'a> {
    advert: Advertisement,
    out: PortSender,
    reservations: Vec<Reservation>,
    /// When each port's last solicitation was answered.
    last: HashMap<String, Instant>,
    counters: &'a AdvertCounters,
}

impl Serve<'_> {
    fn send(&self, r: &Reservation) {
        let mac = r.mac.octets();
        match self
            .out
            .send(r.port.as_str(), mac, ETH_P_IPV6, &self.advert.frame(mac))
        {
            Ok(()) => {
                self.counters.sent.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(port = %r.port, error = %e, "a router advertisement could not be sent");
            }
        }
    }

    fn everyone(&mut self) {
        for r in self.reservations.clone() {
            self.send(&r);
        }
    }

    fn solicited(&mut self, from: Ipv6Addr) {
        let mac = mac_of_link_local(from);
        let Some(r) = self
            .reservations
            .iter()
            .find(|r| Some(r.mac.octets()) == mac || r.v6 == Some(from))
            .cloned()
        else {
            self.counters.ignored.fetch_add(1, Ordering::Relaxed);
            return;
        };
        if self
            .last
            .get(r.port.as_str())
            .is_some_and(|t| t.elapsed() < PER_PORT_GAP)
        {
            self.counters.ignored.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Only answers count against the port: the unsolicited rounds are
        // not the sandbox's doing.
        self.last.insert(r.port.to_string(), Instant::now());
        self.send(&r);
    }
}

/// The MAC whose modified EUI-64 link-local address `ip` is (fe80::/64,
/// `ff:fe` in the middle, the universal/local bit flipped back).
fn mac_of_link_local(ip: Ipv6Addr) -> Option<[u8; 6]> {
    let o = ip.octets();
    let link_local = o[..8] == [0xfe, 0x80, 0, 0, 0, 0, 0, 0];
    (link_local && o[11] == 0xff && o[12] == 0xfe)
        .then(|| [o[8] ^ 0x02, o[9], o[10], o[13], o[14], o[15]])
}

/// A raw ICMPv6 socket on `bridge` that receives router solicitations
/// only, joined to all-routers there, reads waiting at most [`POLL`].
fn solicitations(bridge: &str) -> io::Result<OwnedFd> {
    let index = crate::on_port::if_index(bridge)?;
    // SAFETY: plain socket(2); the fd is owned at once.
    let raw = unsafe {
        libc::socket(
            libc::AF_INET6,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_ICMPV6,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh valid fd owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let name = std::ffi::CString::new(bridge)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bridge name holds a NUL"))?;
    set(
        &fd,
        libc::SOL_SOCKET,
        libc::SO_BINDTODEVICE,
        name.as_bytes_with_nul(),
    )?;
    // Bit set: blocked. Every type blocked but 133.
    let mut filter = [u32::MAX; 8];
    let t = usize::from(ROUTER_SOLICITATION);
    filter[t >> 5] &= !(1u32 << (t & 31));
    set(&fd, libc::IPPROTO_ICMPV6, ICMP6_FILTER, &filter)?;
    let join = libc::ipv6_mreq {
        ipv6mr_multiaddr: libc::in6_addr {
            s6_addr: Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2).octets(),
        },
        ipv6mr_interface: u32::try_from(index).unwrap_or(0),
    };
    set(
        &fd,
        libc::IPPROTO_IPV6,
        libc::IPV6_ADD_MEMBERSHIP,
        std::slice::from_ref(&join),
    )?;
    let timeout = libc::timeval {
        tv_sec: 0,
        tv_usec: libc::suseconds_t::try_from(POLL.as_micros()).unwrap_or(250_000),
    };
    set(
        &fd,
        libc::SOL_SOCKET,
        libc::SO_RCVTIMEO,
        std::slice::from_ref(&timeout),
    )?;
    Ok(fd)
}

fn set<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &[T]) -> io::Result<()> {
    let len = libc::socklen_t::try_from(std::mem::size_of_val(value))
        .map_err(|_| io::Error::other("socket option too large"))?;
    // SAFETY: `value` is alive for the call and `len` is its size in bytes.
    let rc = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, value.as_ptr().cast(), len) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The source of the next solicitation; `None` when none came within
/// [`POLL`].
fn receive(fd: &OwnedFd) -> io::Result<Option<Ipv6Addr>> {
    let mut buf = [0u8; 1500];
    // SAFETY: all-zero is a valid sockaddr_in6.
    let mut from: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_in6>())
        .map_err(|_| io::Error::other("sockaddr size"))?;
    // SAFETY: `buf` and `from` are alive for the call, lengths are theirs.
    let n = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            0,
            (&raw mut from).cast(),
            &raw mut len,
        )
    };
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted => {
                Ok(None)
            }
            _ => Err(e),
        };
    }
    // The kernel checked the checksum; the filter passed type 133 only.
    if n < 8 || buf[0] != ROUTER_SOLICITATION || buf[1] != 0 {
        return Ok(None);
    }
    Ok(Some(Ipv6Addr::from(from.sin6_addr.s6_addr)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_local_eui64_address_names_its_mac_and_nothing_else_does() {
        let mac = [0x02, 0xc0, 0x0a, 0x09, 0x00, 0x0b];
        let ll: Ipv6Addr = "fe80::c0:aff:fe09:b".parse().unwrap();
        assert_eq!(mac_of_link_local(ll), Some(mac));
        for other in [
            "::",
            "fd00:9::c0:aff:fe09:b",
            "fe80::1",
            "fe80::c0:aff:fd09:b",
        ] {
            assert_eq!(mac_of_link_local(other.parse().unwrap()), None, "{other}");
        }
    }
}
