//! `corral verify NAME`: run the canary in a running profiled sandbox now,
//! print every check with what it observed, its control and its time, and
//! record the gate's judgement. A failure stops the sandbox (fail closed)
//! and exits 1.

use corral_sandbox_core::sandbox::ProbeSite;
use corral_sandbox_core::verify::{CheckRecord, Expectation};
use corral_service::Report;
use serde::Serialize;

use super::context::{fail, verified_service};
use crate::args::VerifyArgs;
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, Style, Table, print_json};

/// `corral verify --json`.
#[derive(Debug, Serialize)]
struct VerifyJson<'a> {
    schema: &'static str,
    #[serde(flatten)]
    report: &'a Report,
}

fn expect(e: Expectation) -> &'static str {
    match e {
        Expectation::Connects => "reached",
        Expectation::Fails => "blocked",
        Expectation::DoesNotResolve => "no answer",
    }
}

fn observed(c: &CheckRecord) -> String {
    c.observed
        .as_ref()
        .map_or_else(|| "(not reported)".to_owned(), ToString::to_string)
}

fn control(c: &CheckRecord) -> String {
    match &c.control {
        None => "-".to_owned(),
        Some(ctl) => format!(
            "{} ({} ms)",
            ctl.observed
                .as_ref()
                .map_or_else(|| "(not reported)".to_owned(), ToString::to_string),
            ctl.elapsed_ms
        ),
    }
}

/// The checks as a table.
pub fn table(out: &Output, report: &Report) -> Table {
    let mut t = Table::new([
        "check", "target", "expect", "observed", "ms", "control", "result",
    ]);
    for c in &report.event.checks {
        t.row([
            c.kind.as_str().to_owned(),
            c.target.clone(),
            expect(c.expect).to_owned(),
            observed(c),
            c.elapsed_ms.to_string(),
            control(c),
            if c.passed {
                out.paint(Style::Good, "pass")
            } else {
                out.paint(Style::Bad, "FAIL")
            },
        ]);
    }
    t
}

/// Verify.
pub fn run(args: &VerifyArgs, out: Output) -> CmdResult {
    let (svc, verifier, rt) = verified_service(&args.ctx)?;
    let progress = out.progress(&format!("verifying {}", args.name));
    let result = rt.block_on(verifier.verify_named(&svc, &args.name));
    drop(progress);
    let report = result.map_err(fail)?;
    let outcome = if report.passed {
        Outcome::Ok
    } else {
        Outcome::Failed
    };
    if args.json {
        print_json(&VerifyJson {
            schema: "corral.verify.v1",
            report: &report,
        })?;
        return Ok(outcome);
    }
    let site = match report.site {
        ProbeSite::HostNamespace { pid } => {
            format!("probed from the host inside its network namespace (init pid {pid})")
        }
        ProbeSite::Guest => "probed inside the guest through exec".to_owned(),
    };
    out.info(&format!(
        "{} ({}, profile {}): {site}",
        report.sandbox, report.kind, report.profile
    ));
    out.table(&table(&out, &report), true);
    for n in &report.event.not_planned {
        out.info(&format!("not planned: {} ({})", n.kind.as_str(), n.reason));
    }
    if let Some(h) = &report.event.filter_health {
        out.info(&format!("provider filter: {h}"));
    }
    if report.passed {
        out.data(&format!(
            "{} {}: {} in {} ms",
            out.paint(Style::Good, "verified"),
            report.sandbox,
            report.event.message,
            report.ms
        ));
    } else {
        out.data(&format!(
            "{} {}: {}{}",
            out.paint(Style::Bad, "verification FAILED"),
            report.sandbox,
            report.event.message,
            report
                .action
                .as_ref()
                .map_or_else(String::new, |a| format!(" (sandbox {a})"))
        ));
    }
    Ok(outcome)
}
