//! Drift: how the live nftables state differs from the plan.
//!
//! [`diff`] compares a [`HostPlan`] with a [`LiveState`] read back over
//! netlink and returns one typed item per difference, each saying what and
//! where. An empty list means the kernel enforces exactly the plan.
//! Elements of dynamic (`<profile>-dnsN-…`) sets are filled at run time by
//! the gateway resolver and are not compared with the plan; each one is
//! checked instead against the reserved ranges, the host's networks and the
//! profile's deny list (a learned element there is drift: something other
//! than the filtered resolver put it in, or the resolver let it through).
//! A table with flags (`dormant` switches every chain of it off) is drift.

mod rules;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

use serde::Serialize;

use crate::nft::{LiveBase, LiveSet, LiveState, LiveTable};
use ipnet::IpNet;

use crate::plan::render::range_text;
use crate::plan::reserved;
use crate::plan::{
    AddrRange, BaseChain, HostPlan, KeyedKind, KeyedSetPlan, Match, SetKind, SetPlan, TableFamily,
    TablePlan, VmapPlan,
};
use rules::{ChainTexts, KnownRules, chain_texts, diff_rules, live_base_text, planned_base_text};

/// Missing from the kernel, present but not planned, or different.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftKind {
    /// Planned but absent.
    Missing,
    /// Present but not planned.
    Extra,
    /// Present and planned, but different.
    Changed,
}

/// Which kind of object drifted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DriftObject {
    /// A whole table.
    Table,
    /// A chain (or its hook/priority/policy).
    Chain,
    /// A rule at a position of a chain.
    Rule,
    /// A set (or its type/flags).
    Set,
    /// One set element (range).
    Element,
}

/// One difference between plan and kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drift {
    /// Missing, extra or changed.
    pub kind: DriftKind,
    /// What drifted.
    pub object: DriftObject,
    /// Table family.
    pub family: TableFamily,
    /// Where: `chain dev-out rule 3`, `set dev-allow4`, ...
    pub location: String,
    /// What exactly: planned vs live text, the element, ...
    pub detail: String,
}

impl fmt::Display for Drift {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            DriftKind::Missing => "is missing",
            DriftKind::Extra => "is not in the plan",
            DriftKind::Changed => "differs from the plan",
        };
        if self.location.starts_with("table ") {
            write!(f, "{} {what}: {}", self.location, self.detail)
        } else {
            write!(
                f,
                "{} in table {} corral {what}: {}",
                self.location,
                self.family.keyword(),
                self.detail
            )
        }
    }
}

struct Out {
    family: TableFamily,
    items: Vec<Drift>,
}

impl Out {
    fn push(&mut self, kind: DriftKind, object: DriftObject, location: String, detail: String) {
        self.items.push(Drift {
            kind,
            object,
            family: self.family,
            location,
            detail,
        });
    }
}

/// Every planned rule encoded as read-back shows it, by table and chain
/// in plan order: the costly half of [`diff`] (one libnftnl rule built and
/// printed per planned rule), which needs no live state, so a caller can
/// compute it while the read-back runs ([`diff_with`]).
#[derive(Debug)]
pub struct PlannedTexts(Vec<Vec<ChainTexts>>);

impl PlannedTexts {
    /// The texts of every chain of `plan`.
    pub fn of(plan: &HostPlan) -> Self {
        PlannedTexts(
            plan.tables()
                .into_iter()
                .map(|t| t.chains.iter().map(|c| chain_texts(t.family, c)).collect())
                .collect(),
        )
    }
}

/// Every difference between `plan` and `live`, tables in plan order.
pub fn diff(plan: &HostPlan, live: &LiveState) -> Vec<Drift> {
    diff_with(plan, live, &PlannedTexts::of(plan))
}

/// [`diff`] with the planned rules' texts computed beforehand
/// ([`PlannedTexts::of`] of the same `plan`).
pub fn diff_with(plan: &HostPlan, live: &LiveState, texts: &PlannedTexts) -> Vec<Drift> {
    let mut all = Vec::new();
    for (ti, t) in plan.tables().into_iter().enumerate() {
        let mut out = Out {
            family: t.family,
            items: Vec::new(),
        };
        match live.table(t.family) {
            None => out.push(
                DriftKind::Missing,
                DriftObject::Table,
                format!("table {} corral", t.family.keyword()),
                "the table does not exist; apply the plan".to_owned(),
            ),
            Some(lt) => {
                if lt.flags != 0 {
                    out.push(
                        DriftKind::Changed,
                        DriftObject::Table,
                        format!("table {} corral", t.family.keyword()),
                        format!(
                            "the table has flags {:#x}{}; apply the plan again",
                            lt.flags,
                            if lt.flags & 1 != 0 {
                                " (dormant: none of its chains is evaluated, nothing is enforced)"
                            } else {
                                ""
                            }
                        ),
                    );
                }
                let no_texts = Vec::new();
                let texts = texts.0.get(ti).unwrap_or(&no_texts);
                diff_table(plan, t, lt, texts, &mut out);
            }
        }
        all.extend(out.items);
    }
    all
}

fn diff_table(plan: &HostPlan, t: &TablePlan, lt: &LiveTable, texts: &[ChainTexts], out: &mut Out) {
    let known = KnownRules::of(t);
    // By name, once: a table of hundreds of profiles holds thousands of
    // sets and chains.
    let live_sets: HashMap<&str, &LiveSet> = lt.sets.iter().map(|s| (s.name.as_str(), s)).collect();
    let live_chains: HashMap<&str, &crate::nft::LiveChain> =
        lt.chains.iter().map(|c| (c.name.as_str(), c)).collect();
    let planned_sets: HashSet<&str> = t
        .sets
        .iter()
        .map(|s| s.name.as_str())
        .chain(t.keyed_sets.iter().map(|s| s.name.as_str()))
        .chain(t.maps.iter().map(|m| m.name.as_str()))
        .collect();
    let planned_chains: HashSet<&str> = t.chains.iter().map(|c| c.name.as_str()).collect();
    for s in &t.sets {
        match live_sets.get(s.name.as_str()).copied() {
            None => out.push(
                DriftKind::Missing,
                DriftObject::Set,
                format!("set {}", s.name),
                "the set does not exist".to_owned(),
            ),
            Some(ls) => {
                diff_set(s, ls, out);
                diff_userdata(t, ls, out);
                if s.kind == SetKind::Dynamic {
                    refused_learned(plan, s, ls, out);
                }
            }
        }
    }
    for s in &t.keyed_sets {
        match live_sets.get(s.name.as_str()).copied() {
            None => out.push(
                DriftKind::Missing,
                DriftObject::Set,
                format!("set {}", s.name),
                "the set does not exist".to_owned(),
            ),
            Some(ls) => {
                diff_keyed_set(s, ls, out);
                diff_userdata(t, ls, out);
            }
        }
    }
    for m in &t.maps {
        match live_sets.get(m.name.as_str()).copied() {
            None => out.push(
                DriftKind::Missing,
                DriftObject::Set,
                format!("map {}", m.name),
                "the verdict map does not exist".to_owned(),
            ),
            Some(ls) => {
                diff_map(m, ls, out);
                diff_userdata(t, ls, out);
            }
        }
    }
    for ls in &lt.sets {
        let planned = planned_sets.contains(ls.name.as_str());
        if !planned {
            out.push(
                DriftKind::Extra,
                DriftObject::Set,
                format!("set {}", ls.name),
                "the set is not in the plan".to_owned(),
            );
        }
    }
    for (ci, c) in t.chains.iter().enumerate() {
        match live_chains.get(c.name.as_str()).copied() {
            None => out.push(
                DriftKind::Missing,
                DriftObject::Chain,
                format!("chain {}", c.name),
                "the chain does not exist".to_owned(),
            ),
            Some(lc) => {
                if !base_matches(c.base.as_ref(), lc.base.as_ref()) {
                    out.push(
                        DriftKind::Changed,
                        DriftObject::Chain,
                        format!("chain {}", c.name),
                        format!(
                            "planned `{}`, live `{}`{}",
                            planned_base_text(t.family, c.base.as_ref()),
                            live_base_text(t.family, lc.base.as_ref()),
                            skipped_note(t.family, lc.base.as_ref())
                        ),
                    );
                }
                let live: Vec<&str> = lc.rules.iter().map(|r| r.text.as_str()).collect();
                match texts.get(ci) {
                    Some(planned) => diff_rules(c, planned, &live, &known, out),
                    None => diff_rules(c, &chain_texts(t.family, c), &live, &known, out),
                }
            }
        }
    }
    for lc in &lt.chains {
        if !planned_chains.contains(lc.name.as_str()) {
            out.push(
                DriftKind::Extra,
                DriftObject::Chain,
                format!("chain {}", lc.name),
                format!("the chain is not in the plan ({} rules)", lc.rules.len()),
            );
        }
    }
}

/// A set whose user data is not corral's cannot be listed faithfully by
/// `nft` (an `nft` 1.0.6 aborts on a concatenation with a raw part and no
/// description, and with it every listing of the host).
fn diff_userdata(t: &TablePlan, ls: &LiveSet, out: &mut Out) {
    let Some(Ok(want)) = crate::nft::set_userdata(t, &ls.name) else {
        return;
    };
    if ls.userdata != want {
        out.push(
            DriftKind::Changed,
            DriftObject::Set,
            format!("set {}", ls.name),
            format!(
                "the set's key description for nft (user data) is {}, planned {}; `nft list` may misprint the set or abort; apply the plan again",
                hex(&ls.userdata),
                hex(&want)
            ),
        );
    }
}

fn hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "absent".to_owned();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Why a bridge base chain at the live priority is not live: at or above
/// br_netfilter's lowest hook it runs after br_netfilter has taken IP
/// frames to the IP hooks, and is skipped for them.
fn skipped_note(family: TableFamily, live: Option<&LiveBase>) -> String {
    match (family, live) {
        (TableFamily::Bridge, Some(l))
            if l.priority >= crate::plan::bridge::BR_NETFILTER_LOWEST =>
        {
            format!(
                "; at priority {} the chain runs at or after br_netfilter's hooks and is skipped for the frames they divert",
                l.priority
            )
        }
        _ => String::new(),
    }
}

fn diff_keyed_set(s: &KeyedSetPlan, ls: &LiveSet, out: &mut Out) {
    let want_flags = crate::nft::keyed_flags(s.kind);
    let mask = (libc::NFT_SET_INTERVAL | libc::NFT_SET_TIMEOUT | libc::NFT_SET_EVAL) as u32;
    let want_timeout = match s.kind {
        KeyedKind::Meter {
            timeout: Some(t), ..
        } => u64::try_from(t.as_millis()).unwrap_or(u64::MAX),
        _ => 0,
    };
    if ls.flags & mask != want_flags || ls.key_len != s.key_len() || ls.timeout_ms != want_timeout {
        out.push(
            DriftKind::Changed,
            DriftObject::Set,
            format!("set {}", s.name),
            format!(
                "planned key of {} bytes, flags {want_flags:#x}, timeout {want_timeout} ms; live key of {} bytes, flags {:#x}, timeout {} ms",
                s.key_len(),
                ls.key_len,
                ls.flags & mask,
                ls.timeout_ms
            ),
        );
        return;
    }
    if s.kind != KeyedKind::Static {
        return;
    }
    let planned: BTreeSet<Vec<u8>> = s.elements.iter().map(|e| s.key_bytes(e)).collect();
    let present: BTreeSet<Vec<u8>> = ls.keys.iter().cloned().collect();
    for e in &s.elements {
        if !present.contains(&s.key_bytes(e)) {
            out.push(
                DriftKind::Missing,
                DriftObject::Element,
                format!("set {}", s.name),
                crate::plan::render::keyed_element_text(s, e),
            );
        }
    }
    for k in present.difference(&planned) {
        out.push(
            DriftKind::Extra,
            DriftObject::Element,
            format!("set {}", s.name),
            k.iter().map(|b| format!("{b:02x}")).collect(),
        );
    }
}

/// A verdict map's elements as read back: (key, interval end, chain).
pub(crate) fn map_jumps(m: &VmapPlan) -> Vec<(Vec<u8>, bool, String)> {
    let mut v: Vec<(Vec<u8>, bool, String)> = crate::nft::map_wire_elements(&m.elements)
        .into_iter()
        .map(|(k, f, c)| (k, f.is_some(), c.unwrap_or_default()))
        .collect();
    v.sort();
    v
}

fn jump_text(j: &(Vec<u8>, bool, String)) -> String {
    let key: String = j.0.iter().map(|b| format!("{b:02x}")).collect();
    if j.1 {
        format!("{key} (interval end)")
    } else {
        format!("{key} : jump {}", j.2)
    }
}

fn diff_map(m: &VmapPlan, ls: &LiveSet, out: &mut Out) {
    let want = crate::nft::map_flags(m.key);
    let mask = (libc::NFT_SET_MAP | libc::NFT_SET_INTERVAL | libc::NFT_SET_TIMEOUT) as u32;
    if ls.flags & mask != want || ls.key_len != m.key.len() {
        out.push(
            DriftKind::Changed,
            DriftObject::Set,
            format!("map {}", m.name),
            format!(
                "planned a verdict map with a key of {} bytes, flags {want:#x}; live key of {} bytes, flags {:#x}",
                m.key.len(),
                ls.key_len,
                ls.flags & mask
            ),
        );
        return;
    }
    let planned: BTreeSet<(Vec<u8>, bool, String)> = map_jumps(m).into_iter().collect();
    // `nft -f` opens a fresh interval map with a lone end at the zero key.
    let present: BTreeSet<(Vec<u8>, bool, String)> = ls
        .jumps
        .iter()
        .filter(|(k, end, _)| !(*end && k.iter().all(|b| *b == 0)))
        .cloned()
        .collect();
    for e in &m.elements {
        let wire = map_jumps(&VmapPlan {
            name: m.name.clone(),
            key: m.key,
            elements: vec![e.clone()],
        });
        if wire.iter().any(|w| !present.contains(w)) {
            out.push(
                DriftKind::Missing,
                DriftObject::Element,
                format!("map {}", m.name),
                crate::plan::render::map_element_text(e),
            );
        }
    }
    for j in present.difference(&planned) {
        out.push(
            DriftKind::Extra,
            DriftObject::Element,
            format!("map {}", m.name),
            jump_text(j),
        );
    }
}

fn base_matches(plan: Option<&BaseChain>, live: Option<&LiveBase>) -> bool {
    match (plan, live) {
        (None, None) => true,
        (Some(p), Some(l)) => {
            p.kind.keyword() == l.kind
                && p.hook.number() == l.hook
                && p.priority == l.priority
                && l.policy == libc::NF_ACCEPT as u32
        }
        _ => false,
    }
}

fn diff_set(s: &SetPlan, ls: &LiveSet, out: &mut Out) {
    let (family, flags, live) = (ls.family, ls.flags, &ls.elements);
    let want_timeout = s
        .timeout
        .map_or(0, |t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX));
    if ls.timeout_ms != want_timeout {
        out.push(
            DriftKind::Changed,
            DriftObject::Set,
            format!("set {}", s.name),
            format!(
                "planned timeout {want_timeout} ms, live {} ms",
                ls.timeout_ms
            ),
        );
    }
    let want_size = s.size.unwrap_or(0);
    if ls.size != want_size {
        out.push(
            DriftKind::Changed,
            DriftObject::Set,
            format!("set {}", s.name),
            format!("planned size {want_size}, live {}", ls.size),
        );
    }
    let want_flag = match s.kind {
        SetKind::Interval => libc::NFT_SET_INTERVAL as u32,
        SetKind::Dynamic => libc::NFT_SET_TIMEOUT as u32,
    };
    let mask = (libc::NFT_SET_INTERVAL | libc::NFT_SET_TIMEOUT) as u32;
    if family != Some(s.family) || flags & mask != want_flag || ls.pinned != s.pinned {
        let pinned = |p: bool| if p { " pinned" } else { "" };
        out.push(
            DriftKind::Changed,
            DriftObject::Set,
            format!("set {}", s.name),
            format!(
                "planned {:?} {:?}{}, live key {family:?}{} flags {flags:#x}",
                s.family,
                s.kind,
                pinned(s.pinned),
                pinned(ls.pinned)
            ),
        );
        return;
    }
    if s.kind == SetKind::Dynamic {
        return;
    }
    let planned: BTreeSet<&AddrRange> = s.elements.iter().collect();
    let present: BTreeSet<&AddrRange> = live.iter().collect();
    for r in planned.difference(&present) {
        out.push(
            DriftKind::Missing,
            DriftObject::Element,
            format!("set {}", s.name),
            range_text(r),
        );
    }
    for r in present.difference(&planned) {
        out.push(
            DriftKind::Extra,
            DriftObject::Element,
            format!("set {}", s.name),
            range_text(r),
        );
    }
}

/// The deny list of the profile whose rules look `set` up.
fn deny_of(plan: &HostPlan, set: &str) -> Vec<IpNet> {
    let profile = plan.inet.chains.iter().find(|c| {
        c.rules.iter().any(|r| {
            r.matches.iter().any(|m| match m {
                Match::DaddrInSet(_, n) | Match::InSet { set: n, .. } => n == set,
                _ => false,
            })
        })
    });
    let Some(profile) = profile.and_then(|c| c.profile.as_deref()) else {
        return Vec::new();
    };
    plan.inet
        .sets
        .iter()
        .filter(|s| s.name == format!("{profile}-deny4") || s.name == format!("{profile}-deny6"))
        .flat_map(|s| s.elements.iter().filter_map(AddrRange::as_net))
        .collect()
}

fn refused_learned(plan: &HostPlan, s: &SetPlan, ls: &LiveSet, out: &mut Out) {
    let deny = deny_of(plan, &s.name);
    for r in &ls.elements {
        if let Some(why) = reserved::refusal(r.start, plan.host_nets(), &deny) {
            out.push(
                DriftKind::Extra,
                DriftObject::Element,
                format!("set {}", s.name),
                format!(
                    "learned {} must never be reachable by a name: {why}",
                    range_text(r)
                ),
            );
        }
    }
}
