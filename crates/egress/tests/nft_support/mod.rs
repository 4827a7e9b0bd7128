//! Shared helpers of the `nft_*` integration tests: a fresh anonymous
//! network namespace per test, loopback up, and small profile sets.
#![allow(dead_code)]
// Test helpers: a failed setup step should abort the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use corral_egress::plan::{HostPlan, PlanSettings, Resolution};
use corral_sandbox_core::{
    AllowEntry, AllowTarget, BlockAction, BridgeName, DnsPolicy, EgressMode, Profile, ProfileName,
    ProfileSet,
};

/// Run `f` in a new network namespace on a throwaway thread. `None` (after
/// saying why) when namespaces are unavailable and `CI` is not `true`;
/// panics when `CI` is `true`.
pub fn in_netns<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let joined = std::thread::spawn(move || {
        // SAFETY: unshare affects only this throwaway thread.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(f())
    })
    .join();
    match joined {
        Ok(Ok(v)) => Some(v),
        Ok(Err(e)) => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("CI=true but a network namespace cannot be created: {e}");
            }
            eprintln!("skipped: cannot create a network namespace ({e}); run as root");
            None
        }
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Bring `lo` up in the current namespace (ioctl, no `ip` binary).
pub fn loopback_up() {
    // SAFETY: plain socket + ioctl on a zeroed ifreq naming "lo".
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let mut req: libc::ifreq = std::mem::zeroed();
        for (i, b) in b"lo".iter().enumerate() {
            req.ifr_name[i] = *b as libc::c_char;
        }
        assert_eq!(libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req), 0);
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        assert_eq!(libc::ioctl(fd, libc::SIOCSIFFLAGS, &mut req), 0);
        libc::close(fd);
    }
}

pub fn profile(
    name: &str,
    bridge: &str,
    subnet: &str,
    mode: EgressMode,
    allow: &[&str],
) -> Profile {
    Profile {
        name: ProfileName::new(name).unwrap(),
        bridge: BridgeName::new(bridge).unwrap(),
        subnet_v4: subnet.parse().unwrap(),
        subnet_v6: None,
        mode,
        allow: allow
            .iter()
            .map(|a| a.parse::<AllowEntry>().unwrap())
            .collect(),
        block: BlockAction::Reject,
        dns: DnsPolicy::Gateway,
        allow_unresolved: false,
    }
}

/// Allowlist (v4+v6, host + wildcard + CIDR entries), internet and none
/// profiles, with a resolution for the host entry.
pub fn sample_plan(api_addrs: &[&str]) -> HostPlan {
    let mut dev = profile(
        "dev",
        "cb-dev",
        "10.90.0.0/24",
        EgressMode::Allowlist,
        &[
            "api.example.com:443/tcp",
            "*.example.org",
            "203.0.113.0/24",
            "198.51.100.7:8000-8100",
            "[2001:db8::1]:443/udp",
        ],
    );
    dev.subnet_v6 = Some("fd00:90::/64".parse().unwrap());
    // Prefixes that end inside a byte, to exercise masked address matches.
    let mut web = profile("web", "cb-web", "10.91.0.0/22", EgressMode::Internet, &[]);
    web.subnet_v6 = Some("fd00:91::/64".parse().unwrap());
    let mut iso = profile("iso", "cb-iso", "10.92.0.0/23", EgressMode::None, &[]);
    iso.block = BlockAction::Drop;
    let set = ProfileSet::new(vec![dev, web, iso]).unwrap();
    let mut res = Resolution::new();
    res.insert(
        &"api.example.com".parse().unwrap(),
        api_addrs.iter().map(|a| a.parse().unwrap()),
    );
    HostPlan::build(&set, &PlanSettings::default(), &res).unwrap()
}

/// One allowlist profile with `n` distinct, non-adjacent /32s.
pub fn allowlist_plan(n: u32) -> HostPlan {
    let mut p = profile("big", "cb-big", "10.93.0.0/24", EgressMode::Allowlist, &[]);
    p.allow = (0..n)
        .map(|i| AllowEntry {
            target: AllowTarget::Net(
                std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x2c00_0000u32 + 2 * i)).into(),
            ),
            ports: None,
            protocol: None,
        })
        .collect();
    let set = ProfileSet::new(vec![p]).unwrap();
    HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap()
}

/// Run the `nft` binary (test baseline only; the product never does).
pub fn nft(args: &[&str]) -> std::process::Output {
    std::process::Command::new("nft")
        .args(args)
        .output()
        .expect("the nft binary (apt package nftables) is needed by this test")
}
