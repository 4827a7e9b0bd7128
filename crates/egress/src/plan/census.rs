//! The plan's rules counted by where they live and what they do, so the
//! cost of one more profile (issue 33: profiles as data, not rules) is a
//! number read from the plan rather than guessed from the bench's total.
//!
//! A rule's *chain* is its chain's name with the owning profile's name
//! replaced by `<p>` (`<p>-guard`, `<p>-out`), base and shared chains by
//! their own name. Its *kind* is what it is for: `log-budget` (the
//! drop log's suppressing twin, see [`super::droplog`]), `logged` (the
//! logging twin), or its verdict.

use std::collections::BTreeMap;

use super::HostPlan;
use super::droplog;
use super::model::{ChainPlan, RulePlan, TableFamily, Verdict};

/// Where a rule is and what it does.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RuleClass {
    /// The table's family.
    pub table: TableFamily,
    /// The chain, a profile's name replaced by `<p>`.
    pub chain: String,
    /// `log-budget`, `logged`, or the verdict (`accept`, `drop`, ...).
    pub kind: &'static str,
}

/// Rules of `plan`, counted per [`RuleClass`].
pub fn rules(plan: &HostPlan) -> BTreeMap<RuleClass, usize> {
    let mut out = BTreeMap::new();
    for t in plan.tables() {
        for c in &t.chains {
            for r in &c.rules {
                let class = RuleClass {
                    table: t.family,
                    chain: chain_kind(c),
                    kind: kind(r),
                };
                *out.entry(class).or_insert(0) += 1;
            }
        }
    }
    out
}

/// What `more` has that `fewer` has not, per class (classes whose count
/// did not change are left out; a class that shrank counts negative).
pub fn added(
    fewer: &BTreeMap<RuleClass, usize>,
    more: &BTreeMap<RuleClass, usize>,
) -> BTreeMap<RuleClass, i64> {
    let mut out = BTreeMap::new();
    for class in fewer.keys().chain(more.keys()) {
        let count = |m: &BTreeMap<RuleClass, usize>| {
            i64::try_from(m.get(class).copied().unwrap_or(0)).unwrap_or(i64::MAX)
        };
        let d = count(more) - count(fewer);
        if d != 0 {
            out.insert(class.clone(), d);
        }
    }
    out
}

fn chain_kind(c: &ChainPlan) -> String {
    match &c.profile {
        Some(p) => match c.name.strip_prefix(p.as_str()) {
            Some(rest) => format!("<p>{rest}"),
            None => c.name.clone(),
        },
        None => c.name.clone(),
    }
}

fn kind(r: &RulePlan) -> &'static str {
    if droplog::is_suppressor(r) {
        return "log-budget";
    }
    if r.log.is_some() {
        return "logged";
    }
    match r.verdict {
        Verdict::Accept => "accept",
        Verdict::Drop => "drop",
        Verdict::Reject(_) => "reject",
        Verdict::Jump(_) => "jump",
        Verdict::Masquerade => "masquerade",
        Verdict::Return => "return",
        Verdict::Vmap { .. } => "vmap",
    }
}

#[cfg(test)]
#[path = "census_tests.rs"]
mod tests;
