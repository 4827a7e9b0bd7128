//! The DHCP leases a gateway has handed out, read from dnsmasq's lease file
//! and corral's own DHCP server's (`corral-leases`), both
//! `<expiry> <mac> <ip> <hostname|*> <client-id|*>` per line, so callers
//! can tell that a sandbox holds its address from corral's gateway
//! whichever server gave it.

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

/// Every well-formed lease of `bridge`'s gateway under `state_dir`, from
/// either server, one per (MAC, address) with the later expiry, sorted;
/// none when neither has a lease file yet.
pub fn leases(state_dir: &Path, bridge: &BridgeName) -> io::Result<Vec<Lease>> {
    let paths = GatewayPaths::new(state_dir, bridge);
    let mut all: Vec<Lease> = Vec::new();
    for path in [paths.leases(), paths.corral_leases()] {
        match std::fs::read_to_string(&path) {
            Ok(text) => all.extend(parse(&text)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot read the lease file {}: {e}", path.display()),
                ));
            }
        }
    }
    // Later expiry first within a (MAC, address), 0 (never) latest of all.
    all.sort_by(|a, b| {
        (&a.mac, a.address)
            .cmp(&(&b.mac, b.address))
            .then_with(|| never_last(b.expires).cmp(&never_last(a.expires)))
    });
    all.dedup_by(|later, first| later.mac == first.mac && later.address == first.address);
    Ok(all)
}

fn never_last(expires: u64) -> u64 {
    if expires == 0 { u64::MAX } else { expires }
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

    #[test]
    fn both_servers_files_are_read_and_a_lease_in_both_counts_once() {
        let state = tempfile::tempdir().unwrap();
        let bridge = BridgeName::new("cb-x").unwrap();
        let paths = GatewayPaths::new(state.path(), &bridge);
        std::fs::create_dir_all(paths.dir()).unwrap();
        std::fs::write(
            paths.leases(),
            "100 02:00:00:00:00:01 10.0.0.2 * *\n50 02:00:00:00:00:02 10.0.0.3 * *\n",
        )
        .unwrap();
        std::fs::write(
            paths.corral_leases(),
            "200 02:00:00:00:00:01 10.0.0.2 * *\n",
        )
        .unwrap();
        let l = leases(state.path(), &bridge).unwrap();
        let got: Vec<_> = l.iter().map(|l| (l.mac.as_str(), l.expires)).collect();
        assert_eq!(got, [("02:00:00:00:00:01", 200), ("02:00:00:00:00:02", 50)]);
    }
}
