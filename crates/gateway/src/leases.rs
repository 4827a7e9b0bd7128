//! The DHCP leases a gateway has handed out, read from dnsmasq's lease file
//! (`<expiry> <mac> <ip> <hostname|*> <client-id|*>` per line), so callers
//! can tell that a sandbox holds its address from corral's gateway.

use std::io;
use std::net::IpAddr;
use std::path::Path;

use corral_sandbox_core::BridgeName;

use crate::GatewayPaths;

/// One lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// Expiry, seconds since the Unix epoch (0: never).
    pub expires: u64,
    /// The client's hardware address, lower case.
    pub mac: String,
    /// The address leased.
    pub address: IpAddr,
}

/// Every well-formed lease of `bridge`'s gateway under `state_dir`; none
/// when the gateway has no lease file yet.
pub fn leases(state_dir: &Path, bridge: &BridgeName) -> io::Result<Vec<Lease>> {
    let path = GatewayPaths::new(state_dir, bridge).leases();
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(parse(&text)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("cannot read the lease file {}: {e}", path.display()),
        )),
    }
}

/// Parse lease-file text; lines that do not parse are skipped (dnsmasq
/// also writes `duid` lines for DHCPv6).
pub fn parse(text: &str) -> Vec<Lease> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let expires = f.next()?.parse().ok()?;
            let mac = f.next()?.to_ascii_lowercase();
            let address = f.next()?.parse().ok()?;
            Some(Lease {
                expires,
                mac,
                address,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dnsmasq_lines_and_skips_others() {
        let text = "1735689600 00:16:3E:AA:BB:CC 10.251.7.23 * 01:00:16:3e:aa:bb:cc\n\
                    duid 00:01:00:01\n\
                    0 00:16:3e:00:00:01 10.251.7.24 box *\n";
        let l = parse(text);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].mac, "00:16:3e:aa:bb:cc");
        assert_eq!(l[0].address, "10.251.7.23".parse::<IpAddr>().unwrap());
        assert_eq!(l[1].expires, 0);
        let dir = tempfile::tempdir().unwrap();
        let none = leases(dir.path(), &BridgeName::new("cb-x").unwrap()).unwrap();
        assert!(none.is_empty());
    }
}
