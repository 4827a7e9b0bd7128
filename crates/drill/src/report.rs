//! The drill's rows and totals (serde: `corral drill --json`).

use serde::Serialize;

use crate::lab::{Observed, Probe};

/// What a probe should see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// The destination answers.
    Reach,
    /// Rejected or dropped.
    Block,
}

/// The judgement of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Observed what was expected, and the control proved the probe could
    /// fail.
    Pass,
    /// Observed the opposite of what was expected.
    Fail,
    /// The probe could not prove anything (its control did not connect, or
    /// it could not be run).
    NotRun,
    /// The probe itself failed.
    Error,
}

/// One probe of the drill.
#[derive(Debug, Clone, Serialize)]
pub struct DrillRow {
    /// What the row proves, e.g. `allowlisted address:port reachable`.
    pub probe: String,
    /// The sandbox it ran from.
    pub from: String,
    /// Destination, e.g. `tcp 203.0.113.10:443`.
    pub to: String,
    /// Reach or block.
    pub expected: Expect,
    /// What the probe saw with corral's rules.
    pub observed: Observed,
    /// What the same probe saw before the rules (the control).
    pub control: Observed,
    /// The judgement.
    pub verdict: Verdict,
    /// Milliseconds of the enforced probe.
    pub ms: u64,
    /// The probe itself (for machines).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packet: Option<Probe>,
}

/// The whole drill.
#[derive(Debug, Clone, Serialize)]
pub struct DrillReport {
    /// What the drill proves, one line.
    pub claim: String,
    /// Every row.
    pub rows: Vec<DrillRow>,
    /// Rows that passed.
    pub passed: usize,
    /// Rows that failed.
    pub failed: usize,
    /// Rows that could not prove anything.
    pub not_run: usize,
    /// Rows whose probe errored.
    pub errors: usize,
    /// Wall time of the whole drill, milliseconds.
    pub ms: u64,
}

impl DrillReport {
    /// Builds the totals from rows.
    pub fn new(claim: String, rows: Vec<DrillRow>, ms: u64) -> Self {
        let count = |v| rows.iter().filter(|r| r.verdict == v).count();
        Self {
            claim,
            passed: count(Verdict::Pass),
            failed: count(Verdict::Fail),
            not_run: count(Verdict::NotRun),
            errors: count(Verdict::Error),
            rows,
            ms,
        }
    }

    /// True when every row passed (and there is at least one).
    pub fn ok(&self) -> bool {
        !self.rows.is_empty() && self.passed == self.rows.len()
    }

    /// The last line: a verdict with counts.
    pub fn summary(&self) -> String {
        format!(
            "{}: {} passed, {} failed, {} not run, {} errors ({} probes, {} ms)",
            if self.ok() { "PASS" } else { "FAIL" },
            self.passed,
            self.failed,
            self.not_run,
            self.errors,
            self.rows.len(),
            self.ms
        )
    }
}

/// Judges one probe from its control and enforced results.
pub fn judge(expected: Expect, control: &Observed, observed: &Observed) -> Verdict {
    if let Observed::Error(_) = observed {
        return Verdict::Error;
    }
    if !control.reached() {
        // Without a working control a "blocked" result proves nothing, and
        // a "reached" one contradicts the control: either way, not a pass.
        return Verdict::NotRun;
    }
    match (expected, observed.reached()) {
        (Expect::Reach, true) | (Expect::Block, false) => Verdict::Pass,
        _ => Verdict::Fail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_without_a_working_control_is_never_a_pass() {
        let ok = Observed::Connected;
        let t = Observed::TimedOut;
        let rej = Observed::Rejected("x".into());
        let err = Observed::Error("x".into());
        assert_eq!(judge(Expect::Block, &ok, &rej), Verdict::Pass);
        assert_eq!(judge(Expect::Block, &ok, &t), Verdict::Pass);
        assert_eq!(judge(Expect::Block, &ok, &ok), Verdict::Fail);
        assert_eq!(judge(Expect::Reach, &ok, &ok), Verdict::Pass);
        assert_eq!(judge(Expect::Reach, &ok, &rej), Verdict::Fail);
        assert_eq!(judge(Expect::Block, &t, &t), Verdict::NotRun);
        assert_eq!(judge(Expect::Block, &err, &rej), Verdict::NotRun);
        assert_eq!(judge(Expect::Block, &ok, &err), Verdict::Error);
    }

    #[test]
    fn totals_and_summary() {
        let row = |v| DrillRow {
            probe: "p".into(),
            from: "a".into(),
            to: "b".into(),
            expected: Expect::Block,
            observed: Observed::TimedOut,
            control: Observed::Connected,
            verdict: v,
            ms: 1,
            packet: None,
        };
        let r = DrillReport::new(
            "c".into(),
            vec![row(Verdict::Pass), row(Verdict::NotRun)],
            5,
        );
        assert!(!r.ok());
        assert_eq!((r.passed, r.not_run), (1, 1));
        assert!(
            r.summary()
                .starts_with("FAIL: 1 passed, 0 failed, 1 not run")
        );
        assert!(!DrillReport::new("c".into(), vec![], 0).ok());
    }
}
