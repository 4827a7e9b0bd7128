//! The leases the server has granted, kept in its own lease file in the
//! gateway's directory (`corral-leases`), in dnsmasq's format
//! (`<expiry> <mac> <ip> * *` per line), so [`crate::leases`] reads it
//! beside dnsmasq's and a server started again knows what was given.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use corral_sandbox_core::MacAddr;

use super::Granted;
use crate::files::{CORRAL_LEASES_FILE, LEASES_MODE};
use crate::leases::{Lease, parse};

/// The lease file's name in a gateway's directory.
pub const LEASE_FILE: &str = CORRAL_LEASES_FILE;

/// Every lease of one bridge, by client MAC, and where they are kept.
#[derive(Debug)]
pub struct LeaseBook {
    dir: PathBuf,
    leases: BTreeMap<String, (u64, Ipv4Addr)>,
}

impl LeaseBook {
    /// The book kept in `dir` (the gateway's directory), with the leases
    /// its file already holds.
    pub fn open(dir: &Path) -> io::Result<Self> {
        let text = match std::fs::read_to_string(dir.join(LEASE_FILE)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("cannot read {}: {e}", dir.join(LEASE_FILE).display()),
                ));
            }
        };
        let leases = parse(&text)
            .into_iter()
            .filter_map(|l| match l.address {
                IpAddr::V4(ip) => Some((l.mac, (l.expires, ip))),
                IpAddr::V6(_) => None,
            })
            .collect();
        Ok(Self {
            dir: dir.to_owned(),
            leases,
        })
    }

    /// Records `granted` from `now` (seconds since the epoch), drops what
    /// has expired, and writes the file (atomically: a reader sees the
    /// old book or the new one).
    pub fn grant(&mut self, granted: &Granted, now: u64) -> io::Result<()> {
        self.leases.retain(|_, (expires, _)| *expires > now);
        self.leases.insert(
            granted.mac.to_string(),
            (now + u64::from(granted.secs), granted.addr),
        );
        corral_state_files::write_atomic(
            &self.dir,
            LEASE_FILE,
            self.render().as_bytes(),
            LEASES_MODE,
        )
        .map_err(|e| io::Error::other(e.to_string()))
    }

    /// The leases, by MAC.
    pub fn leases(&self) -> Vec<Lease> {
        self.leases
            .iter()
            .map(|(mac, (expires, ip))| Lease {
                expires: *expires,
                mac: mac.clone(),
                address: IpAddr::V4(*ip),
            })
            .collect()
    }

    /// The lease `mac` holds, if any.
    pub fn of(&self, mac: MacAddr) -> Option<(u64, Ipv4Addr)> {
        self.leases.get(&mac.to_string()).copied()
    }

    fn render(&self) -> String {
        self.leases
            .iter()
            .map(|(mac, (expires, ip))| format!("{expires} {mac} {ip} * *\n"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_written_in_dnsmasqs_format_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let mac = MacAddr([2, 0, 0, 0, 0, 5]);
        let addr = Ipv4Addr::new(10, 1, 0, 5);
        let mut book = LeaseBook::open(dir.path()).unwrap();
        book.grant(
            &Granted {
                mac,
                addr,
                secs: 60,
            },
            1_000,
        )
        .unwrap();
        let text = std::fs::read_to_string(dir.path().join(LEASE_FILE)).unwrap();
        assert_eq!(text, "1060 02:00:00:00:00:05 10.1.0.5 * *\n");
        let again = LeaseBook::open(dir.path()).unwrap();
        assert_eq!(again.of(mac), Some((1_060, addr)));
        // A renewal moves the expiry; an expired lease of another MAC goes.
        let other = MacAddr([2, 0, 0, 0, 0, 6]);
        let mut book = again;
        book.grant(
            &Granted {
                mac: other,
                addr: Ipv4Addr::new(10, 1, 0, 6),
                secs: 10,
            },
            1_010,
        )
        .unwrap();
        book.grant(
            &Granted {
                mac,
                addr,
                secs: 60,
            },
            1_030,
        )
        .unwrap();
        assert_eq!(book.of(mac), Some((1_090, addr)));
        assert_eq!(book.of(other), None);
        assert_eq!(
            crate::leases::parse(&std::fs::read_to_string(dir.path().join(LEASE_FILE)).unwrap())
                .len(),
            1
        );
    }
}
