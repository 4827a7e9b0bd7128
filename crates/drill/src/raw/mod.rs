//! The attacker's toolkit: raw Ethernet frames built in Rust and sent from
//! inside a simulated sandbox, as an agent with root could, and captures
//! that tell whether a frame got somewhere.
//!
//! - [`frame`]: frames with any source, destination, tags and payload
//!   (Ethernet II, 802.1Q single and double tags, ARP, IPv4/IPv6 with
//!   UDP, TCP, ICMP/ICMPv6 and raw ethertypes), built with `etherparse`.
//! - [`PacketSocket`]: an `AF_PACKET` socket bound to one interface of one
//!   namespace; [`PacketSocket::send`] puts a frame on the wire as is, with
//!   no route, no source check and no netfilter on the sending side.
//! - [`dhcp`]: DHCP DISCOVER/REQUEST with any client hardware address, in
//!   frames from any MAC; replies parsed; a whole lease exchange, timed.
//! - [`fragment`]: a frame's IP datagram cut into two fragments.
//! - [`nd`]: IPv6 neighbour and router advertisements and solicitations
//!   with any target, link-layer option or prefix.
//! - [`neigh`]: the victim's view (a namespace's neighbour table, a
//!   bridge's forwarding database) read over rtnetlink, to prove poisoning.
//! - [`Capture`]: a socket opened *before* an attack on the interface where
//!   the frame would arrive; [`Capture::saw`] answers whether a frame
//!   carrying the attack's [`Marker`] arrived there. A frame seen on the
//!   far side of the host proves it crossed the host; for delivery to a
//!   local socket, use a listener instead (a packet socket sees a frame
//!   before netfilter's input hooks judge it).
//!
//! Every attack carries a fresh [`Marker`] in its payload, so a capture
//! never mistakes another test's or an earlier attempt's frame for it.

pub mod dhcp;
pub mod fragment;
pub mod frame;
mod marker;
pub mod nd;
pub mod neigh;
mod socket;

pub use marker::Marker;
pub use socket::{Capture, Direction, PacketSocket, Received};
