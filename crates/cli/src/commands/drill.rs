//! `corral drill`: run the egress crate's isolation drill and render it. The
//! drill (topology, probes, expectations, judgement) is the library's; this
//! module prints its first line, one row per probe and its verdict line.

use std::path::Path;

use anyhow::Context as _;
use corral_drill::lab::Observed;
use corral_drill::{DrillOptions, DrillReport, DrillRow, Expect, Verdict};
use serde::Serialize;

use crate::args::DrillArgs;
use crate::error::{CliError, CmdResult, Outcome};
use crate::load;
use crate::output::{Output, Style, Table};
use crate::privilege::{self, Capability};

/// `corral drill --json` (schema in docs/json-schema.md).
#[derive(Debug, Serialize)]
struct DrillJson<'a> {
    schema: &'static str,
    claim: &'a str,
    source: String,
    profiles: Vec<String>,
    verdict: &'static str,
    probes: usize,
    passed: usize,
    failed: usize,
    not_run: usize,
    errors: usize,
    ms: u64,
    rows: Vec<RowJson<'a>>,
    attack_classes: Vec<corral_drill::attack::ClassLine>,
}

/// One probe in JSON.
#[derive(Debug, Serialize)]
struct RowJson<'a> {
    probe: &'a str,
    from: &'a str,
    to: &'a str,
    expected: Expect,
    observed: &'static str,
    observed_detail: Option<&'a str>,
    control: &'static str,
    verdict: Verdict,
    ms: u64,
}

fn observed_parts(o: &Observed) -> (&'static str, Option<&str>) {
    match o {
        Observed::Connected => ("connected", None),
        Observed::Rejected(d) => ("rejected", Some(d)),
        Observed::TimedOut => ("timed_out", None),
        Observed::Error(d) => ("error", Some(d)),
    }
}

fn observed_text(o: &Observed) -> String {
    match o {
        Observed::Connected => "connected".to_owned(),
        Observed::Rejected(d) if d.is_empty() => "rejected".to_owned(),
        Observed::Rejected(d) => format!("rejected ({d})"),
        Observed::TimedOut => "timed out".to_owned(),
        Observed::Error(d) => format!("error: {d}"),
    }
}

fn expected_text(e: Expect) -> &'static str {
    match e {
        Expect::Reach => "reach",
        Expect::Block => "block",
    }
}

fn verdict_cell(out: &Output, v: Verdict) -> String {
    match v {
        Verdict::Pass => out.paint(Style::Good, "pass"),
        Verdict::Fail => out.paint(Style::Bad, "FAIL"),
        Verdict::NotRun => out.paint(Style::Warn, "not run"),
        Verdict::Error => out.paint(Style::Bad, "error"),
    }
}

/// The width the default table fits.
const NARROW: usize = 100;
/// At most this much of a row's destination is shown in the narrow table.
const TO_WIDTH: usize = 34;

/// `text` cut to `width` characters, ending in `…` when cut.
fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// The default table: verdict, from, to, probe — each row one line of at
/// most [`NARROW`] columns (the probe's text cut to what is left).
fn narrow_table(out: &Output, rows: &[&DrillRow]) -> Table {
    let from_w = rows
        .iter()
        .map(|r| r.from.chars().count())
        .chain(["from".len()])
        .max()
        .unwrap_or(0);
    let to_w = rows
        .iter()
        .map(|r| r.to.chars().count().min(TO_WIDTH))
        .chain(["to".len()])
        .max()
        .unwrap_or(0);
    // "not run" is the widest verdict; two spaces between columns.
    let probe_w = NARROW.saturating_sub("not run".len() + from_w + to_w + 3 * 2);
    let mut t = Table::new(["verdict", "from", "to", "probe"]);
    for r in rows {
        t.row([
            verdict_cell(out, r.verdict),
            r.from.clone(),
            fit(&r.to, TO_WIDTH),
            fit(&r.probe, probe_w),
        ]);
    }
    t
}

/// One line per row that did not pass: what was seen against what was
/// expected and what the control saw.
fn not_passed_lines(rows: &[&DrillRow]) -> Vec<String> {
    rows.iter()
        .filter(|r| r.verdict != Verdict::Pass)
        .map(|r| {
            format!(
                "{} from {} to {}: expected {}, observed {}; control: {}",
                r.probe,
                r.from,
                r.to,
                expected_text(r.expected),
                observed_text(&r.observed),
                observed_text(&r.control)
            )
        })
        .collect()
}

fn table(out: &Output, rows: &[&DrillRow]) -> Table {
    let mut t = Table::new([
        "probe", "from", "to", "expected", "observed", "verdict", "ms",
    ]);
    for r in rows {
        let mut observed = observed_text(&r.observed);
        if r.verdict == Verdict::NotRun {
            observed = format!("{observed}; control: {}", observed_text(&r.control));
        }
        t.row([
            r.probe.clone(),
            r.from.clone(),
            r.to.clone(),
            expected_text(r.expected).to_owned(),
            observed,
            verdict_cell(out, r.verdict),
            r.ms.to_string(),
        ]);
    }
    t
}

fn to_json<'a>(report: &'a DrillReport, source: String, profiles: Vec<String>) -> DrillJson<'a> {
    DrillJson {
        schema: "corral.drill.v1",
        claim: &report.claim,
        source,
        profiles,
        verdict: if report.ok() { "pass" } else { "fail" },
        probes: report.rows.len(),
        passed: report.passed,
        failed: report.failed,
        not_run: report.not_run,
        errors: report.errors,
        ms: report.ms,
        rows: report
            .rows
            .iter()
            .map(|r| {
                let (observed, observed_detail) = observed_parts(&r.observed);
                RowJson {
                    probe: &r.probe,
                    from: &r.from,
                    to: &r.to,
                    expected: r.expected,
                    observed,
                    observed_detail,
                    control: observed_parts(&r.control).0,
                    verdict: r.verdict,
                    ms: r.ms,
                }
            })
            .collect(),
        attack_classes: corral_drill::attack::class_lines(report),
    }
}

fn write_json(path: &Path, json: &DrillJson<'_>) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(json)? + "\n";
    std::fs::write(path, text)
        .with_context(|| format!("cannot write the drill record to {}", path.display()))
}

/// Run the drill and render it.
pub fn run(args: &DrillArgs, out: Output) -> CmdResult {
    let loaded = load::load(&args.source)?;
    privilege::require(
        "`corral drill`",
        &[
            Capability::NetAdmin,
            Capability::SysAdmin,
            Capability::NetRaw,
        ],
    )
    .map_err(CliError::failure)?;
    let json_only = args.json;
    // With JSON on stdout, human output would corrupt it.
    let human = Output {
        quiet: out.quiet || json_only,
        ..out
    };
    human.data_unless_json(json_only, corral_drill::CLAIM);
    let names = loaded.config.profiles.names();
    human.info(&format!(
        "profiles from {}: {}",
        loaded.origin,
        loaded
            .config
            .profiles
            .iter()
            .map(|p| format!("{} ({})", p.name, format!("{:?}", p.mode).to_lowercase()))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let progress = human.progress("running the drill in throwaway network namespaces");
    let result = corral_drill::run(&loaded.config.profiles, &DrillOptions::default());
    drop(progress);
    let report = result.map_err(|e| CliError::failure(anyhow::Error::new(e)))?;

    let record = to_json(&report, loaded.origin.to_string(), names);
    if let Some(path) = &args.output {
        write_json(path, &record).map_err(CliError::failure)?;
    }
    if json_only {
        crate::output::print_json(&record).map_err(CliError::failure)?;
    }
    if !json_only {
        let rows: Vec<&DrillRow> = if human.quiet {
            report
                .rows
                .iter()
                .filter(|r| r.verdict != Verdict::Pass)
                .collect()
        } else {
            report.rows.iter().collect()
        };
        if !rows.is_empty() {
            if args.wide {
                human.table(&table(&human, &rows), true);
            } else {
                human.table(&narrow_table(&human, &rows), true);
                for line in not_passed_lines(&rows) {
                    human.data(&line);
                }
            }
        }
        if !human.quiet {
            for c in corral_drill::attack::class_lines(&report) {
                human.data(&match c.proved_by {
                    None => format!("attack {} ({}): {} row(s) above", c.class, c.title, c.rows),
                    Some(by) => format!(
                        "attack {} ({}): no row for these profiles; proved by {by}",
                        c.class, c.title
                    ),
                });
            }
        }
        let style = if report.ok() { Style::Good } else { Style::Bad };
        human.data(&human.paint(style, &report.summary()));
    }
    Ok(if report.ok() {
        Outcome::Ok
    } else {
        Outcome::Failed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(verdict: Verdict, observed: Observed, control: Observed) -> DrillRow {
        DrillRow {
            probe: "allowlisted address:port reachable".to_owned(),
            from: "allowlist-1".to_owned(),
            to: "tcp 203.0.113.10:443".to_owned(),
            expected: Expect::Reach,
            observed,
            control,
            verdict,
            ms: 3,
            packet: None,
        }
    }

    #[test]
    fn a_row_that_did_not_run_shows_its_control() {
        let out = Output {
            color: false,
            quiet: false,
        };
        let r = row(
            Verdict::NotRun,
            Observed::TimedOut,
            Observed::Error("no route".into()),
        );
        let text = table(&out, &[&r]).render(false);
        assert!(text.contains("not run"), "{text}");
        assert!(text.contains("control: error: no route"), "{text}");
        let r = row(Verdict::Pass, Observed::Connected, Observed::Connected);
        let text = table(&out, &[&r]).render(false);
        assert!(!text.contains("control"), "{text}");
    }

    #[test]
    fn the_default_table_fits_100_columns_and_says_why_a_row_failed() {
        let out = Output {
            color: false,
            quiet: false,
        };
        let mut long = row(Verdict::Fail, Observed::Connected, Observed::Connected);
        long.probe = "a probe whose description goes on ".repeat(8);
        long.to = "dns query for a-very-long-name.corral.test to 203.0.113.53:53".to_owned();
        let short = row(Verdict::Pass, Observed::Connected, Observed::Connected);
        let text = narrow_table(&out, &[&long, &short]).render(false);
        for line in text.lines() {
            assert!(
                line.chars().count() <= NARROW,
                "{} wide: {line}",
                line.chars().count()
            );
        }
        assert!(
            text.contains("allowlisted address:port reachable"),
            "{text}"
        );
        assert!(text.contains('…'), "{text}");
        // The failed row in full, below the table.
        let why = not_passed_lines(&[&long, &short]);
        assert_eq!(why.len(), 1);
        assert!(why[0].contains(&long.probe), "{}", why[0]);
        assert!(why[0].contains("observed connected"), "{}", why[0]);
    }

    #[test]
    fn json_counts_and_verdict_follow_the_report() {
        let report = DrillReport::new(
            "claim".to_owned(),
            vec![
                row(Verdict::Pass, Observed::Connected, Observed::Connected),
                row(Verdict::NotRun, Observed::TimedOut, Observed::TimedOut),
            ],
            7,
        );
        let json = to_json(
            &report,
            "built-in defaults".to_owned(),
            vec!["allowlist".to_owned()],
        );
        assert_eq!(json.verdict, "fail");
        assert_eq!((json.probes, json.passed, json.not_run), (2, 1, 1));
        assert_eq!(json.rows[1].observed, "timed_out");
        let v = serde_json::to_value(&json).unwrap();
        assert_eq!(v["rows"][1]["verdict"], "not_run");
    }
}
