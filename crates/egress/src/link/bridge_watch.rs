//! Bridge events: a route netlink socket subscribed to link, address and
//! neighbour changes in one namespace, reporting only those that touch
//! corral's bridges or their ports — a bridge deleted or set down, its
//! gateway address removed, a port set free of isolation or moved, a
//! static neighbour entry planted — so a watcher reads back at once.
//!
//! Neighbour entries that the kernel learns and ages on its own (reachable,
//! stale, …) change all the time and are not corral's state: only static
//! (`permanent`, `noarp`) entries and their removal are reported.

use std::collections::{HashMap, HashSet};
use std::ffi::CString;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use netlink_packet_core::{NetlinkMessage, NetlinkPayload};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::neighbour::{NeighbourMessage, NeighbourState};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};

use super::watch::poll_readable;
use crate::netns::Netns;

/// What changed on one of the watched bridges or its ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BridgeEvent {
    /// A bridge, or a port of one, appeared, changed or went away.
    Link {
        /// The link's name, when the message carried it.
        name: String,
    },
    /// An address of a bridge was added or removed.
    Address {
        /// The bridge.
        bridge: String,
    },
    /// A static neighbour entry on a bridge was added or removed.
    Neighbour {
        /// The bridge.
        bridge: String,
    },
    /// Events were lost (socket buffer overflow): anything may have
    /// changed.
    Lost,
}

/// A socket that hears about changes to a set of bridges and their ports,
/// in the namespace it was opened in.
#[derive(Debug)]
pub struct BridgeWatch {
    socket: Socket,
    buf: Vec<u8>,
    ns: Netns,
    /// Watched bridge names.
    names: HashSet<String>,
    /// Their interface indices, as last seen.
    index: HashMap<u32, String>,
}

impl BridgeWatch {
    /// Opens the watch inside `ns`, for the bridges named `bridges`.
    pub fn open(ns: &Netns, bridges: &[String]) -> io::Result<Self> {
        let socket = ns.run(|| -> io::Result<Socket> {
            let mut socket = Socket::new(NETLINK_ROUTE)?;
            socket.bind(&SocketAddr::new(0, 0))?;
            for group in [
                libc::RTNLGRP_LINK,
                libc::RTNLGRP_IPV4_IFADDR,
                libc::RTNLGRP_IPV6_IFADDR,
                libc::RTNLGRP_NEIGH,
            ] {
                socket.add_membership(group)?;
            }
            Ok(socket)
        })??;
        let mut watch = Self {
            socket,
            buf: vec![0; 64 * 1024],
            ns: ns.try_clone()?,
            names: HashSet::new(),
            index: HashMap::new(),
        };
        watch.watch(bridges)?;
        Ok(watch)
    }

    /// Watch these bridges from now on, looking up their indices again (a
    /// bridge re-created by a heal has a new one).
    pub fn watch(&mut self, bridges: &[String]) -> io::Result<()> {
        self.names = bridges.iter().cloned().collect();
        let names: Vec<String> = bridges.to_vec();
        self.index = self.ns.run(move || {
            names
                .iter()
                .filter_map(|n| index_of(n).map(|i| (i, n.clone())))
                .collect::<HashMap<_, _>>()
        })?;
        Ok(())
    }

    /// Waits up to `timeout` for a change to a watched bridge or port;
    /// `None` when none arrived in time.
    pub fn next(&mut self, timeout: Duration) -> io::Result<Option<BridgeEvent>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !poll_readable(self.socket.as_raw_fd(), left)? {
                return Ok(None);
            }
            match self.socket.recv(&mut &mut self.buf[..], 0) {
                Ok(n) => {
                    let bytes = self.buf[..n].to_vec();
                    if let Some(e) = self.first_event(&bytes) {
                        return Ok(Some(e));
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Ok(Some(BridgeEvent::Lost));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// The first message of a datagram that concerns a watched bridge.
    pub(crate) fn first_event(&mut self, mut bytes: &[u8]) -> Option<BridgeEvent> {
        let mut found = None;
        while !bytes.is_empty() {
            let Ok(msg) = NetlinkMessage::<RouteNetlinkMessage>::deserialize(bytes) else {
                // Unparsable: a read-back is cheap, an unseen change is not.
                return Some(BridgeEvent::Lost);
            };
            if found.is_none()
                && let NetlinkPayload::InnerMessage(inner) = &msg.payload
            {
                found = self.concerns(inner);
            }
            let len = usize::try_from(msg.header.length).unwrap_or(0);
            if len == 0 || len > bytes.len() {
                break;
            }
            bytes = &bytes[len.next_multiple_of(4).min(bytes.len())..];
        }
        found
    }

    fn concerns(&mut self, msg: &RouteNetlinkMessage) -> Option<BridgeEvent> {
        match msg {
            RouteNetlinkMessage::NewLink(l) | RouteNetlinkMessage::DelLink(l) => self.link(l),
            RouteNetlinkMessage::NewAddress(a) | RouteNetlinkMessage::DelAddress(a) => self
                .index
                .get(&a.header.index)
                .map(|b| BridgeEvent::Address { bridge: b.clone() }),
            RouteNetlinkMessage::NewNeighbour(n) | RouteNetlinkMessage::DelNeighbour(n) => {
                self.neighbour(n)
            }
            _ => None,
        }
    }

    fn link(&mut self, l: &LinkMessage) -> Option<BridgeEvent> {
        let mut name = None;
        let mut controller = None;
        for a in &l.attributes {
            match a {
                LinkAttribute::IfName(n) => name = Some(n.clone()),
                LinkAttribute::Controller(c) => controller = Some(*c),
                _ => {}
            }
        }
        let index = l.header.index;
        if let Some(n) = &name
            && self.names.contains(n)
        {
            // A bridge re-created under its name gets a new index.
            self.index.retain(|_, v| v != n);
            self.index.insert(index, n.clone());
        }
        let watched = self.index.contains_key(&index)
            || controller.is_some_and(|c| self.index.contains_key(&c));
        watched.then(|| BridgeEvent::Link {
            name: name.unwrap_or_else(|| format!("#{index}")),
        })
    }

    fn neighbour(&self, n: &NeighbourMessage) -> Option<BridgeEvent> {
        let bridge = self.index.get(&n.header.ifindex)?;
        matches!(
            n.header.state,
            NeighbourState::Permanent | NeighbourState::Noarp
        )
        .then(|| BridgeEvent::Neighbour {
            bridge: bridge.clone(),
        })
    }
}

/// The index of interface `name` in the current namespace.
fn index_of(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: a valid NUL-terminated string that lives across the call.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (i != 0).then_some(i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::Links;

    fn wait(watch: &mut BridgeWatch) -> Option<BridgeEvent> {
        for _ in 0..5 {
            if let Some(e) = watch.next(Duration::from_millis(200)).unwrap() {
                return Some(e);
            }
        }
        None
    }

    #[test]
    fn a_watched_bridge_is_heard_and_another_is_not() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = Netns::new().unwrap();
        ns.run_async(|| async {
            let links = Links::connect()?;
            links.create_bridge("bw-ours").await?;
            links.create_bridge("bw-other").await
        })
        .unwrap()
        .unwrap();
        let mut watch = BridgeWatch::open(&ns, &["bw-ours".to_owned()]).unwrap();
        assert_eq!(watch.next(Duration::from_millis(50)).unwrap(), None);
        // Control: the same change to a bridge nobody watches is not heard.
        ns.run_async(|| async {
            let links = Links::connect()?;
            links.create_veth("bw-a", "bw-b", None).await?;
            links.attach_port("bw-a", "bw-other", false).await
        })
        .unwrap()
        .unwrap();
        assert_eq!(watch.next(Duration::from_millis(300)).unwrap(), None);
        ns.run_async(|| async {
            let links = Links::connect()?;
            links.create_veth("bw-c", "bw-d", None).await?;
            links.attach_port("bw-c", "bw-ours", false).await
        })
        .unwrap()
        .unwrap();
        assert!(matches!(wait(&mut watch), Some(BridgeEvent::Link { .. })));
        while watch.next(Duration::from_millis(100)).unwrap().is_some() {}
        ns.run_async(|| async {
            let links = Links::connect()?;
            links.delete("bw-ours").await
        })
        .unwrap()
        .unwrap();
        // Its static neighbour entries go first, then the link.
        let mut heard = Vec::new();
        while let Some(e) = wait(&mut watch) {
            heard.push(e);
        }
        assert!(
            heard.contains(&BridgeEvent::Link {
                name: "bw-ours".to_owned()
            }),
            "{heard:?}"
        );
    }
}
