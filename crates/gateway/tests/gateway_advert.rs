//! The gateway's router advertisement sent out of one sandbox's port
//! (`corral_gateway::advert`), with a real dnsmasq on the profile's bridge
//! under corral's rules and the port's binding:
//!
//! - it is the advertisement dnsmasq itself sends there, byte for byte;
//! - sent while the sandbox's link comes up, it gives the sandbox its
//!   bound SLAAC address while the link-local address is still tentative,
//!   where the kernel's own path (the control: the same link coming up
//!   without it) gets the address only after that address's detection.
//!
//! No sibling gets it by construction: a packet socket's frame is sent
//! out of the one interface it names, never through the bridge.
//!
//! The link is brought up as LXC brings a container's up: detection on,
//! then `accept_dad=0` once it is up (what corral's Incus provider asks
//! for), which spares the SLAAC address but not the link-local one.

// Test helpers outside #[test] fns unwrap too: a failed setup is a failed test.
#![allow(clippy::unwrap_used)]

mod gateway_lab;

use corral_drill::lab::topology::SandboxNs;
use corral_egress::link::Links;
use corral_egress::netns::Netns;
use corral_gateway::advert::{Advertisement, Router};
use corral_sandbox_core::EgressMode;
use gateway_lab::{Env, env, profile};
use ipnet::{IpNet, Ipv6Net};
use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// How long a global address may take (the kernel's own path: a random
/// delay of up to a second, a second of detection, then the exchange).
const WAIT: Duration = Duration::from_secs(6);
/// How often the advertisement is sent again while no global address came
/// (one sent before the sandbox's link is up is lost).
const AGAIN: Duration = Duration::from_millis(50);

/// An IPv6 address of `eth0`, from the calling thread's namespace.
#[derive(Debug, Clone, Copy)]
struct Addr {
    ip: Ipv6Addr,
    link_local: bool,
    tentative: bool,
}

/// `eth0`'s IPv6 addresses, as the kernel lists them for the calling
/// thread's namespace (`thread-self`: `/proc/self` would be the main
/// thread's, in the host's namespace).
fn eth0_addrs() -> Vec<Addr> {
    const IFA_F_TENTATIVE: u32 = 0x40;
    let text = std::fs::read_to_string("/proc/thread-self/net/if_inet6").unwrap();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 6 || f[5] != "eth0" {
                return None;
            }
            Some(Addr {
                ip: Ipv6Addr::from(u128::from_str_radix(f[0], 16).ok()?),
                link_local: u32::from_str_radix(f[3], 16).ok()? == 0x20,
                tentative: u32::from_str_radix(f[4], 16).ok()? & IFA_F_TENTATIVE != 0,
            })
        })
        .collect()
}

fn sysctl(key: &str, value: &str) {
    std::fs::write(format!("/proc/sys/net/ipv6/conf/eth0/{key}"), value).unwrap();
}

fn internet_v6() -> corral_sandbox_core::Profile {
    let mut p = profile("web", "cb-web", "10.99.8.0/24", EgressMode::Internet, &[]);
    p.subnet_v6 = Some("fd00:99:8::/64".parse().unwrap());
    p
}

/// The advertisement corral sends for `sb`'s profile, read off the lab's
/// bridge.
fn advertisement(env: &Env, sb: &SandboxNs) -> Advertisement {
    let p = env.profiles.get(sb.profile.as_str()).unwrap();
    let router = env
        .topo
        .host
        .run_async(|| Router::of_bridge(&sb.bridge))
        .unwrap()
        .unwrap();
    Advertisement {
        router,
        prefix: p.subnet_v6.unwrap(),
        dns: corral_gateway::serves_dns(p).then(|| p.gateway_v6().unwrap()),
    }
}

/// A packet socket on `port` in the host namespace seeing what the host
/// sends out of it.
struct Tap(OwnedFd);

impl Tap {
    fn open(host: &Netns, port: &str) -> Tap {
        host.run(|| {
            // SAFETY: plain socket calls on a descriptor owned at once;
            // every pointer is to a live local of the right size.
            unsafe {
                let raw = libc::socket(
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                    i32::from(3u16.to_be()),
                );
                assert!(raw >= 0, "{}", std::io::Error::last_os_error());
                let fd = OwnedFd::from_raw_fd(raw);
                let name = std::ffi::CString::new(port).unwrap();
                let mut at: libc::sockaddr_ll = std::mem::zeroed();
                at.sll_family = libc::AF_PACKET as u16;
                at.sll_protocol = 3u16.to_be();
                at.sll_ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
                let rc = libc::bind(
                    fd.as_raw_fd(),
                    (&raw const at).cast(),
                    size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                );
                assert_eq!(rc, 0, "{}", std::io::Error::last_os_error());
                Tap(fd)
            }
        })
        .unwrap()
    }

    /// The first router advertisement seen within `wait`: (IPv6
    /// destination, ICMPv6 message).
    fn advertisement(&self, wait: Duration) -> Option<(Ipv6Addr, Vec<u8>)> {
        let start = Instant::now();
        let mut buf = [0u8; 2048];
        while start.elapsed() < wait {
            // SAFETY: reads into `buf`, alive and as long as given.
            let n =
                unsafe { libc::recv(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n <= 0 {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            let f = &buf[..n as usize];
            if f.len() > 54 && f[12..14] == [0x86, 0xdd] && f[20] == 58 && f[54] == 134 {
                let mut dst = [0u8; 16];
                dst.copy_from_slice(&f[38..54]);
                return Some((Ipv6Addr::from(dst), f[54..].to_vec()));
            }
        }
        None
    }
}

/// A router solicitation from `ns`'s eth0, the kernel's way (from its
/// link-local address, through an ICMPv6 socket).
fn solicit(ns: &Netns) {
    ns.run(|| {
        // SAFETY: plain socket calls on a descriptor owned at once; every
        // pointer is to a live local of the right size.
        unsafe {
            let raw = libc::socket(
                libc::AF_INET6,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::IPPROTO_ICMPV6,
            );
            assert!(raw >= 0);
            let fd = OwnedFd::from_raw_fd(raw);
            let hops: libc::c_int = 255;
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_IPV6,
                libc::IPV6_MULTICAST_HOPS,
                (&raw const hops).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            );
            let mut to: libc::sockaddr_in6 = std::mem::zeroed();
            to.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            to.sin6_addr.s6_addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2).octets();
            to.sin6_scope_id = libc::if_nametoindex(c"eth0".as_ptr());
            let rs = [133u8, 0, 0, 0, 0, 0, 0, 0];
            let sent = libc::sendto(
                fd.as_raw_fd(),
                rs.as_ptr().cast(),
                rs.len(),
                0,
                (&raw const to).cast(),
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            );
            assert!(sent > 0, "{}", std::io::Error::last_os_error());
        }
    })
    .unwrap();
}

/// Takes `sb`'s eth0 down with its bound address removed, brings it up as
/// LXC does and, with `advert`, sends it out of the port until a global
/// address came. Returns whether the link-local address was still
/// tentative then, the address, and how long it took.
fn relink(env: &Env, sb: &SandboxNs, advert: Option<&Advertisement>) -> (bool, Ipv6Addr, Duration) {
    let bound = IpNet::V6(Ipv6Net::new(sb.v6.unwrap(), 64).unwrap());
    sb.ns
        .run_async(|| async {
            let links = Links::connect().unwrap();
            let _ = links.delete_address("eth0", bound).await;
            links.set_down("eth0").await.unwrap();
        })
        .unwrap();
    sb.ns
        .run(|| {
            sysctl("accept_dad", "1");
            sysctl("accept_ra", "1");
        })
        .unwrap();
    let start = Instant::now();
    sb.ns
        .run_async(|| async { Links::connect().unwrap().set_up("eth0").await.unwrap() })
        .unwrap();
    sb.ns.run(|| sysctl("accept_dad", "0")).unwrap();
    let mut sent_at: Option<Instant> = None;
    loop {
        let addrs = sb.ns.run(eth0_addrs).unwrap();
        if let Some(g) = addrs.iter().find(|a| !a.link_local && !a.tentative) {
            let ll_tentative = addrs.iter().any(|a| a.link_local && a.tentative);
            return (ll_tentative, g.ip, start.elapsed());
        }
        assert!(
            start.elapsed() < WAIT,
            "no global address within {WAIT:?}: {addrs:?}"
        );
        if let Some(a) = advert
            && sent_at.is_none_or(|t| t.elapsed() >= AGAIN)
        {
            env.topo
                .host
                .run(|| a.send_on_port(&sb.port, sb.mac.octets()))
                .unwrap()
                .unwrap();
            sent_at = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn corrals_advertisement_is_the_gateways_own() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let env = env(vec![internet_v6()], corral_gateway::DnsTiming::default());
    let sb = env.topo.sandbox("web").unwrap();
    let ours = advertisement(&env, sb);
    let tap = Tap::open(&env.topo.host, &sb.port);
    // The sandbox's link-local address is valid here: dnsmasq answers its
    // solicitation to that address.
    let mut seen = None;
    for _ in 0..5 {
        solicit(&sb.ns);
        seen = tap.advertisement(Duration::from_millis(500));
        if seen.is_some() {
            break;
        }
    }
    let (dst, theirs) = seen.expect("dnsmasq answered no solicitation");
    println!("dnsmasq's advertisement to {dst}: {theirs:02x?}");
    assert_eq!(ours.icmp(dst), theirs, "ours for the same destination");
}

#[test]
fn the_advertisement_brings_the_address_before_link_local_detection_ends() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let env = env(vec![internet_v6()], corral_gateway::DnsTiming::default());
    let sb = env.topo.sandbox("web").unwrap();
    let ours = advertisement(&env, sb);

    // Control: the kernel's own path, tried up to three times (dnsmasq's
    // unsolicited advertisements, every few seconds after its start, can
    // land inside the detection window by chance).
    let mut runs = Vec::new();
    let (early, addr, took) = loop {
        let r = relink(&env, sb, None);
        runs.push(r);
        if !r.0 {
            break r;
        }
        assert!(
            runs.len() < 3,
            "control: every run got its address during detection: {runs:?}"
        );
    };
    println!("control: {addr} after {took:?}, link-local tentative then: {early}");
    assert_eq!(
        Some(addr),
        sb.v6,
        "control: the SLAAC address is the bound one"
    );

    let (early, addr, took) = relink(&env, sb, Some(&ours));
    println!("advertised: {addr} after {took:?}, link-local tentative then: {early}");
    assert!(
        early,
        "the address came only after the link-local address's detection ({took:?})"
    );
    assert_eq!(Some(addr), sb.v6, "the SLAAC address is the bound one");
}
