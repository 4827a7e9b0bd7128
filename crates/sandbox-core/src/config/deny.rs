//! `deny = [...]` lists (host-wide and per profile): destinations no
//! sandbox reaches, whatever its mode or allow entries say.

use ipnet::IpNet;
use toml::Spanned;

use super::errors::Collector;

/// Parse a deny list: every entry an IPv4 or IPv6 address or CIDR. Bad
/// entries are recorded in `c` (with the key `deny`) and skipped.
pub(crate) fn parse_list(
    raw: &[Spanned<String>],
    context: Option<&str>,
    c: &mut Collector<'_>,
) -> Vec<IpNet> {
    let mut out = Vec::new();
    for entry in raw {
        let text = entry.get_ref().trim();
        let parsed = text
            .parse::<IpNet>()
            .or_else(|_| text.parse::<core::net::IpAddr>().map(IpNet::from));
        match parsed {
            Ok(net) => {
                let net = net.trunc();
                if !out.contains(&net) {
                    out.push(net);
                }
            }
            Err(_) => c.at(
                Some(entry.span().start),
                context,
                Some("deny"),
                format!(
                    "`{text}` is not an address or CIDR; write entries such as \"192.0.2.0/24\" or \"2001:db8::/48\""
                ),
            ),
        }
    }
    out
}
