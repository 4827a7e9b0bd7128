//! The host's own resolvers, for `dns_upstreams = []` ("empty means the
//! host's own", docs/configuration.md): the `nameserver` lines of
//! /etc/resolv.conf.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

/// Where the host's resolvers are listed.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The configured upstreams, or — when none are configured — the host's
/// own from `resolv_conf` (an unreadable file yields none; the gateway
/// then refuses DNS profiles with a message naming `dns_upstreams`).
pub fn upstreams_or_host(configured: &[IpAddr], resolv_conf: &Path) -> Vec<SocketAddr> {
    let ips = if configured.is_empty() {
        std::fs::read_to_string(resolv_conf)
            .map(|text| nameservers(&text))
            .unwrap_or_default()
    } else {
        configured.to_vec()
    };
    super::upstreams(&ips)
}

/// The addresses of the `nameserver` lines; anything unparsable (a scoped
/// link-local address, a typo) is left out rather than guessed at.
pub fn nameservers(text: &str) -> Vec<IpAddr> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next()) {
                (Some("nameserver"), Some(addr)) => addr.parse().ok(),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_nameserver_lines_only() {
        let text = "# generated\nsearch example.org\nnameserver 192.0.2.53\nnameserver 2001:db8::53\nnameserver fe80::1%eth0\noptions edns0\n";
        let got = nameservers(text);
        assert_eq!(
            got,
            vec![
                "192.0.2.53".parse::<IpAddr>().unwrap(),
                "2001:db8::53".parse().unwrap()
            ]
        );
    }

    #[test]
    fn configured_upstreams_win() {
        let configured = ["198.51.100.53".parse().unwrap()];
        let got = upstreams_or_host(&configured, Path::new("/nonexistent"));
        assert_eq!(got, vec!["198.51.100.53:53".parse().unwrap()]);
        assert!(upstreams_or_host(&[], Path::new("/nonexistent")).is_empty());
    }

    #[test]
    fn empty_means_the_hosts_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("resolv.conf");
        std::fs::write(&path, "nameserver 192.0.2.1\n").unwrap();
        assert_eq!(
            upstreams_or_host(&[], &path),
            vec!["192.0.2.1:53".parse().unwrap()]
        );
    }
}
