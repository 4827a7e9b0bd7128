//! Packet probes: a TCP connect and one echo round trip, one UDP datagram
//! and its echo, one ICMP (or ICMPv6) echo.
//!
//! A probe runs on the calling thread, so it sees that thread's network
//! namespace (the drill runs it on a thread inside a lab namespace, the
//! canary inside the sandbox's), and is classified by what the kernel
//! said: the peer answered ([`Observed::Connected`]), something refused
//! quickly (a TCP reset or an ICMP unreachable: [`Observed::Rejected`]),
//! nothing came back before the timeout ([`Observed::TimedOut`], i.e.
//! dropped), or the probe itself failed ([`Observed::Error`]).
//!
//! The canary and the drill both call [`run`], so "did this packet get
//! through" has one implementation, and the product does not depend on the
//! drill's lab to ask it.

pub mod arp_tap;
mod icmp;
mod probe;
mod transport;

pub use icmp::echo_until;
pub use probe::{Observed, Probe, ProbeResult, classify, run};
pub use transport::Transport;
