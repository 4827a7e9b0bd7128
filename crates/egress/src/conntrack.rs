//! Conntrack over ctnetlink: list the tracked flows, delete one. This is
//! how an apply or refresh that narrows a profile revokes the flows it no
//! longer allows (established packets are accepted before any address
//! rule, so a flow outlives a rule that no longer lets it start).
//!
//! Messages are the maintained `netlink-packet-netfilter` types; the socket
//! is a plain `NETLINK_NETFILTER` socket in the current thread's network
//! namespace (run it inside [`crate::netns::Netns::run`] to act on another
//! one). No `conntrack` binary is involved.

use std::io;
use std::net::IpAddr;

use netlink_packet_core::{
    NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_netfilter::conntrack::{
    ConntrackAttribute, ConntrackMessage, IPTuple, ProtoTuple, Tuple,
};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_NETFILTER};

use crate::plan::eval::Flow;

/// A conntrack operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ConntrackError {
    /// The socket could not be opened or used.
    #[error(
        "conntrack netlink socket failed: {0}; corral needs root (CAP_NET_ADMIN) and nf_conntrack"
    )]
    Socket(#[source] io::Error),
    /// The kernel answered with an error.
    #[error("the kernel refused to {what}: {source}")]
    Kernel {
        /// What was asked.
        what: String,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
    /// An answer could not be decoded.
    #[error("cannot decode a ctnetlink message: {0}")]
    Decode(String),
}

/// One tracked flow: its original tuple (as the kernel sent it, to name
/// the entry when deleting it) and that tuple as a [`Flow`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Address family of the entry.
    pub v6: bool,
    /// The original direction.
    pub flow: Flow,
    /// Source port of the original direction, when it has one.
    pub sport: Option<u16>,
    tuple: Vec<Tuple>,
}

fn family(v6: bool) -> NetfilterProtoFamily {
    if v6 {
        NetfilterProtoFamily::IPv6
    } else {
        NetfilterProtoFamily::IPv4
    }
}

fn entry(v6: bool, attrs: &[ConntrackAttribute]) -> Option<Entry> {
    let tuple = attrs.iter().find_map(|a| match a {
        ConntrackAttribute::CtaTupleOrig(t) => Some(t.clone()),
        _ => None,
    })?;
    let (mut src, mut dst, mut proto, mut sport, mut dport) = (None, None, None, None, None);
    for t in &tuple {
        match t {
            Tuple::Ip(ips) => {
                for ip in ips {
                    match ip {
                        IPTuple::SourceAddress(a) => src = Some(*a),
                        IPTuple::DestinationAddress(a) => dst = Some(*a),
                        _ => {}
                    }
                }
            }
            Tuple::Proto(ps) => {
                for p in ps {
                    match p {
                        ProtoTuple::Protocol(p) => proto = Some(u8::from(*p)),
                        ProtoTuple::SourcePort(port) => sport = Some(*port),
                        ProtoTuple::DestinationPort(port) => dport = Some(*port),
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let (src, dst): (IpAddr, IpAddr) = (src?, dst?);
    Some(Entry {
        v6,
        flow: Flow {
            protocol: proto?,
            src,
            dst,
            dport,
        },
        sport,
        tuple,
    })
}

/// A socket for conntrack requests in the current network namespace.
#[derive(Debug)]
pub struct Conntrack {
    socket: Socket,
    seq: u32,
}

impl Conntrack {
    /// Opens the socket.
    pub fn open() -> Result<Self, ConntrackError> {
        let mut socket = Socket::new(NETLINK_NETFILTER).map_err(ConntrackError::Socket)?;
        socket.bind_auto().map_err(ConntrackError::Socket)?;
        socket
            .connect(&SocketAddr::new(0, 0))
            .map_err(ConntrackError::Socket)?;
        Ok(Self { socket, seq: 0 })
    }

    fn send(&mut self, flags: u16, v6: bool, msg: ConntrackMessage) -> Result<u32, ConntrackError> {
        self.seq = self.seq.wrapping_add(1);
        let mut hdr = NetlinkHeader::default();
        hdr.flags = flags;
        hdr.sequence_number = self.seq;
        let mut packet = NetlinkMessage::new(
            hdr,
            NetlinkPayload::from(NetfilterMessage::new(
                NetfilterHeader::new(family(v6), 0, 0),
                msg,
            )),
        );
        packet.finalize();
        let mut buf = vec![0u8; packet.buffer_len()];
        packet.serialize(&mut buf);
        self.socket.send(&buf, 0).map_err(ConntrackError::Socket)?;
        Ok(self.seq)
    }

    /// Reads answers to `seq` until the dump is done or the ack arrives;
    /// hands every conntrack message to `each`.
    fn answers(
        &mut self,
        seq: u32,
        what: &str,
        mut each: impl FnMut(&[ConntrackAttribute]),
    ) -> Result<(), ConntrackError> {
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = self
                .socket
                .recv(&mut &mut buf[..], 0)
                .map_err(ConntrackError::Socket)?;
            let mut off = 0;
            while off < n {
                let msg = NetlinkMessage::<NetfilterMessage>::deserialize(&buf[off..n])
                    .map_err(|e| ConntrackError::Decode(e.to_string()))?;
                let len = msg.header.length as usize;
                if len == 0 {
                    return Err(ConntrackError::Decode("zero-length message".to_owned()));
                }
                off += len.next_multiple_of(4);
                if msg.header.sequence_number != seq {
                    continue;
                }
                match msg.payload {
                    NetlinkPayload::Done(_) => return Ok(()),
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(()),
                            Some(code) => Err(ConntrackError::Kernel {
                                what: what.to_owned(),
                                source: io::Error::from_raw_os_error(-code.get()),
                            }),
                        };
                    }
                    NetlinkPayload::InnerMessage(NetfilterMessage {
                        inner: NetfilterMessageInner::Conntrack(ConntrackMessage::New(attrs)),
                        ..
                    }) => each(&attrs),
                    _ => {}
                }
            }
        }
    }

    /// Every tracked IPv4 and IPv6 flow.
    pub fn list(&mut self) -> Result<Vec<Entry>, ConntrackError> {
        let mut out = Vec::new();
        for v6 in [false, true] {
            let seq = self.send(
                NLM_F_REQUEST | NLM_F_DUMP,
                v6,
                ConntrackMessage::Get(Vec::new()),
            )?;
            self.answers(seq, "list conntrack entries", |attrs| {
                out.extend(entry(v6, attrs));
            })?;
        }
        Ok(out)
    }

    /// Deletes the entry of `e`. An entry that is already gone (it expired
    /// or was closed meanwhile) is not an error.
    pub fn delete(&mut self, e: &Entry) -> Result<(), ConntrackError> {
        let seq = self.send(
            NLM_F_REQUEST | NLM_F_ACK,
            e.v6,
            ConntrackMessage::Delete(vec![ConntrackAttribute::CtaTupleOrig(e.tuple.clone())]),
        )?;
        match self.answers(seq, "delete a conntrack entry", |_| {}) {
            Err(ConntrackError::Kernel { source, .. })
                if source.raw_os_error() == Some(libc::ENOENT) =>
            {
                Ok(())
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// Against the kernel: a loopback TCP connection is listed with its
    /// tuple, and after deleting its entry it is no longer listed. A
    /// conntrack entry exists only once a ct expression is in use, so an
    /// nft table with one is loaded first (corral's own apply, from a plan
    /// with one profile).
    #[test]
    fn a_listed_entry_is_deleted_by_its_tuple() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let ns = crate::netns::Netns::new().unwrap();
        ns.run(|| {
            crate::nft::apply(&crate::plan::test_support::sample_plan()).unwrap();
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = l.local_addr().unwrap().port();
            let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let (mut s, _) = l.accept().unwrap();
            c.write_all(b"x").unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            let mut ct = Conntrack::open().unwrap();
            let find = |ct: &mut Conntrack| {
                ct.list()
                    .unwrap()
                    .into_iter()
                    .find(|e| e.flow.protocol == 6 && e.flow.dport == Some(port))
            };
            let e = find(&mut ct).expect("the loopback flow is tracked");
            assert_eq!(e.flow.dst, "127.0.0.1".parse::<IpAddr>().unwrap());
            assert!(e.sport.is_some() && !e.v6);
            ct.delete(&e).unwrap();
            assert_eq!(find(&mut ct), None);
            // Deleting again is not an error.
            ct.delete(&e).unwrap();
        })
        .unwrap();
    }
}
