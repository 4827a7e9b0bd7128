//! Rules compared by content, and chain headers, in `nft` syntax.

use std::collections::HashMap;

use super::{DriftKind, DriftObject, Out};
use crate::nft::{LiveBase, fingerprint, nft_syntax};
use crate::plan::render::rule_text;
use crate::plan::{BaseChain, ChainPlan, Hook, TableFamily, TablePlan};

/// One step of the alignment of planned rules with live rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Planned rule `i` is live rule `j`.
    Same(usize, usize),
    /// Planned rule `i` has no live counterpart.
    Missing(usize),
    /// Live rule `j` has no planned counterpart.
    Extra(usize),
}

/// The longest common subsequence of `planned` and `live`, as steps: one
/// inserted or deleted rule is one step, whatever its position.
fn align(planned: &[String], live: &[&str]) -> Vec<Step> {
    let (n, m) = (planned.len(), live.len());
    // lcs[i][j]: longest common subsequence of planned[i..] and live[j..].
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if planned[i] == live[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut steps) = (0, 0, Vec::with_capacity(n.max(m)));
    while i < n || j < m {
        if i < n && j < m && planned[i] == live[j] {
            steps.push(Step::Same(i, j));
            i += 1;
            j += 1;
        } else if j < m && (i == n || lcs[i][j + 1] >= lcs[i + 1][j]) {
            steps.push(Step::Extra(j));
            j += 1;
        } else {
            steps.push(Step::Missing(i));
            i += 1;
        }
    }
    steps
}

/// A chain's planned rules as read-back will show them, or the first
/// rule that cannot be encoded (its index and why).
pub(super) type ChainTexts = Result<Vec<String>, (usize, String)>;

/// [`ChainTexts`] of `c`.
pub(super) fn chain_texts(family: TableFamily, c: &ChainPlan) -> ChainTexts {
    c.rules
        .iter()
        .enumerate()
        .map(|(i, r)| fingerprint(family, &c.name, r).map_err(|e| (i, e.to_string())))
        .collect()
}

/// Rules compared by content: an inserted rule is one `extra`, a deleted
/// one one `missing`, a rule replaced in place one `changed`; each shown in
/// `nft` syntax.
pub(super) fn diff_rules(
    c: &ChainPlan,
    planned: &ChainTexts,
    live: &[&str],
    known: &KnownRules<'_>,
    out: &mut Out,
) {
    let planned = match planned {
        Ok(p) => p,
        Err((i, e)) => {
            out.push(
                DriftKind::Changed,
                DriftObject::Rule,
                format!("chain {} rule {}", c.name, i + 1),
                format!(
                    "cannot encode planned rule `{}`: {e}",
                    rule_text(&c.rules[*i])
                ),
            );
            return;
        }
    };
    let steps = align(planned, live);
    let mut k = 0;
    while k < steps.len() {
        // A run of missing and extra rules between two rules in place:
        // pair them up as replacements, the rest stays missing or extra.
        let run_end = steps[k..]
            .iter()
            .position(|s| matches!(s, Step::Same(..)))
            .map_or(steps.len(), |p| k + p);
        if run_end == k {
            k += 1;
            continue;
        }
        let run = &steps[k..run_end];
        let missing: Vec<usize> = run
            .iter()
            .filter_map(|s| {
                if let Step::Missing(i) = s {
                    Some(*i)
                } else {
                    None
                }
            })
            .collect();
        let extra: Vec<usize> = run
            .iter()
            .filter_map(|s| {
                if let Step::Extra(j) = s {
                    Some(*j)
                } else {
                    None
                }
            })
            .collect();
        for (&i, &j) in missing.iter().zip(&extra) {
            out.push(
                DriftKind::Changed,
                DriftObject::Rule,
                format!("chain {} rule {}", c.name, j + 1),
                format!(
                    "planned `{}`, live `{}`",
                    rule_text(&c.rules[i]),
                    known.text(live[j])
                ),
            );
        }
        for &i in missing.iter().skip(extra.len()) {
            out.push(
                DriftKind::Missing,
                DriftObject::Rule,
                format!("chain {} rule {}", c.name, i + 1),
                format!("`{}`", rule_text(&c.rules[i])),
            );
        }
        for &j in extra.iter().skip(missing.len()) {
            out.push(
                DriftKind::Extra,
                DriftObject::Rule,
                format!("chain {} rule {}", c.name, j + 1),
                format!("`{}`", known.text(live[j])),
            );
        }
        k = run_end;
    }
}

/// Every rule the plan holds in a table, by its encoding: a live rule that
/// is a planned one (in any chain) prints exactly as the plan prints it,
/// any other is decoded. Built on first use: only drift needs it, and
/// encoding every rule of a large plan twice doubled a verify.
pub(super) struct KnownRules<'a> {
    table: &'a TablePlan,
    map: std::cell::OnceCell<HashMap<String, String>>,
}

impl<'a> KnownRules<'a> {
    pub(super) fn of(t: &'a TablePlan) -> Self {
        Self {
            table: t,
            map: std::cell::OnceCell::new(),
        }
    }

    fn text(&self, live: &str) -> String {
        let map = self.map.get_or_init(|| {
            let mut map = HashMap::new();
            for c in &self.table.chains {
                for r in &c.rules {
                    if let Ok(fp) = fingerprint(self.table.family, &c.name, r) {
                        map.entry(fp).or_insert_with(|| rule_text(r));
                    }
                }
            }
            map
        });
        map.get(live).cloned().unwrap_or_else(|| nft_syntax(live))
    }
}

/// A base chain's header as `nft` writes it.
fn base_text(family: TableFamily, kind: &str, hook: u32, priority: i32, policy: u32) -> String {
    let hook = [
        Hook::Prerouting,
        Hook::Input,
        Hook::Forward,
        Hook::Postrouting,
    ]
    .into_iter()
    .find(|h| h.number() == hook)
    .map_or_else(
        || format!("{hook} (unknown in {})", family.keyword()),
        |h| h.keyword().to_owned(),
    );
    let policy = match i32::try_from(policy) {
        Ok(libc::NF_ACCEPT) => "accept".to_owned(),
        Ok(libc::NF_DROP) => "drop".to_owned(),
        _ => policy.to_string(),
    };
    format!("type {kind} hook {hook} priority {priority}; policy {policy};")
}

pub(super) fn planned_base_text(family: TableFamily, b: Option<&BaseChain>) -> String {
    match b {
        Some(b) => base_text(
            family,
            b.kind.keyword(),
            b.hook.number(),
            b.priority,
            libc::NF_ACCEPT as u32,
        ),
        None => "a regular chain (no hook)".to_owned(),
    }
}

pub(super) fn live_base_text(family: TableFamily, b: Option<&LiveBase>) -> String {
    match b {
        Some(b) => base_text(family, &b.kind, b.hook, b.priority, b.policy),
        None => "a regular chain (no hook)".to_owned(),
    }
}
