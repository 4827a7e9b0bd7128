//! `corral matrix`: which sandbox kinds run on which host OS, their
//! isolation, and who enforces egress. The matrix itself is sandbox-core's.

use corral_sandbox_core::HostOs;
use corral_sandbox_core::platform::{Cell, Classification, EgressClass, entries};
use serde::Serialize;

use crate::args::{HostOsArg, MatrixArgs};
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, Style, Table, print_json};

/// `corral matrix --json` (schema in docs/json-schema.md).
#[derive(Debug, Serialize)]
struct MatrixReport {
    schema: &'static str,
    host_os: Option<HostOs>,
    entries: Vec<EntryView>,
}

/// One cell with its static egress classification.
#[derive(Debug, Serialize)]
struct EntryView {
    host_os: HostOs,
    kind: corral_sandbox_core::SandboxKind,
    #[serde(flatten)]
    cell: Cell,
    /// What holds without attestation or verification; `None` when refused.
    enforcement: Option<Classification>,
}

fn host_os(arg: HostOsArg) -> HostOs {
    match arg {
        HostOsArg::Linux => HostOs::Linux,
        HostOsArg::Macos => HostOs::Macos,
        HostOsArg::Windows => HostOs::Windows,
    }
}

fn egress_text(class: EgressClass) -> &'static str {
    match class {
        EgressClass::HostKernel => "enforced on this host",
        EgressClass::Executor => "enforced on the executor if attested",
        EgressClass::ProviderHost => "verified per sandbox (canary)",
        EgressClass::Unenforced => "not enforced",
    }
}

/// Print the matrix.
pub fn run(args: &MatrixArgs, out: Output) -> CmdResult {
    let only = args.host.map(host_os);
    let rows: Vec<EntryView> = entries()
        .into_iter()
        .filter(|e| only.is_none_or(|os| os == e.host_os))
        .map(|e| EntryView {
            host_os: e.host_os,
            kind: e.kind,
            cell: e.cell,
            enforcement: match e.cell {
                Cell::Supported(s) => Some(s.static_classification()),
                Cell::Refused(_) => None,
            },
        })
        .collect();
    if args.json {
        print_json(&MatrixReport {
            schema: "corral.matrix.v1",
            host_os: only,
            entries: rows,
        })?;
        return Ok(Outcome::Ok);
    }
    let mut table = Table::new(["host", "kind", "support", "isolation", "egress"]);
    let mut refusals = Vec::new();
    for row in &rows {
        let (support, isolation, egress) = match row.cell {
            Cell::Supported(s) if s.caution => (
                out.paint(Style::Warn, "caution"),
                s.isolation.to_string(),
                out.paint(Style::Warn, egress_text(s.egress)),
            ),
            Cell::Supported(s) => (
                out.paint(Style::Good, "yes"),
                s.isolation.to_string(),
                egress_text(s.egress).to_owned(),
            ),
            Cell::Refused(r) => {
                refusals.push(format!(
                    "  {} on {}: {}; use {}",
                    row.kind, row.host_os, r.reason, r.use_instead
                ));
                (
                    out.paint(Style::Bad, "refused"),
                    "-".to_owned(),
                    "-".to_owned(),
                )
            }
        };
        table.row([
            row.host_os.to_string(),
            row.kind.to_string(),
            support,
            isolation,
            egress,
        ]);
    }
    out.table(&table, true);
    if !refusals.is_empty() {
        out.info("\nrefused combinations:");
        for line in refusals {
            out.info(&line);
        }
    }
    if rows
        .iter()
        .any(|r| matches!(r.cell, Cell::Supported(s) if s.caution))
    {
        out.info(
            "\n\"caution\" kinds run but have no egress enforcement: never describe them as isolated.",
        );
    }
    Ok(Outcome::Ok)
}
