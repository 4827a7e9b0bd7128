//! Sandboxes as tables and JSON (schemas in docs/json-schema.md).

use corral_sandbox_core::sandbox::{SandboxInfo, SandboxState};
use corral_service::HandedOut;
use corral_service::templates::AppliedBy;

use crate::output::{Output, Style, Table};

/// The state, coloured.
pub fn state(out: &Output, s: SandboxState) -> String {
    match s {
        SandboxState::Running => out.paint(Style::Good, "running"),
        SandboxState::Stopped => s.to_string(),
        SandboxState::Error | SandboxState::Unknown => out.paint(Style::Bad, &s.to_string()),
        _ => out.paint(Style::Warn, &s.to_string()),
    }
}

/// What the start gate checked and what became of the template.
pub fn handed_out(out: &Output, made: &HandedOut) {
    if let Some(gate) = &made.gate {
        out.info(&format!(
            "start gate: {}, {}, bridge {} and gateway ({}) checked{}",
            plural(gate.chains.len(), "chain"),
            plural(gate.sets.len(), "set"),
            gate.bridge,
            gate.gateway_pid
                .map_or_else(|| "corral's".to_owned(), |pid| format!("pid {pid}")),
            gate.resolver
                .map_or_else(String::new, |r| format!(", resolver {r} answered"))
        ));
        if let Some(b) = &gate.binding {
            out.info(&format!(
                "port {} bound to MAC {} and {} (its DHCP reservation)",
                b.port, b.mac, b.v4
            ));
        }
    }
    if let Some(t) = &made.template {
        match t.by {
            AppliedBy::CloudInit => out.info(&format!(
                "template {}: cloud-init applies it at first boot (context file {}); `corral exec {} -- cloud-init status --wait` waits for it",
                t.name, t.context_path, made.info.name
            )),
            AppliedBy::FileApi => {
                out.info(&format!(
                    "template {}: the image has no cloud-init; context file written to {} through the file API",
                    t.name, t.context_path
                ));
                if !t.not_applied.is_empty() {
                    eprintln!(
                        "warning: template {} not fully applied without cloud-init: {}",
                        t.name,
                        t.not_applied.join("; ")
                    );
                }
            }
        }
    }
}

/// Text on standard error that must be noticed: red on a terminal that
/// takes colour.
pub fn loud(text: &str) -> String {
    use std::io::IsTerminal as _;
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    crate::output::paint(colour, Style::Bad, text)
}

/// `n what` with an `s` unless `n` is one.
pub fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// One row per sandbox; a `member` column when any of them runs on an
/// Incus cluster member (single hosts keep their table as it was).
pub fn table(out: &Output, infos: &[SandboxInfo]) -> Table {
    table_with(out, infos, &std::collections::BTreeMap::new())
}

/// The same, with an `ends` column when any sandbox has a lifetime: when
/// its time to live deletes it, and its idle limit.
pub fn table_with(
    out: &Output,
    infos: &[SandboxInfo],
    lifetimes: &std::collections::BTreeMap<String, corral_service::shapes::Lifetime>,
) -> Table {
    let clustered = infos.iter().any(|i| i.location.is_some());
    let mut header = vec!["name", "state", "profile", "type", "addresses", "image"];
    if clustered {
        header.push("member");
    }
    if !lifetimes.is_empty() {
        header.push("ends");
    }
    let mut t = Table::new(header);
    for i in infos {
        let mut row = vec![
            i.name.to_string(),
            state(out, i.state),
            i.profile
                .as_ref()
                .map_or_else(|| "(no network)".to_owned(), ToString::to_string),
            match i.instance_type {
                corral_sandbox_core::sandbox::InstanceType::Container => "container".to_owned(),
                corral_sandbox_core::sandbox::InstanceType::Vm => "vm".to_owned(),
            },
            if i.addresses.is_empty() {
                "-".to_owned()
            } else {
                i.addresses
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            },
            i.image.clone().unwrap_or_else(|| "-".to_owned()),
        ];
        if clustered {
            row.push(i.location.clone().unwrap_or_else(|| "-".to_owned()));
        }
        if !lifetimes.is_empty() {
            row.push(ends(lifetimes.get(i.name.as_str())));
        }
        t.row(row);
    }
    t
}

/// `deleted at 2026-12-02T10:00:00Z, idle stop 30m`, or `-`.
fn ends(life: Option<&corral_service::shapes::Lifetime>) -> String {
    let Some(l) = life else {
        return "-".to_owned();
    };
    let mut parts = Vec::new();
    if let Some(at) = &l.expires_at {
        // Whole seconds: the milliseconds are noise in a table.
        let shown = at.split('.').next().map_or(at.clone(), |s| format!("{s}Z"));
        parts.push(format!("deleted at {shown}"));
    }
    if let Some(s) = l.idle_stop_secs {
        parts.push(format!(
            "idle stop {}",
            corral_service::lifetimes::show_secs(s)
        ));
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sandbox_core::sandbox::InstanceType;
    use corral_sandbox_core::{SandboxKind, SandboxName};

    fn info(name: &str, location: Option<&str>) -> SandboxInfo {
        SandboxInfo {
            name: SandboxName::new(name).unwrap(),
            kind: SandboxKind::Incus,
            state: SandboxState::Running,
            instance_type: InstanceType::Container,
            profile: None,
            image: None,
            created: None,
            addresses: Vec::new(),
            nic: None,
            location: location.map(Into::into),
        }
    }

    #[test]
    fn the_member_column_appears_only_on_a_cluster() {
        let out = Output {
            color: false,
            quiet: false,
        };
        let single = table(&out, &[info("a1", None)]).render(false);
        assert!(!single.contains("member"), "{single}");
        let clustered = table(&out, &[info("a1", Some("m2")), info("a2", None)]).render(false);
        let lines: Vec<&str> = clustered.lines().collect();
        assert!(lines[0].trim_end().ends_with("member"), "{clustered}");
        assert!(lines[1].trim_end().ends_with("m2"), "{clustered}");
        assert!(lines[2].trim_end().ends_with('-'), "{clustered}");
    }
}
