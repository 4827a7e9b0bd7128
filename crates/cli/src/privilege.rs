//! Capability checks done before any netlink work, so a run without the
//! needed privileges says which capability is missing and how to get it,
//! instead of failing halfway with a bare "Operation not permitted".

use std::fmt;

/// A Linux capability corral needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Change nftables, links and addresses (bit 12).
    NetAdmin,
    /// Open raw sockets for ICMP probes (bit 13).
    NetRaw,
    /// Create and enter network namespaces (bit 21).
    SysAdmin,
}

impl Capability {
    fn bit(self) -> u32 {
        match self {
            Capability::NetAdmin => 12,
            Capability::NetRaw => 13,
            Capability::SysAdmin => 21,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Capability::NetAdmin => "CAP_NET_ADMIN",
            Capability::NetRaw => "CAP_NET_RAW",
            Capability::SysAdmin => "CAP_SYS_ADMIN",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The process lacks capabilities a command needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{what} needs {}, which this process does not have (effective capabilities: {effective:#x}); \
     run it as root (`sudo corral …`){}",
    list(missing),
    setcap_hint(missing)
)]
pub struct MissingCapability {
    /// What was being attempted, e.g. "`corral host apply`".
    pub what: String,
    /// The capabilities that are missing.
    pub missing: Vec<Capability>,
    /// The effective capability mask that was read.
    pub effective: u64,
}

fn list(caps: &[Capability]) -> String {
    let names: Vec<&str> = caps.iter().map(|c| c.name()).collect();
    names.join(" and ")
}

fn setcap_hint(caps: &[Capability]) -> String {
    // Namespaces need CAP_SYS_ADMIN, which a file capability grants too
    // broadly to recommend; for the rest, setcap is a reasonable alternative.
    if caps.contains(&Capability::SysAdmin) {
        String::new()
    } else {
        let names: Vec<String> = caps.iter().map(|c| c.name().to_lowercase()).collect();
        format!(
            " or give the binary the capability: `sudo setcap {}+ep \"$(command -v corral)\"`",
            names.join(",")
        )
    }
}

/// Parse the `CapEff:` line of a `/proc/<pid>/status` text.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

/// The capabilities of `needed` that `effective` lacks.
pub fn missing_from(effective: u64, needed: &[Capability]) -> Vec<Capability> {
    needed
        .iter()
        .copied()
        .filter(|c| effective & (1u64 << c.bit()) == 0)
        .collect()
}

/// Fail with [`MissingCapability`] unless this process holds every capability
/// in `needed`. When `/proc/self/status` cannot be read (not Linux, no
/// procfs) the check passes and the kernel's answer decides.
pub fn require(what: &str, needed: &[Capability]) -> Result<(), MissingCapability> {
    let Some(effective) = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s))
    else {
        tracing::debug!("cannot read CapEff from /proc/self/status; skipping the capability check");
        return Ok(());
    };
    let missing = missing_from(effective, needed);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(MissingCapability {
            what: what.to_owned(),
            missing,
            effective,
        })
    }
}

/// True when an error chain holds an OS "permission denied" (EPERM/EACCES),
/// i.e. the kernel refused for lack of privilege.
pub fn is_permission_error(err: &(dyn std::error::Error + 'static)) -> bool {
    corral_service::shapes::denied(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cap_eff() {
        let status = "Name:\tcorral\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(parse_cap_eff(status), Some(0x1ff_ffff_ffff));
        assert_eq!(parse_cap_eff("Name: x\n"), None);
    }

    #[test]
    fn root_lacks_nothing_and_nobody_lacks_everything() {
        assert!(
            missing_from(
                0x1ff_ffff_ffff,
                &[Capability::NetAdmin, Capability::SysAdmin]
            )
            .is_empty()
        );
        assert_eq!(
            missing_from(0, &[Capability::NetAdmin, Capability::NetRaw]),
            [Capability::NetAdmin, Capability::NetRaw]
        );
        // Only bit 12 set: NET_ADMIN present, NET_RAW (13) absent.
        assert_eq!(
            missing_from(1 << 12, &[Capability::NetAdmin, Capability::NetRaw]),
            [Capability::NetRaw]
        );
    }

    #[test]
    fn message_names_capability_and_remedy() {
        let e = MissingCapability {
            what: "`corral host apply`".to_owned(),
            missing: vec![Capability::NetAdmin],
            effective: 0,
        };
        let text = e.to_string();
        assert!(text.contains("CAP_NET_ADMIN"), "{text}");
        assert!(text.contains("sudo"), "{text}");
        assert!(text.contains("setcap cap_net_admin+ep"), "{text}");
        let e = MissingCapability {
            what: "`corral drill`".to_owned(),
            missing: vec![Capability::SysAdmin],
            effective: 0,
        };
        assert!(!e.to_string().contains("setcap"), "{e}");
    }

    #[test]
    fn finds_eperm_in_a_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("apply failed")]
        struct Wrap(#[source] std::io::Error);
        let e = Wrap(std::io::Error::from_raw_os_error(1));
        assert!(is_permission_error(&e));
        let e = Wrap(std::io::Error::from_raw_os_error(2));
        assert!(!is_permission_error(&e));
    }
}
