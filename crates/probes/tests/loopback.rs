//! The probes against listeners this test makes on the host's loopback
//! (nothing leaves the machine). Each verdict has its control: the same
//! probe to an open port connects, to a port just closed is rejected.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::thread;
use std::time::Duration;

use corral_probes::{Observed, Probe, run};

const T: Duration = Duration::from_millis(500);

fn tcp_echo() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap();
    thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut buf = [0u8; 64];
            if let Ok(n) = s.read(&mut buf) {
                let _ = s.write_all(&buf[..n]);
            }
        }
    });
    at
}

fn udp_echo() -> SocketAddr {
    let u = UdpSocket::bind("127.0.0.1:0").unwrap();
    let at = u.local_addr().unwrap();
    thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok((n, from)) = u.recv_from(&mut buf) {
            let _ = u.send_to(&buf[..n], from);
        }
    });
    at
}

/// A TCP and a UDP port nobody listens on (bound, then released).
fn closed() -> (SocketAddr, SocketAddr) {
    let t = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let u = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    (t, u)
}

#[test]
fn tcp_and_udp_echo_connect_and_closed_ports_are_rejected() {
    let (tcp_closed, udp_closed) = closed();
    let open_tcp = run(&Probe::Tcp { to: tcp_echo() }, T);
    let open_udp = run(&Probe::Udp { to: udp_echo() }, T);
    assert_eq!(open_tcp.observed, Observed::Connected, "{open_tcp:?}");
    assert_eq!(open_udp.observed, Observed::Connected, "{open_udp:?}");
    let shut_tcp = run(&Probe::Tcp { to: tcp_closed }, T);
    let shut_udp = run(&Probe::Udp { to: udp_closed }, T);
    assert!(
        matches!(shut_tcp.observed, Observed::Rejected(_)),
        "{shut_tcp:?}"
    );
    assert!(
        matches!(shut_udp.observed, Observed::Rejected(_)),
        "{shut_udp:?}"
    );
    assert!(shut_tcp.observed.blocked() && !shut_tcp.observed.reached());
}

/// A TCP peer that accepts but never echoes: the connect succeeds, the
/// round trip times out, and the probe says so rather than "connected".
#[test]
fn tcp_without_echo_times_out() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let at = l.local_addr().unwrap();
    let r = run(&Probe::Tcp { to: at }, Duration::from_millis(200));
    assert_eq!(r.observed, Observed::TimedOut, "{r:?}");
    drop(l);
}

#[test]
fn icmp_echo_to_loopback_is_answered() {
    if !corral_test_support::gate::root() {
        return;
    }
    let r = run(
        &Probe::Icmp {
            to: IpAddr::V4(Ipv4Addr::LOCALHOST),
        },
        T,
    );
    assert_eq!(r.observed, Observed::Connected, "{r:?}");
}
