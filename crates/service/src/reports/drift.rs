//! Drift as the CLI and corrald print it: one object per difference,
//! the same words in both (docs/json-schema.md, "Drift items").

use corral_egress::drift::DriftKind;
use corral_egress::host::HostDrift;
use serde::Serialize;

/// One difference between plan and live state, in JSON (docs/json-schema.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DriftView {
    /// `nft`, `bridge`, `sysctl`, `host` or `port`.
    pub area: &'static str,
    /// `missing`, `extra` or `changed`.
    pub kind: &'static str,
    /// `table`, `chain`, `rule`, `set`, `element`, `bridge`, `sysctl`, `networks` or `port`.
    pub object: String,
    /// Where: `inet corral chain x-out rule 3`, a bridge name, a sysctl key.
    pub location: String,
    /// What exactly differs.
    pub detail: String,
    /// The whole difference as one sentence.
    pub message: String,
}

fn kind_text(kind: DriftKind) -> &'static str {
    match kind {
        DriftKind::Missing => "missing",
        DriftKind::Extra => "extra",
        DriftKind::Changed => "changed",
    }
}

impl From<&HostDrift> for DriftView {
    fn from(d: &HostDrift) -> Self {
        let message = d.to_string();
        match d {
            HostDrift::Nft(n) => Self {
                area: "nft",
                kind: kind_text(n.kind),
                object: format!("{:?}", n.object).to_lowercase(),
                location: if n.location.starts_with("table ") {
                    n.location.clone()
                } else {
                    format!("{} corral {}", n.family.keyword(), n.location)
                },
                detail: n.detail.clone(),
                message,
            },
            HostDrift::Bridge { name, problem } => Self {
                area: "bridge",
                kind: if problem == "missing" {
                    "missing"
                } else {
                    "changed"
                },
                object: "bridge".to_owned(),
                location: name.clone(),
                detail: problem.clone(),
                message,
            },
            HostDrift::Sysctl(s) => Self {
                area: "sysctl",
                kind: if s.live.is_none() {
                    "missing"
                } else {
                    "changed"
                },
                object: "sysctl".to_owned(),
                location: s.key.clone(),
                detail: format!(
                    "is {} (planned {})",
                    s.live.as_deref().unwrap_or("absent"),
                    s.planned
                ),
                message,
            },
            HostDrift::UnplannedBridge { name, ports } => Self {
                area: "bridge",
                kind: "extra",
                object: "bridge".to_owned(),
                location: name.clone(),
                detail: format!(
                    "carries corral's stamp, no profile names it; ports: {}",
                    if ports.is_empty() {
                        "none".to_owned()
                    } else {
                        ports.join(", ")
                    }
                ),
                message,
            },
            HostDrift::HostNetworks { new, gone } => Self {
                area: "host",
                kind: "changed",
                object: "networks".to_owned(),
                location: "host networks and routers".to_owned(),
                detail: format!("new: {new}; gone: {gone}"),
                message,
            },
            HostDrift::StraySource {
                bridge, packets, ..
            } => Self {
                area: "bridge",
                kind: "changed",
                object: "port".to_owned(),
                location: bridge.clone(),
                detail: format!("{packets} packet(s) from its subnet arrived elsewhere"),
                message,
            },
            HostDrift::Port {
                port,
                bridge,
                problem,
            } => Self {
                area: "port",
                kind: "changed",
                object: "port".to_owned(),
                location: format!("{bridge} {port}"),
                detail: problem.clone(),
                message,
            },
        }
    }
}

/// Every drift item for JSON.
pub fn drift_views(drift: &[HostDrift]) -> Vec<DriftView> {
    drift.iter().map(DriftView::from).collect()
}

#[cfg(test)]
mod tests {
    use corral_egress::sysctl::SysctlDrift;

    use super::*;

    #[test]
    fn bridge_and_sysctl_drift_views() {
        let bridge = HostDrift::Bridge {
            name: "corral-iso".to_owned(),
            problem: "missing".to_owned(),
        };
        let v = DriftView::from(&bridge);
        assert_eq!(
            (v.area, v.kind, v.location.as_str()),
            ("bridge", "missing", "corral-iso")
        );
        let down = HostDrift::Bridge {
            name: "corral-iso".to_owned(),
            problem: "down".to_owned(),
        };
        assert_eq!(DriftView::from(&down).kind, "changed");
        let sysctl = HostDrift::Sysctl(SysctlDrift {
            key: "net.ipv4.ip_forward".to_owned(),
            planned: "1".to_owned(),
            live: Some("0".to_owned()),
        });
        let v = DriftView::from(&sysctl);
        assert_eq!(v.detail, "is 0 (planned 1)");
        assert_eq!(v.kind, "changed");
    }
}
