//! The drop log, reader side: the packets corral's rules blocked, read
//! from NFLOG over netlink (no `ulogd`), as audit records.
//!
//! The rules ([`crate::plan::droplog`]) copy each blocked packet's headers
//! to NFLOG group [`GROUP`] with the prefix `<rule id>:<verdict>`, at most
//! a profile's log budget per second; what the budget kept out is counted
//! in the rules ([`crate::nft::ProfileCounters::suppressed_packets`]).
//!
//! ```text
//! let mut log = Reader::open_in(&netns, droplog::GROUP)?;   // or Reader::open
//! let who = BindingAttribution::new(&plan.bindings, |b| names.get(b.port.as_str()).cloned());
//! for entry in &mut log {
//!     let record = NetRecord::Blocked(entry?.blocked(&who));
//!     ...
//! }
//! ```
//!
//! A long-running caller may instead poll the reader's fd (it is
//! [`AsFd`]) and call [`Reader::try_next`] when it is readable.
//!
//! One socket per group and namespace: the kernel refuses a second
//! reader of the same group ([`DropLogError::Busy`]).

mod attribution;
mod wire;

use std::collections::VecDeque;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::{Duration, SystemTime};

use corral_sandbox_core::audit::Blocked;

pub use crate::plan::droplog::{GROUP, Prefix, SNAPLEN, parse_prefix};
pub use attribution::{Attribution, BindingAttribution};

use crate::netns::Netns;

/// Reading the drop log failed.
#[derive(Debug, thiserror::Error)]
pub enum DropLogError {
    /// The netlink socket could not be opened or used.
    #[error(
        "the NFLOG netlink socket failed while {what}: {source}; reading the drop log needs root (CAP_NET_ADMIN) and a kernel with nfnetlink_log"
    )]
    Socket {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Another socket already reads the group.
    #[error(
        "NFLOG group {group} already has a reader in this network namespace (ulogd, or another corral); stop it, or read another group"
    )]
    Busy {
        /// The group.
        group: u16,
    },
}

fn socket_err(what: &'static str) -> impl FnOnce(io::Error) -> DropLogError {
    move |source| DropLogError::Socket { what, source }
}

/// One blocked packet as the log delivered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// When the kernel stamped the packet (or when it was read, when the
    /// packet carried no time stamp).
    pub time: SystemTime,
    /// The profile, rule id and verdict from the log prefix.
    pub prefix: Prefix,
    /// Source address as sent.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IP protocol number.
    pub protocol: u8,
    /// Source port (TCP, UDP, SCTP, UDP-Lite).
    pub sport: Option<u16>,
    /// Destination port.
    pub dport: Option<u16>,
    /// The sender's link-layer address, when the arrival interface has one.
    pub mac: Option<[u8; 6]>,
    /// The arrival interface's index.
    pub indev: Option<u32>,
}

impl Entry {
    /// The audit record, with the sandbox `who` attributes the source to.
    pub fn blocked(&self, who: &dyn Attribution) -> Blocked {
        Blocked {
            sandbox: who.sandbox(self.src, self.mac),
            profile: self.prefix.profile.clone(),
            rule: self.prefix.rule.clone(),
            src: self.src,
            dst: self.dst,
            protocol: wire::protocol_name(self.protocol),
            sport: self.sport,
            dport: self.dport,
            verdict: self.prefix.verdict.clone(),
        }
    }
}

/// Kernel buffer of the socket: room for a burst of log messages while
/// the reader is busy (each is a few hundred bytes).
const RCVBUF: usize = 4 << 20;

/// A reader of one NFLOG group in one network namespace.
#[derive(Debug)]
pub struct Reader {
    fd: OwnedFd,
    group: u16,
    buf: Vec<u8>,
    pending: VecDeque<Entry>,
    next_seq: Option<u32>,
    lost: u64,
    ignored: u64,
}

impl Reader {
    /// Bind `group` in the current thread's network namespace.
    pub fn open(group: u16) -> Result<Reader, DropLogError> {
        // SAFETY: plain socket(2); the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_NETFILTER,
            )
        };
        if raw < 0 {
            return Err(socket_err("opening it")(io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = RCVBUF as libc::c_int;
        // SAFETY: valid fd and option buffer. SO_RCVBUFFORCE needs
        // CAP_NET_ADMIN; without it the plain option caps the size.
        unsafe {
            let p = (&raw const size).cast();
            let n = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            if libc::setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, p, n) != 0 {
                libc::setsockopt(raw, libc::SOL_SOCKET, libc::SO_RCVBUF, p, n);
            }
        }
        // SAFETY: zeroed sockaddr_nl is valid; family set below.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: valid fd and address.
        let rc = unsafe {
            libc::bind(
                raw,
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(socket_err("binding it")(io::Error::last_os_error()));
        }
        let mut r = Reader {
            fd,
            group,
            buf: vec![0u8; 1 << 16],
            pending: VecDeque::new(),
            next_seq: None,
            lost: 0,
            ignored: 0,
        };
        r.request(&wire::command(1, group, wire::CMD_BIND), 1)
            .map_err(|e| match e {
                DropLogError::Socket { source, .. }
                    if source.raw_os_error() == Some(libc::EPERM)
                        || source.raw_os_error() == Some(libc::EBUSY) =>
                {
                    DropLogError::Busy { group }
                }
                e => e,
            })?;
        r.request(&wire::mode(2, group, SNAPLEN, 64 * 1024), 2)?;
        Ok(r)
    }

    /// Bind `group` in `netns` (the socket stays in that namespace).
    pub fn open_in(netns: &Netns, group: u16) -> Result<Reader, DropLogError> {
        netns
            .run(move || Reader::open(group))
            .map_err(socket_err("entering the namespace"))?
    }

    /// The group read.
    pub fn group(&self) -> u16 {
        self.group
    }

    /// Log messages the kernel numbered but this reader never got (its
    /// socket buffer overflowed): blocked and counted in the rules as
    /// logged, but missing here.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Messages on the group whose prefix is not corral's (another
    /// logger sharing the group), skipped.
    pub fn ignored(&self) -> u64 {
        self.ignored
    }

    fn request(&mut self, msg: &[u8], seq: u32) -> Result<(), DropLogError> {
        // SAFETY: valid fd; `msg` is a complete netlink message. The
        // zeroed sockaddr_nl addresses the kernel.
        let rc = unsafe {
            let mut to: libc::sockaddr_nl = std::mem::zeroed();
            to.nl_family = libc::AF_NETLINK as libc::sa_family_t;
            libc::sendto(
                self.fd.as_raw_fd(),
                msg.as_ptr().cast(),
                msg.len(),
                0,
                (&raw const to).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(socket_err("configuring the group")(
                io::Error::last_os_error(),
            ));
        }
        loop {
            let n = self.recv(Some(Duration::from_secs(5)))?.ok_or_else(|| {
                socket_err("configuring the group")(io::Error::from(io::ErrorKind::TimedOut))
            })?;
            let mut acked = None;
            let data = self.buf[..n].to_vec();
            for m in wire::messages(&data) {
                match m {
                    wire::Message::Ack { seq: s, errno } if s == seq => acked = Some(errno),
                    wire::Message::Packet(p) => self.take(p),
                    _ => {}
                }
            }
            match acked {
                Some(0) => return Ok(()),
                Some(errno) => {
                    return Err(socket_err("configuring the group")(
                        io::Error::from_raw_os_error(errno),
                    ));
                }
                None => {}
            }
        }
    }

    /// Receive one datagram into `buf`; `None` on timeout. An overflowed
    /// socket (ENOBUFS) is not an error: the sequence numbers count what
    /// was lost.
    fn recv(&mut self, timeout: Option<Duration>) -> Result<Option<usize>, DropLogError> {
        loop {
            let ms = timeout.map_or(-1, |t| t.as_millis().min(i32::MAX as u128) as i32);
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(socket_err("waiting for messages")(e));
            }
            if rc == 0 {
                return Ok(None);
            }
            // SAFETY: valid fd and buffer of `buf.len()` bytes.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Ok(Some(n as usize));
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                _ => return Err(socket_err("reading messages")(e)),
            }
        }
    }

    fn take(&mut self, p: wire::Packet<'_>) {
        if let Some(seq) = p.seq {
            if let Some(want) = self.next_seq {
                self.lost += u64::from(seq.wrapping_sub(want));
            }
            self.next_seq = Some(seq.wrapping_add(1));
        }
        let prefix = p
            .prefix
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(parse_prefix);
        let headers = p.payload.and_then(wire::headers);
        let (Some(prefix), Some(h)) = (prefix, headers) else {
            self.ignored += 1;
            return;
        };
        self.pending.push_back(Entry {
            time: p.timestamp.unwrap_or_else(SystemTime::now),
            prefix,
            src: h.src,
            dst: h.dst,
            protocol: h.protocol,
            sport: h.sport,
            dport: h.dport,
            mac: p.hwaddr,
            indev: p.indev,
        });
    }

    /// The next entry, waiting at most `timeout` (`None`: for ever).
    pub fn next_timeout(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Option<Entry>, DropLogError> {
        let deadline = timeout.map(|t| std::time::Instant::now() + t);
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(Some(e));
            }
            let left = deadline.map(|d| d.saturating_duration_since(std::time::Instant::now()));
            let Some(n) = self.recv(left)? else {
                return Ok(None);
            };
            let data = self.buf[..n].to_vec();
            for m in wire::messages(&data) {
                if let wire::Message::Packet(p) = m {
                    self.take(p);
                }
            }
        }
    }

    /// The next entry if one is ready now.
    pub fn try_next(&mut self) -> Result<Option<Entry>, DropLogError> {
        self.next_timeout(Some(Duration::ZERO))
    }
}

impl Iterator for Reader {
    type Item = Result<Entry, DropLogError>;

    /// Blocks until the next entry.
    fn next(&mut self) -> Option<Self::Item> {
        self.next_timeout(None).transpose()
    }
}

impl AsFd for Reader {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}
