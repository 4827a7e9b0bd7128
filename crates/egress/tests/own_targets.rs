//! corral's own canary targets, real packets in a namespace lab: before
//! corral's rules every sandbox reaches them (the control), after them
//! `isolated` and `allowlist` do not while `internet` does (v4 and v6),
//! no profile's DNS query reaches the target's port 53,
//! the host's own connect reaches them throughout, a second `ensure`
//! keeps them, and `remove` takes the link, its routes and the pin away.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, SocketAddr, SocketAddrV6, TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

mod nft_support;

use corral_egress::link::Links;
use corral_egress::netns::Netns;
use corral_egress::own_targets::{self, VETH};
use corral_sandbox_core::verify::{OWN_TARGET_V4, OWN_TARGET_V6};
use nft_support::builtin_lab;

const WAIT: Duration = Duration::from_millis(1500);

/// A TCP connect from `ns`: true when the handshake completed.
fn connects(ns: &Netns, to: SocketAddr) -> bool {
    ns.run(move || TcpStream::connect_timeout(&to, WAIT).is_ok())
        .unwrap()
}

/// One UDP datagram from `ns`: true when the target's port unreachable
/// (or an answer) came back, which is what the canary counts as arrived.
fn udp_arrives(ns: &Netns, to: SocketAddr) -> bool {
    ns.run(move || {
        let sock = UdpSocket::bind(SocketAddr::new(
            IpAddr::from(std::net::Ipv4Addr::UNSPECIFIED),
            0,
        ))
        .unwrap();
        sock.connect(to).unwrap();
        sock.set_read_timeout(Some(WAIT)).unwrap();
        sock.send(b"corral").unwrap();
        let mut buf = [0u8; 16];
        match sock.recv(&mut buf) {
            Ok(_) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionRefused,
        }
    })
    .unwrap()
}

fn has_veth(ns: &Netns) -> bool {
    ns.run_async(|| async { Links::connect().unwrap().get(VETH).await.unwrap().is_some() })
        .unwrap()
}

/// Unpins the targets if the test fails before it removes them (the
/// lab's namespace takes the veth with it; the bind mount would stay).
struct Unpin<'a>(&'a Netns, &'a std::path::Path);

impl Drop for Unpin<'_> {
    fn drop(&mut self) {
        let _ = own_targets::remove(self.0, self.1);
    }
}

#[test]
fn own_targets_are_blocked_or_reached_per_profile_and_removed_whole() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = builtin_lab();
    let host = &lab.topo.host;
    let state = tempfile::tempdir().unwrap();
    let _unpin = Unpin(host, state.path());
    own_targets::ensure(host, state.path()).unwrap();
    assert!(has_veth(host));
    assert!(own_targets::pin_path(state.path()).exists());

    // Listeners as a canary run opens them: in the pinned namespace.
    let targets = own_targets::open(state.path()).unwrap();
    let (_l4, a4, _l6, a6) = targets
        .run(|| {
            let l4 = TcpListener::bind(SocketAddr::new(IpAddr::V4(OWN_TARGET_V4), 0)).unwrap();
            let l6 = TcpListener::bind(SocketAddr::V6(SocketAddrV6::new(OWN_TARGET_V6, 0, 0, 0)))
                .unwrap();
            let (a4, a6) = (l4.local_addr().unwrap(), l6.local_addr().unwrap());
            (l4, a4, l6, a6)
        })
        .unwrap();
    let dns = SocketAddr::new(IpAddr::V4(OWN_TARGET_V4), 53);
    let iso = &lab.sandbox("isolated").ns;
    let net = &lab.sandbox("internet").ns;
    let allow = &lab.sandbox("allowlist").ns;

    // Control: without corral's rules every sandbox reaches the target
    // (the internet sandbox over IPv6 too), and so does the host.
    for (name, ns) in [("isolated", iso), ("internet", net), ("allowlist", allow)] {
        assert!(connects(ns, a4), "control {name} → {a4}");
        assert!(udp_arrives(ns, dns), "control {name} → udp {dns}");
        assert!(udp_arrives(ns, a4), "control {name} → udp {a4}");
    }
    assert!(connects(net, a6), "control internet → {a6}");
    assert!(connects(host, a4) && connects(host, a6), "host control");

    // corral's rules: blocked where public destinations are, reached on internet.
    lab.apply().unwrap();
    for (name, ns) in [("isolated", iso), ("allowlist", allow)] {
        assert!(
            !connects(ns, a4),
            "{name} reached {a4} through corral's rules"
        );
    }
    // A foreign resolver is blocked on every profile, internet included.
    for (name, ns) in [("isolated", iso), ("internet", net), ("allowlist", allow)] {
        assert!(!udp_arrives(ns, dns), "{name}'s query reached {dns}");
    }
    assert!(connects(net, a4), "internet must reach {a4}");
    assert!(connects(net, a6), "internet must reach {a6}");
    assert!(udp_arrives(net, a4), "internet must reach udp {a4}");
    // The host's own traffic (every check's control) is not corral's to filter.
    assert!(connects(host, a4) && connects(host, a6), "host after apply");

    // A second ensure keeps what is there: the listeners still answer.
    own_targets::ensure(host, state.path()).unwrap();
    assert!(connects(host, a4), "after a second ensure");

    // Removed whole: the link (and its connected routes) and the pin.
    assert!(own_targets::remove(host, state.path()).unwrap());
    assert!(!has_veth(host));
    assert!(!own_targets::pin_path(state.path()).exists());
    assert!(!connects(host, a4), "the target outlived its removal");
    assert!(
        !own_targets::remove(host, state.path()).unwrap(),
        "nothing left"
    );
}
