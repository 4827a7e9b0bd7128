//! Softnet mode: Tart's packet filter on the Mac host, outside the guest.
//!
//! corral runs every Tart VM with Softnet, blocking all IPv4 and allowing
//! only the profile's gateway plus the profile's resolved global-unicast
//! IPv4 addresses as /32s, bounded in count. There is no fallback: if
//! Softnet is missing, the VM does not start (never plain NAT). Extra
//! `tart run` arguments from the configuration are validated so none can
//! change the network (`--net-*` is refused).

use std::net::{IpAddr, Ipv4Addr};

use corral_sandbox_core::reserved;
use corral_sandbox_core::sandbox::NetworkAttachment;
use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, Serialize};

/// Default bound on allowlisted addresses per VM.
pub const DEFAULT_MAX_ALLOW: usize = 64;

/// Why a Softnet policy or run argument was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SoftnetError {
    /// An allow entry is wider than one address.
    #[error(
        "allow entry {0} is not a single IPv4 address (/32); Softnet mode admits resolved /32s only"
    )]
    NotHost(Ipv4Net),
    /// An allow entry is not a public unicast address.
    #[error(
        "allow entry {0} is not a global unicast address; Softnet mode never opens private, reserved or multicast ranges"
    )]
    NotGlobal(Ipv4Addr),
    /// Too many addresses.
    #[error(
        "{count} allowlisted addresses exceed the bound of {max}; narrow the profile or raise the bound"
    )]
    TooMany {
        /// Addresses asked for.
        count: usize,
        /// The bound.
        max: usize,
    },
    /// A configured extra `tart run` argument is refused.
    #[error(
        "extra tart run argument `{}` is refused: {reason}",
        corral_sandbox_core::text::Shown(arg)
    )]
    RunArg {
        /// The argument.
        arg: String,
        /// Why.
        reason: &'static str,
    },
}

/// The filter a VM runs under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SoftnetPolicy {
    /// The gateway (DHCP and the DNS resolver), always allowed when set.
    pub gateway: Option<Ipv4Addr>,
    /// Allowed destinations, sorted and without duplicates.
    pub allow: Vec<Ipv4Addr>,
    /// IPv6 entries of the profile that Softnet (IPv4 only) cannot express;
    /// they stay unreachable through Softnet.
    pub skipped_ipv6: usize,
}

/// True for an IPv4 address routable on the public internet: in none of
/// corral's reserved ranges (`corral_sandbox_core::reserved`, the IANA
/// special-purpose registries, the same list egress and the gateway use)
/// and not documentation space.
pub fn is_global_unicast(addr: Ipv4Addr) -> bool {
    reserved::is_global(IpAddr::V4(addr))
}

impl SoftnetPolicy {
    /// Policy from parts (tests and golden argvs).
    pub fn from_parts(gateway: Ipv4Addr, allow: Vec<Ipv4Addr>) -> Self {
        Self {
            gateway: Some(gateway),
            allow,
            skipped_ipv6: 0,
        }
    }

    /// Block everything: a sandbox without a profile.
    pub fn closed() -> Self {
        Self {
            gateway: None,
            allow: Vec::new(),
            skipped_ipv6: 0,
        }
    }

    /// The policy for `attachment`, with at most `max` allowed addresses.
    pub fn for_attachment(
        attachment: &NetworkAttachment,
        max: usize,
    ) -> Result<Self, SoftnetError> {
        let mut allow = Vec::new();
        let mut skipped_ipv6 = 0;
        for net in &attachment.resolved_allow {
            match net {
                IpNet::V6(_) => skipped_ipv6 += 1,
                IpNet::V4(v4) if v4.prefix_len() != 32 => return Err(SoftnetError::NotHost(*v4)),
                IpNet::V4(v4) if !is_global_unicast(v4.addr()) => {
                    return Err(SoftnetError::NotGlobal(v4.addr()));
                }
                IpNet::V4(v4) => allow.push(v4.addr()),
            }
        }
        allow.sort_unstable();
        allow.dedup();
        if allow.len() > max {
            return Err(SoftnetError::TooMany {
                count: allow.len(),
                max,
            });
        }
        Ok(Self {
            gateway: Some(attachment.gateway_v4),
            allow,
            skipped_ipv6,
        })
    }

    /// The `tart run` flags: Softnet on, all IPv4 blocked, the gateway and
    /// the allowlist let through.
    pub fn flags(&self) -> Vec<String> {
        let mut flags = vec![
            "--net-softnet".to_owned(),
            "--net-softnet-block=0.0.0.0/0".to_owned(),
        ];
        let allowed: Vec<String> = self
            .gateway
            .iter()
            .chain(self.allow.iter().filter(|a| Some(**a) != self.gateway))
            .map(|a| format!("{a}/32"))
            .collect();
        if !allowed.is_empty() {
            flags.push(format!("--net-softnet-allow={}", allowed.join(",")));
        }
        flags
    }
}

/// The `tart run` options the configuration may add: they change only the
/// VM's own devices. Everything else is refused because it reaches the
/// host or the network: `--dir` (host folders), `--disk` (host disk
/// images), `--serial-path` (a host path), `--vnc*` (a listener on the
/// host), `--rosetta` (a host directory share), `--net-*` (corral owns the
/// network flags), and any option a newer Tart adds.
pub const ALLOWED_RUN_OPTIONS: [&str; 9] = [
    "--no-audio",
    "--no-clipboard",
    "--no-trackpad",
    "--no-pointer",
    "--no-keyboard",
    "--suspendable",
    "--nested",
    "--serial",
    "--root-disk-opts",
];

/// Validate extra `tart run` arguments from the configuration: written
/// `--name` or `--name=value` (so no value can pose as another option),
/// and only [`ALLOWED_RUN_OPTIONS`].
pub fn check_extra_run_args(args: &[String]) -> Result<(), SoftnetError> {
    for arg in args {
        let refuse = |reason: &'static str| {
            Err(SoftnetError::RunArg {
                arg: arg.clone(),
                reason,
            })
        };
        let (name, value) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (arg.as_str(), None),
        };
        if !arg.starts_with("--") || name.len() < 3 {
            return refuse("write each as `--option` or `--option=value`");
        }
        if name.starts_with("--net") {
            return refuse(
                "corral owns the network flags (Softnet); `--net-*` cannot be overridden",
            );
        }
        if !ALLOWED_RUN_OPTIONS.contains(&name) {
            return refuse(
                "only options that change the VM's own devices are accepted (--no-audio, \
                 --no-clipboard, --no-trackpad, --no-pointer, --no-keyboard, --suspendable, \
                 --nested, --serial, --root-disk-opts=…); host folders, disks, paths and \
                 listeners are refused",
            );
        }
        match (name, value) {
            ("--root-disk-opts", Some(v))
                if !v.is_empty()
                    && v.chars()
                        .all(|c| c.is_ascii_lowercase() || "=,-".contains(c)) => {}
            ("--root-disk-opts", _) => {
                return refuse("write it as --root-disk-opts=<options> (lower-case, `=`, `,`)");
            }
            (_, Some(_)) => return refuse("this option takes no value"),
            (_, None) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn att(allow: &[&str]) -> NetworkAttachment {
        NetworkAttachment {
            profile: "dev".parse().unwrap(),
            bridge: "cb-dev".parse().unwrap(),
            subnet_v4: "192.168.64.0/24".parse().unwrap(),
            gateway_v4: "192.168.64.1".parse().unwrap(),
            resolved_allow: allow.iter().map(|a| a.parse().unwrap()).collect(),
            nic: None,
        }
    }

    #[test]
    fn policy_allows_gateway_and_global_32s() {
        let p = SoftnetPolicy::for_attachment(
            &att(&[
                "93.184.215.14/32",
                "1.1.1.1/32",
                "93.184.215.14/32",
                "2606:4700::1111/128",
            ]),
            8,
        )
        .unwrap();
        assert_eq!(p.skipped_ipv6, 1);
        assert_eq!(
            p.flags(),
            [
                "--net-softnet",
                "--net-softnet-block=0.0.0.0/0",
                "--net-softnet-allow=192.168.64.1/32,1.1.1.1/32,93.184.215.14/32"
            ]
        );
    }

    #[test]
    fn policy_refusals() {
        assert_eq!(
            SoftnetPolicy::for_attachment(&att(&["1.1.1.0/24"]), 8),
            Err(SoftnetError::NotHost("1.1.1.0/24".parse().unwrap()))
        );
        for private in [
            "10.0.0.1/32",
            "192.168.1.1/32",
            "169.254.169.254/32",
            "127.0.0.1/32",
            "100.64.0.1/32",
            "224.0.0.1/32",
            "255.255.255.255/32",
            "198.18.0.1/32",
            "192.88.99.1/32",
            "203.0.113.5/32",
            "192.0.0.170/32",
        ] {
            assert!(
                matches!(
                    SoftnetPolicy::for_attachment(&att(&[private]), 8),
                    Err(SoftnetError::NotGlobal(_))
                ),
                "{private}"
            );
        }
        let many: Vec<String> = (1..=5).map(|i| format!("8.8.8.{i}/32")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            SoftnetPolicy::for_attachment(&att(&many), 4),
            Err(SoftnetError::TooMany { count: 5, max: 4 })
        );
    }

    #[test]
    fn closed_policy_blocks_everything() {
        assert_eq!(
            SoftnetPolicy::closed().flags(),
            ["--net-softnet", "--net-softnet-block=0.0.0.0/0"]
        );
    }

    #[test]
    fn extra_run_args() {
        let ok: Vec<String> = ["--root-disk-opts=sync=none", "--no-audio", "--suspendable"]
            .map(String::from)
            .to_vec();
        assert_eq!(check_extra_run_args(&ok), Ok(()));
        for bad in [
            "--net-bridged=en0",
            "--net-host",
            "--net-softnet-allow=0.0.0.0/0",
            "--net-softnet-expose=22:22",
            "--netfoo",
            "-x",
            "value",
            "--",
            "--Net-host",
            "--a\nb",
            "--dir=home:/Users/me",
            "--dir=/",
            "--disk=/dev/disk2",
            "--serial-path=/tmp/x",
            "--vnc",
            "--vnc-experimental",
            "--rosetta=r",
            "--no-audio=1",
            "--root-disk-opts=sync none",
        ] {
            assert!(check_extra_run_args(&[bad.to_owned()]).is_err(), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn global_addresses_are_never_private(a in any::<u32>()) {
            let addr = Ipv4Addr::from(a);
            if is_global_unicast(addr) {
                prop_assert!(!addr.is_private() && !addr.is_loopback() && !addr.is_link_local()
                    && !addr.is_multicast() && !addr.is_broadcast() && !addr.is_unspecified()
                    && !addr.is_documentation());
            }
        }

        #[test]
        fn policy_is_bounded_and_global(addrs in proptest::collection::vec(any::<u32>(), 0..80)) {
            let nets: Vec<String> = addrs.iter().map(|a| format!("{}/32", Ipv4Addr::from(*a))).collect();
            let nets: Vec<&str> = nets.iter().map(String::as_str).collect();
            if let Ok(p) = SoftnetPolicy::for_attachment(&att(&nets), DEFAULT_MAX_ALLOW) {
                prop_assert!(p.allow.len() <= DEFAULT_MAX_ALLOW);
                prop_assert!(p.allow.iter().all(|a| is_global_unicast(*a)));
            }
        }
    }
}
