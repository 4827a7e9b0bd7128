//! corral's own canary targets: a small network namespace reached from
//! the host through a veth pair, on documentation addresses (RFC 5737,
//! RFC 3849) that route nowhere outside this machine.
//!
//! ```text
//!  sandboxes ── bridge ── host ── corral-canary ──── eth0 (pinned netns)
//!                                 198.51.100.252/30   198.51.100.253/30
//!                                 2001:db8:ca7::1/64  2001:db8:ca7::2/64
//! ```
//!
//! A sandbox's probe to `198.51.100.253` crosses the host's forward chain
//! exactly as a probe to a public address would (the destination is not
//! the host's own, so it is routed, not delivered locally): a profile that
//! blocks public destinations blocks it, `internet` reaches it. The host's
//! own connect to the same address (the control) leaves through the
//! output path, which corral's forward and input chains never see. The
//! connected routes the two addresses make are the only routes corral adds;
//! removing the veth removes them.
//!
//! The namespace holds no process: it is pinned by a bind mount at a path
//! in the state directory, and the canary run itself binds its listeners
//! there for the duration of the run (so nothing listens when no canary
//! runs). A port nothing listens on answers a UDP datagram with port
//! unreachable, which is what the foreign-resolver and UDP checks count
//! as arrived; the namespace's ICMP rate limit is off so that the probe
//! and its control, from the same masqueraded source, are both answered.

use std::ffi::CString;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use corral_sandbox_core::verify::{OWN_TARGET_V4, OWN_TARGET_V6};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::link::{LinkError, Links};
use crate::netns::Netns;
use crate::plan::SysctlPlan;
use crate::sysctl::{SysctlError, Sysctls};

/// The host's end of the veth pair.
pub const VETH: &str = "corral-canary";
/// The namespace's end.
const PEER: &str = "eth0";
/// The host's address on the link (the targets' way back).
pub const HOST_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 252);
/// The host's IPv6 address on the link.
pub const HOST_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xca7, 0, 0, 0, 0, 1);
const PREFIX_V4: u8 = 30;
const PREFIX_V6: u8 = 64;

/// Where the pinned namespace lives in a state directory.
pub fn pin_path(state_dir: &Path) -> PathBuf {
    state_dir.join("canary-netns")
}

/// Setting up or removing the targets failed.
#[derive(Debug, thiserror::Error)]
pub enum OwnTargetsError {
    /// A link, address or route could not be made.
    #[error("corral's canary targets: {0}")]
    Link(#[from] LinkError),
    /// The namespace could not be made, entered or pinned.
    #[error("corral's canary targets: {what} {}: {source}", path.display())]
    Namespace {
        /// What was attempted.
        what: &'static str,
        /// The pin.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The namespace's ICMP rate limit could not be lifted.
    #[error("corral's canary targets: {0}")]
    Sysctl(#[from] SysctlError),
}

/// Make the targets in `host` (idempotent: a veth and a pin that are both
/// there are kept, with their addresses made sure of). A failure removes
/// what this call made, so no half-built target is left.
pub fn ensure(host: &Netns, state_dir: &Path) -> Result<(), OwnTargetsError> {
    let pin = pin_path(state_dir);
    let present = host.run_async(|| async {
        let links = Links::connect()?;
        Ok::<_, LinkError>(links.get(VETH).await?.is_some())
    });
    let present = flatten(&pin, "enter the host namespace of", present)?;
    if present && let Ok(ns) = Netns::open(&pin.to_string_lossy()) {
        return configure(host, &ns);
    }
    remove(host, state_dir)?;
    let made = create(host, &pin);
    if made.is_err() {
        // Best effort: the error that matters is the one that made it fail.
        let _ = remove(host, state_dir);
    }
    made
}

fn create(host: &Netns, pin: &Path) -> Result<(), OwnTargetsError> {
    let ns = Netns::new().map_err(|source| OwnTargetsError::Namespace {
        what: "create the namespace for",
        path: pin.to_owned(),
        source,
    })?;
    pin_namespace(&ns, pin)?;
    let fd = ns.fd();
    let made = host.run_async(|| async {
        let links = Links::connect()?;
        links.create_veth(VETH, PEER, Some(fd)).await
    });
    flatten(pin, "enter the host namespace of", made)?;
    configure(host, &ns)
}

fn configure(host: &Netns, ns: &Netns) -> Result<(), OwnTargetsError> {
    let host_side = host.run_async(|| async {
        let links = Links::connect()?;
        links.ensure_address(VETH, v4(HOST_V4)).await?;
        links.ensure_address(VETH, v6(HOST_V6)).await?;
        links.set_up(VETH).await
    });
    flatten(Path::new(VETH), "enter the host namespace for", host_side)?;
    let target_side = ns.run_async(|| async {
        let links = Links::connect()?;
        links.ensure_address(PEER, v4(OWN_TARGET_V4)).await?;
        links.ensure_address(PEER, v6(OWN_TARGET_V6)).await?;
        links.set_up(PEER).await?;
        // The way back for a probe that was not masqueraded (a profile
        // whose block is missing): without it a leak would look like a
        // timeout, which a must-fail check counts as blocked.
        links.add_default_route(IpAddr::V4(HOST_V4)).await?;
        links.add_default_route(IpAddr::V6(HOST_V6)).await
    });
    flatten(
        Path::new(PEER),
        "enter the targets' namespace for",
        target_side,
    )?;
    let sysctls = Sysctls::default();
    let limits = ns.run(|| {
        for key in ["net.ipv4.icmp_ratelimit", "net.ipv6.icmp.ratelimit"] {
            sysctls.apply_one(&SysctlPlan {
                key: key.to_owned(),
                value: "0".to_owned(),
                reason: "corral's canary targets answer every probe and its control".to_owned(),
            })?;
        }
        Ok::<_, SysctlError>(())
    });
    match limits {
        Ok(r) => Ok(r?),
        Err(source) => Err(OwnTargetsError::Namespace {
            what: "enter",
            path: PathBuf::from("the targets' namespace"),
            source,
        }),
    }
}

/// Remove the targets from `host`: the veth (its peer and connected routes
/// go with it) and the pin (the namespace goes once no run holds it).
/// Returns whether anything was there.
pub fn remove(host: &Netns, state_dir: &Path) -> Result<bool, OwnTargetsError> {
    let pin = pin_path(state_dir);
    let had_link = host.run_async(|| async {
        let links = Links::connect()?;
        if links.get(VETH).await?.is_some() {
            links.delete(VETH).await?;
            return Ok(true);
        }
        Ok::<_, LinkError>(false)
    });
    let had_link = flatten(&pin, "enter the host namespace of", had_link)?;
    let had_pin = unpin(&pin)?;
    Ok(had_link || had_pin)
}

/// Open the pinned namespace (for a canary run's listeners).
pub fn open(state_dir: &Path) -> io::Result<Netns> {
    Netns::open(&pin_path(state_dir).to_string_lossy())
}

fn pin_namespace(ns: &Netns, pin: &Path) -> Result<(), OwnTargetsError> {
    let err = |what, source| OwnTargetsError::Namespace {
        what,
        path: pin.to_owned(),
        source,
    };
    std::fs::File::create(pin).map_err(|e| err("create the pin", e))?;
    let target = c_path(pin).map_err(|e| err("name the pin", e))?;
    let bound = ns
        .run(move || {
            let source = c"/proc/thread-self/ns/net";
            // SAFETY: both are NUL-terminated strings that outlive the
            // call; a bind mount takes no filesystem type or data.
            let rc = unsafe {
                libc::mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_BIND,
                    std::ptr::null(),
                )
            };
            if rc == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        })
        .and_then(|r| r);
    if let Err(e) = bound {
        let _ = std::fs::remove_file(pin);
        return Err(err("bind-mount the namespace on", e));
    }
    Ok(())
}

fn unpin(pin: &Path) -> Result<bool, OwnTargetsError> {
    if !pin.exists() {
        return Ok(false);
    }
    let err = |what, source| OwnTargetsError::Namespace {
        what,
        path: pin.to_owned(),
        source,
    };
    let target = c_path(pin).map_err(|e| err("name the pin", e))?;
    // SAFETY: a NUL-terminated path that outlives the call. MNT_DETACH:
    // a canary run holding the namespace keeps it until it ends.
    let rc = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        // A pin file with nothing mounted on it (a crash between the two
        // steps) is removed all the same.
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(err("unmount the namespace from", e));
        }
    }
    std::fs::remove_file(pin).map_err(|e| err("remove the pin", e))?;
    Ok(true)
}

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(io::Error::other)
}

fn flatten<T>(
    pin: &Path,
    what: &'static str,
    r: io::Result<Result<T, LinkError>>,
) -> Result<T, OwnTargetsError> {
    match r {
        Ok(inner) => Ok(inner?),
        Err(source) => Err(OwnTargetsError::Namespace {
            what,
            path: pin.to_owned(),
            source,
        }),
    }
}

fn v4(ip: Ipv4Addr) -> IpNet {
    IpNet::V4(Ipv4Net::new(ip, PREFIX_V4).unwrap_or_default())
}

fn v6(ip: Ipv6Addr) -> IpNet {
    IpNet::V6(Ipv6Net::new(ip, PREFIX_V6).unwrap_or_default())
}
