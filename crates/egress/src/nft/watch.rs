//! nftables events: a netfilter netlink socket subscribed to the
//! `NFNLGRP_NFTABLES` multicast group in one namespace, so a watcher hears
//! at once that something changed corral's tables (a deleted table, rule
//! or set, a flushed set, a new chain) instead of finding out at the next
//! timed read-back.
//!
//! The kernel notifies every committed object change with the object's
//! table name in attribute 1 (`NFTA_TABLE_NAME`, `NFTA_CHAIN_TABLE`,
//! `NFTA_RULE_TABLE`, `NFTA_SET_TABLE`, `NFTA_SET_ELEM_LIST_TABLE` all share
//! the number), so one decoder covers every kind. Changes to other tables
//! are skipped. Element changes to the sets the gateway resolvers fill at
//! run time (the learned `<profile>-dnsN…` sets) are skipped too: dnsmasq
//! adds to them all the time, and a lost learned element only narrows what
//! a sandbox reaches.

use std::collections::HashSet;
use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};

use crate::link::poll_readable;
use crate::netns::Netns;
use crate::plan::TABLE_NAME;

/// `NFNLGRP_NFTABLES`.
const GROUP_NFTABLES: u32 = 7;
/// `NFNL_SUBSYS_NFTABLES`, the high byte of the message type.
const SUBSYS_NFTABLES: u16 = 10;
const NLMSG_HDRLEN: usize = 16;
/// `struct nfgenmsg`: family, version, resource id.
const NFGENMSG_LEN: usize = 4;
const NFPROTO_INET: u8 = 1;
const NFPROTO_BRIDGE: u8 = 7;
/// The table name attribute of every object message.
const ATTR_TABLE: u16 = 1;
/// `NFTA_SET_ELEM_LIST_SET`: the set an element message is about.
const ATTR_ELEM_SET: u16 = 2;

/// Which kind of object a message is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NftObject {
    /// A table.
    Table,
    /// A chain.
    Chain,
    /// A rule.
    Rule,
    /// A set or map.
    Set,
    /// Elements of a set.
    Elements,
}

/// One change the kernel reported in one of corral's tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NftChange {
    /// What kind of object.
    pub object: NftObject,
    /// Deleted (or flushed) rather than added or replaced.
    pub deleted: bool,
    /// `inet` or `bridge`.
    pub family: &'static str,
    /// For element changes, the set's name.
    pub set: Option<String>,
}

/// What the nftables watch heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NftEvent {
    /// Something changed in `inet corral` or `bridge corral` (the first
    /// such change of the datagram).
    Changed(NftChange),
    /// The socket's buffer overflowed and events were lost: anything may
    /// have changed.
    Lost,
}

/// A socket that hears about nftables changes in the namespace it was
/// opened in.
#[derive(Debug)]
pub struct NftWatch {
    socket: Socket,
    buf: Vec<u8>,
    learned: HashSet<String>,
}

impl NftWatch {
    /// Opens the watch inside `ns` (needs CAP_NET_ADMIN there).
    pub fn open(ns: &Netns) -> io::Result<Self> {
        let socket = ns.run(|| -> io::Result<Socket> {
            let mut socket = Socket::new(NETLINK_NETFILTER)?;
            socket.bind(&SocketAddr::new(0, 0))?;
            socket.add_membership(GROUP_NFTABLES)?;
            Ok(socket)
        })??;
        Ok(Self {
            socket,
            buf: vec![0; 256 * 1024],
            learned: HashSet::new(),
        })
    }

    /// The sets whose element changes are not reported (the plan's learned
    /// sets: `HostPlan::dns_feeds`' keys).
    pub fn ignore_elements_of(&mut self, sets: impl IntoIterator<Item = String>) {
        self.learned = sets.into_iter().collect();
    }

    /// Waits up to `timeout` for a change to corral's tables; `None` when
    /// none arrived in time.
    pub fn next(&mut self, timeout: Duration) -> io::Result<Option<NftEvent>> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !poll_readable(self.socket.as_raw_fd(), left)? {
                return Ok(None);
            }
            match self.socket.recv(&mut &mut self.buf[..], 0) {
                Ok(n) => {
                    if let Some(change) = first_change(&self.buf[..n], &self.learned) {
                        return Ok(Some(NftEvent::Changed(change)));
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Ok(Some(NftEvent::Lost));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// The widest change a datagram makes to one of corral's tables (a deleted
/// table is notified object by object, the table last), skipping element
/// changes of `learned` sets.
pub(crate) fn first_change(mut bytes: &[u8], learned: &HashSet<String>) -> Option<NftChange> {
    let mut widest: Option<NftChange> = None;
    while bytes.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        if len < NLMSG_HDRLEN || len > bytes.len() {
            break;
        }
        let ty = u16::from_ne_bytes([bytes[4], bytes[5]]);
        if let Some(change) = decode(ty, &bytes[NLMSG_HDRLEN..len], learned)
            && widest
                .as_ref()
                .is_none_or(|w| rank(change.object) > rank(w.object))
        {
            widest = Some(change);
        }
        bytes = &bytes[len.next_multiple_of(4).min(bytes.len())..];
    }
    widest
}

fn rank(o: NftObject) -> u8 {
    match o {
        NftObject::Elements => 0,
        NftObject::Rule => 1,
        NftObject::Set => 2,
        NftObject::Chain => 3,
        NftObject::Table => 4,
    }
}

fn decode(ty: u16, body: &[u8], learned: &HashSet<String>) -> Option<NftChange> {
    if ty >> 8 != SUBSYS_NFTABLES || body.len() < NFGENMSG_LEN {
        return None;
    }
    let (object, deleted) = match ty & 0xff {
        0 => (NftObject::Table, false),
        2 => (NftObject::Table, true),
        3 => (NftObject::Chain, false),
        5 => (NftObject::Chain, true),
        6 => (NftObject::Rule, false),
        8 => (NftObject::Rule, true),
        9 => (NftObject::Set, false),
        11 => (NftObject::Set, true),
        12 => (NftObject::Elements, false),
        14 => (NftObject::Elements, true),
        // NEWGEN and the rest name no table.
        _ => return None,
    };
    let family = match body[0] {
        NFPROTO_INET => "inet",
        NFPROTO_BRIDGE => "bridge",
        _ => return None,
    };
    let attrs = &body[NFGENMSG_LEN..];
    if attr(attrs, ATTR_TABLE)? != TABLE_NAME.as_bytes() {
        return None;
    }
    let set = (object == NftObject::Elements)
        .then(|| attr(attrs, ATTR_ELEM_SET).map(|s| String::from_utf8_lossy(s).into_owned()))
        .flatten();
    if set.as_ref().is_some_and(|s| learned.contains(s)) {
        return None;
    }
    Some(NftChange {
        object,
        deleted,
        family,
        set,
    })
}

/// The payload of attribute `want`, without its NUL terminator.
fn attr(mut attrs: &[u8], want: u16) -> Option<&[u8]> {
    while attrs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes([attrs[0], attrs[1]]));
        // The top bits are the nested / byte-order flags.
        let ty = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if ty == want {
            let value = &attrs[4..len];
            return Some(value.strip_suffix(&[0]).unwrap_or(value));
        }
        attrs = &attrs[len.next_multiple_of(4).min(attrs.len())..];
    }
    None
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
