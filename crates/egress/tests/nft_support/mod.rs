//! Shared helpers of the `nft_*` and `enforce_*` integration tests: a fresh
//! anonymous network namespace per test, loopback up, small profile sets
//! (the builders of the crate's unit tests, feature `test-support`), and
//! the built-in-profiles packet lab.
#![allow(dead_code)]
// Test helpers: a failed setup step should abort the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use corral_drill::lab::{Lab, Observed, Probe, ProbeResult};
use corral_egress::plan::{HostPlan, PlanSettings, Resolution};
use corral_sandbox_core::config::Config;
use corral_sandbox_core::{BlockAction, EgressMode, ProfileSet};

// The crate's own unit-test builders (feature `test-support`).
#[allow(unused_imports)]
pub use corral_egress::plan::test_support::{allowlist_plan, api_resolution, dev_profile, profile};

/// Run `f` in a new network namespace on a throwaway thread. `None` (a
/// counted skip) when namespaces are unavailable; under a truthy `CI` it
/// fails instead (`corral_test_support::gate`).
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
            corral_test_support::skip(format!(
                "cannot create a network namespace ({e}); run as root"
            ));
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

/// The profiles of [`sample_plan`].
pub fn sample_profiles() -> ProfileSet {
    // Prefixes that end inside a byte, to exercise masked address matches.
    let mut web = profile("web", "cb-web", "10.91.0.0/22", EgressMode::Internet, &[]);
    web.subnet_v6 = Some("fd00:91::/64".parse().unwrap());
    let mut iso = profile("iso", "cb-iso", "10.92.0.0/23", EgressMode::None, &[]);
    iso.block = BlockAction::Drop;
    ProfileSet::new(vec![dev_profile(), web, iso]).unwrap()
}

/// Allowlist (v4+v6, host + wildcard + CIDR entries), internet and none
/// profiles, with a resolution of the host entry to `api_addrs`.
pub fn sample_plan(api_addrs: &[&str]) -> HostPlan {
    let set = sample_profiles();
    HostPlan::build(&set, &PlanSettings::default(), &api_resolution(api_addrs)).unwrap()
}

/// Run the `nft` binary (test baseline only; the product never does).
pub fn nft(args: &[&str]) -> std::process::Output {
    std::process::Command::new("nft")
        .args(args)
        .output()
        .expect("the nft binary (apt package nftables) is needed by this test")
}

/// How long a packet probe of the `enforce_*` tests waits for an answer.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(1500);

/// A lab of corral's built-in profiles whose control probes (no rules
/// applied yet) all passed.
pub fn builtin_lab() -> Lab {
    let cfg = Config::builtin_default();
    let lab = Lab::new(&cfg.profiles, &Resolution::new()).unwrap();
    lab.control().unwrap();
    lab
}

/// Runs `probes` from the sandbox `sandbox` as a control (each must
/// connect), applies corral's rules, and returns the enforced results.
pub fn control_then_apply(lab: &Lab, sandbox: &str, probes: &[Probe]) -> Vec<ProbeResult> {
    let sb = lab.sandbox(sandbox);
    for p in probes {
        let r = lab.probe(sb, p, PROBE_TIMEOUT);
        assert_eq!(r.observed, Observed::Connected, "control {p}: {r:?}");
    }
    lab.apply().unwrap();
    probes
        .iter()
        .map(|p| lab.probe(sb, p, PROBE_TIMEOUT))
        .collect()
}

/// Runs `attacks` as a control (each must get through without corral's
/// rules: a control that fails is a test failure, never a pass), applies
/// corral's rules, and returns what each attack achieved then.
pub fn attack_control_then_apply(
    lab: &Lab,
    attacks: &[corral_drill::attack::l3::Attack],
) -> Vec<Observed> {
    use corral_drill::attack::l3::launch;
    for a in attacks {
        let r = launch(&lab.topo, a, PROBE_TIMEOUT);
        assert_eq!(
            r,
            Observed::Connected,
            "control of {} `{}` ({}): without corral's rules it must get through",
            a.class.label(),
            a.what,
            a.target()
        );
    }
    lab.apply().unwrap();
    attacks
        .iter()
        .map(|a| launch(&lab.topo, a, PROBE_TIMEOUT))
        .collect()
}

/// The built-in profiles' attacks of one class.
pub fn attacks_of(
    lab: &Lab,
    class: corral_drill::attack::l3::Class,
) -> Vec<corral_drill::attack::l3::Attack> {
    let all = corral_drill::attack::l3::derive(&lab.profiles, &lab.topo);
    let mine: Vec<_> = all.into_iter().filter(|a| a.class == class).collect();
    assert!(
        !mine.is_empty(),
        "no {} attack for these profiles",
        class.label()
    );
    mine
}

/// Runs the `nft` binary inside `ns` (test-only: an operator or another
/// tool acting behind corral's back; corral itself never does).
pub fn nft_in(ns: &corral_egress::netns::Netns, args: &[&str]) -> String {
    let mut cmd = std::process::Command::new("nft");
    cmd.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = ns
        .spawn(cmd)
        .and_then(|c| c.wait_with_output())
        .unwrap_or_else(|e| panic!("cannot run nft {args:?}: {e}"));
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
