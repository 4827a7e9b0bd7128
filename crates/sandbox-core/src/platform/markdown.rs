//! The matrix as Markdown. `docs/platform-matrix.md` is exactly this output;
//! a test fails when the two differ.

use std::fmt::Write as _;

use super::enforcement::Isolation;
use super::matrix::{Cell, EgressClass, Support, cell};
use super::{HostOs, SandboxKind};

fn egress_text(egress: EgressClass) -> &'static str {
    match egress {
        EgressClass::HostKernel => "enforced on this host",
        EgressClass::Executor => {
            "enforced on the executor when attested (`host.attested_executors`); \
                otherwise not enforced"
        }
        EgressClass::ProviderHost => {
            "not enforced; one sandbox at a time may be verified when the kind is \
                opted in (`host.verification.kinds`) and its canary passes"
        }
        EgressClass::Unenforced => "not enforced",
    }
}

fn short(s: &Support) -> &'static str {
    match (s.egress, s.caution) {
        (_, true) => "⚠️ not enforced",
        (EgressClass::HostKernel, false) => "✅ enforced here",
        (EgressClass::Executor, false) => "✅ enforced on executor if attested",
        (EgressClass::ProviderHost, false) => "✅ verified per sandbox if opted in",
        (EgressClass::Unenforced, false) => "✅ not enforced",
    }
}

fn isolation_text(kind: SandboxKind, isolation: Isolation) -> String {
    match kind {
        SandboxKind::Incus | SandboxKind::IncusRemote => {
            format!("{isolation} (containers); dedicated kernel (VM instances)")
        }
        _ => isolation.to_string(),
    }
}

/// Render the whole matrix page.
pub fn render_markdown() -> String {
    let mut out = String::new();
    out.push_str(concat!(
        "# Platform matrix\n\n",
        "<!-- Generated from crates/sandbox-core/src/platform/matrix.rs; do not edit.\n",
        "     Regenerate: CORRAL_BLESS=1 cargo test -p corral-sandbox-core platform_matrix_doc -->\n\n",
        "Which sandbox kinds corral runs on which host OS, the isolation each gives,\n",
        "and who enforces its egress policy. `corral matrix` prints the same data.\n\n",
        "Trust order used by placement: enforced (on this host, on an attested\n",
        "executor, or on an Incus cluster member whose attestation is fresh: equal\n",
        "rank) > verified per sandbox > not enforced (as is any cluster member that\n",
        "is not attested). Profiled work never runs on a kind that is not enforced,\n",
        "except a sandbox of an opted-in kind that has just passed the verification\n",
        "canary.\n\n",
        "Legend: ✅ supported; ⚠️ runs, but must never be described as isolated\n",
        "(no egress enforcement, refused for profiled work); ❌ refused at start-up\n",
        "(reasons below).\n\n",
    ));
    out.push_str("| host |");
    for kind in SandboxKind::ALL {
        let _ = write!(out, " {kind} |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(SandboxKind::ALL.len()));
    out.push('\n');
    for os in HostOs::ALL {
        let _ = write!(out, "| {os} |");
        for kind in SandboxKind::ALL {
            let text = match cell(os, kind) {
                Cell::Supported(s) => short(&s),
                Cell::Refused(_) => "❌",
            };
            let _ = write!(out, " {text} |");
        }
        out.push('\n');
    }
    out.push_str("\n## Kinds\n\n| kind | isolation | egress |\n|---|---|---|\n");
    for kind in SandboxKind::ALL {
        // Isolation and egress class do not depend on the host OS; take
        // them from any host that supports the kind.
        let support = HostOs::ALL.into_iter().find_map(|os| match cell(os, kind) {
            Cell::Supported(s) => Some(s),
            Cell::Refused(_) => None,
        });
        if let Some(s) = support {
            let _ = writeln!(
                out,
                "| {kind} | {} | {} |",
                isolation_text(kind, s.isolation),
                egress_text(s.egress)
            );
        }
    }
    out.push_str("\n## Refused combinations\n\n");
    out.push_str("| host | kind | why | use instead |\n|---|---|---|---|\n");
    for os in HostOs::ALL {
        for kind in SandboxKind::ALL {
            if let Cell::Refused(r) = cell(os, kind) {
                let _ = writeln!(out, "| {os} | {kind} | {} | {} |", r.reason, r.use_instead);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell_appears() {
        let md = render_markdown();
        for os in HostOs::ALL {
            let row = md
                .lines()
                .find(|l| l.starts_with(&format!("| {os} | ")) && l.matches(" | ").count() > 3)
                .unwrap();
            assert_eq!(row.matches(" | ").count(), SandboxKind::ALL.len(), "{row}");
        }
        assert!(md.contains("| windows | tart | Tart runs only on macOS"));
        assert!(md.contains("| tart | dedicated kernel | not enforced; one sandbox"));
    }
}
