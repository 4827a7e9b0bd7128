//! Drift as a table and as JSON, shared by `plan`, `verify`, `apply` and `status`.

use corral_egress::host::HostDrift;
use corral_service::reports::drift_views;

use crate::output::{Output, Style, Table};

/// Drift as a table: kind, object, where, what.
pub fn drift_table(out: &Output, drift: &[HostDrift]) -> Table {
    let mut table = Table::new(["drift", "object", "where", "what"]);
    for v in drift_views(drift) {
        table.row([
            out.paint(Style::Bad, v.kind),
            v.object,
            v.location,
            v.detail,
        ]);
    }
    table
}

/// `N differences` with the right plural.
pub fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_prints_as_a_table() {
        let drift = [
            HostDrift::Bridge {
                name: "corral-iso".to_owned(),
                problem: "missing".to_owned(),
            },
            HostDrift::Sysctl(corral_egress::sysctl::SysctlDrift {
                key: "net.ipv4.ip_forward".to_owned(),
                planned: "1".to_owned(),
                live: Some("0".to_owned()),
            }),
        ];
        let out = Output {
            color: false,
            quiet: false,
        };
        let text = drift_table(&out, &drift).render(false);
        assert!(text.contains("net.ipv4.ip_forward"), "{text}");
        assert!(text.contains("corral-iso"), "{text}");
    }

    #[test]
    fn plurals() {
        assert_eq!(count(1, "rule", "rules"), "1 rule");
        assert_eq!(count(0, "rule", "rules"), "0 rules");
    }
}
