//! Apply a plan, delete corral's tables, refresh set elements — each as
//! exactly one transaction.

use std::collections::BTreeSet;

use nftnl_sys as sys;

use super::NftError;
use super::batch::{Batch, Finished, Op};
use super::expr::build_rule;
use super::obj::{Chain, Table, cstr};
use super::set::{
    definition, keyed_definition, map_definition, queue_elements, queue_keyed_elements,
    queue_learned, queue_map_elements,
};
use super::socket::NlSocket;
use crate::plan::eval::LearnedAddr;
use crate::plan::{
    AddrFamily, AddrRange, ChainPlan, HostPlan, KeyValue, KeyedKind, KeyedSetPlan, RulePlan,
    SetKind, TABLE_NAME, TableFamily, TablePlan, Verdict,
};

/// What one transaction carried.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Object messages in the transaction (begin/end not counted).
    pub messages: usize,
    /// Bytes sent in the single `sendmsg`.
    pub bytes: usize,
}

/// A deliberate error, for fault tests: the kernel must reject the whole
/// transaction and leave the previous ruleset in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Append, after everything else, a rule jumping to a chain that does
    /// not exist.
    JumpToMissingChain,
}

fn table_obj(family: TableFamily) -> Result<Table, NftError> {
    let mut t = Table::new()?;
    t.set_str(sys::NFTNL_TABLE_NAME, &cstr(TABLE_NAME)?);
    t.set_u32(sys::NFTNL_TABLE_FAMILY, u32::from(family.nfproto()));
    Ok(t)
}

/// `add table` then `delete table`: removes the table whether or not it
/// existed, without failing the transaction when it did not.
fn queue_delete(b: &mut Batch, family: TableFamily) -> Result<(), NftError> {
    let t = table_obj(family)?;
    let name = format!("table {} {TABLE_NAME}", family.keyword());
    b.table(Op::Add, family.nfproto(), &t, format!("adding {name}"));
    b.table(Op::Del, family.nfproto(), &t, format!("deleting {name}"));
    Ok(())
}

fn chain_obj(family: TableFamily, c: &ChainPlan) -> Result<Chain, NftError> {
    let mut ch = Chain::new()?;
    ch.set_str(sys::NFTNL_CHAIN_TABLE, &cstr(TABLE_NAME)?);
    ch.set_str(sys::NFTNL_CHAIN_NAME, &cstr(&c.name)?);
    ch.set_u32(sys::NFTNL_CHAIN_FAMILY, u32::from(family.nfproto()));
    if let Some(base) = &c.base {
        ch.set_u32(sys::NFTNL_CHAIN_HOOKNUM, base.hook.number());
        ch.set_s32(sys::NFTNL_CHAIN_PRIO, base.priority);
        ch.set_str(sys::NFTNL_CHAIN_TYPE, &cstr(base.kind.keyword())?);
        ch.set_u32(sys::NFTNL_CHAIN_POLICY, libc::NF_ACCEPT as u32);
    }
    Ok(ch)
}

/// Elements of the gateway resolver's dynamic sets to carry into a new
/// ruleset, by set name, each with the milliseconds it has left.
pub type Learned = std::collections::BTreeMap<String, Vec<(LearnedAddr, u64)>>;

/// The dynamic sets' elements of a live read-back.
pub fn learned(live: &super::LiveState) -> Learned {
    live.table(TableFamily::Inet)
        .map(|t| {
            t.sets
                .iter()
                .filter(|s| s.flags & libc::NFT_SET_INTERVAL as u32 == 0)
                .map(|s| (s.name.clone(), s.learned()))
                .collect()
        })
        .unwrap_or_default()
}

fn queue_table(
    b: &mut Batch,
    t: &TablePlan,
    next_set_id: &mut u32,
    keep: &Learned,
) -> Result<(), NftError> {
    let fam = t.family.nfproto();
    let kw = t.family.keyword();
    b.table(
        Op::Add,
        fam,
        &table_obj(t.family)?,
        format!("adding table {kw} {TABLE_NAME}"),
    );
    for s in &t.sets {
        *next_set_id += 1;
        b.set(
            fam,
            &definition(t.family, s, *next_set_id)?,
            format!("adding set {}", s.name),
        );
        if s.kind == SetKind::Interval {
            queue_elements(b, Op::Add, t.family, s, &s.elements)?;
        } else if let Some(kept) = keep.get(&s.name) {
            let mine: Vec<(LearnedAddr, u64)> = kept
                .iter()
                .copied()
                .filter(|(e, _)| {
                    e.addr.family() == s.family
                        && e.asker.is_some() == s.pinned
                        && e.asker.is_none_or(|a| AddrFamily::of(a) == s.family)
                })
                .collect();
            queue_learned(b, t.family, s, &mine)?;
        }
    }
    for s in &t.keyed_sets {
        *next_set_id += 1;
        b.set(
            fam,
            &keyed_definition(t.family, s, *next_set_id)?,
            format!("adding set {}", s.name),
        );
        if s.kind == KeyedKind::Static {
            queue_keyed_elements(b, Op::Add, t.family, s, &s.elements)?;
        }
    }
    for c in &t.chains {
        b.chain(
            fam,
            &chain_obj(t.family, c)?,
            format!("adding chain {kw} {}", c.name),
        );
    }
    // After the chains: an element's verdict names its chain.
    for m in &t.maps {
        *next_set_id += 1;
        b.set(
            fam,
            &map_definition(t.family, m, *next_set_id)?,
            format!("adding map {}", m.name),
        );
        queue_map_elements(b, t.family, m)?;
    }
    for c in &t.chains {
        for (i, r) in c.rules.iter().enumerate() {
            let rule = build_rule(t.family, TABLE_NAME, &c.name, r)?;
            b.rule(
                fam,
                &rule,
                format!("adding rule {} of chain {kw} {}", i + 1, c.name),
            );
        }
    }
    Ok(())
}

fn apply_batch(
    plan: &HostPlan,
    fault: Option<Fault>,
    keep: &Learned,
) -> Result<Finished, NftError> {
    let mut b = Batch::new();
    for t in plan.tables() {
        queue_delete(&mut b, t.family)?;
    }
    let mut ids = 0;
    for t in plan.tables() {
        queue_table(&mut b, t, &mut ids, keep)?;
    }
    if let Some(Fault::JumpToMissingChain) = fault
        && let Some(c) = plan.inet.chains.first()
    {
        let bad = RulePlan::counted(vec![], Verdict::Jump("corral-no-such-chain".to_owned()));
        let rule = build_rule(TableFamily::Inet, TABLE_NAME, &c.name, &bad)?;
        b.rule(
            TableFamily::Inet.nfproto(),
            &rule,
            format!("adding injected fault rule to chain {}", c.name),
        );
    }
    Ok(b.finish())
}

pub(crate) fn send(f: &Finished) -> Result<BatchStats, NftError> {
    NlSocket::open()?.commit(f)?;
    Ok(BatchStats {
        messages: f.messages(),
        bytes: f.bytes().len(),
    })
}

/// Replace both corral tables with the plan's, in one transaction, in the
/// current thread's network namespace. On any error the kernel aborts the
/// whole transaction and the previous ruleset stays in force.
pub fn apply(plan: &HostPlan) -> Result<BatchStats, NftError> {
    send(&apply_batch(plan, None, &Learned::new())?)
}

/// [`apply`], adding `keep` (elements the gateway resolver learned, each
/// with the lifetime it has left) to the new ruleset's dynamic sets of the
/// same name in the same transaction, so there is never a moment without
/// them. Which elements may be kept is the caller's rule
/// (`host::carry`); names of sets the plan does not have are ignored.
pub fn apply_keeping(plan: &HostPlan, keep: &Learned) -> Result<BatchStats, NftError> {
    send(&apply_batch(plan, None, keep)?)
}

/// [`apply`] with a deliberate error the kernel must reject (fault tests).
pub fn apply_with_fault(plan: &HostPlan, fault: Fault) -> Result<BatchStats, NftError> {
    send(&apply_batch(plan, Some(fault), &Learned::new())?)
}

/// Delete both corral tables (whether or not they exist) in one
/// transaction. Other tables are never touched.
pub fn delete_tables() -> Result<BatchStats, NftError> {
    let mut b = Batch::new();
    for family in [TableFamily::Inet, TableFamily::Bridge] {
        queue_delete(&mut b, family)?;
    }
    send(&b.finish())
}

/// Delete corral's table of `family` (whether or not it exists), leaving
/// the other one: what a tamperer's `nft delete table inet corral` does,
/// for the drill and the watch's tests.
pub fn delete_table(family: TableFamily) -> Result<BatchStats, NftError> {
    let mut b = Batch::new();
    queue_delete(&mut b, family)?;
    send(&b.finish())
}

/// Adds `add` to and removes `remove` from the live keyed set `set` of
/// `family`, in one transaction (run-time sets such as the quarantine,
/// whose elements corral finds on the host rather than in the plan). An
/// element to remove must be present and one to add absent, or the kernel
/// refuses the whole transaction and nothing changes.
pub fn update_keyed(
    family: TableFamily,
    set: &KeyedSetPlan,
    add: &[Vec<KeyValue>],
    remove: &[Vec<KeyValue>],
) -> Result<Option<BatchStats>, NftError> {
    let mut b = Batch::new();
    queue_keyed_elements(&mut b, Op::Del, family, set, remove)?;
    queue_keyed_elements(&mut b, Op::Add, family, set, add)?;
    if b.len() == 0 {
        return Ok(None);
    }
    send(&b.finish()).map(Some)
}

/// What a refresh changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RefreshReport {
    /// Sets whose elements changed.
    pub sets: Vec<String>,
    /// Ranges added, over all sets.
    pub added: usize,
    /// Ranges removed, over all sets.
    pub removed: usize,
    /// The transaction sent (`None` when nothing changed).
    pub batch: Option<BatchStats>,
}

/// The plan with every set emptied (and the host networks they came from
/// forgotten): what must be equal for a refresh.
fn skeleton(plan: &HostPlan) -> HostPlan {
    let mut p = plan.clone();
    p.host_networks = None;
    for t in [&mut p.inet, &mut p.bridge] {
        for s in &mut t.sets {
            s.elements.clear();
        }
        for s in &mut t.keyed_sets {
            s.elements.clear();
        }
    }
    p.bindings.clear();
    // Which allow entries feed which sets is for explaining, not kernel
    // state: entries may come and go while the rules stay the same (a
    // narrowed list whose other entries keep the set in use).
    p.origins.clear();
    // The names feeding the learned sets stay: only an apply restarts the
    // gateway resolver with new names, so a refresh must not record them.
    p
}

/// Update set elements in place from `old` to `new` in one transaction:
/// removed ranges deleted, new ranges added, no rule or chain rebuilt (rule
/// handles and established flows are untouched). Refused when the plans
/// differ in anything but set elements.
pub fn refresh_sets(old: &HostPlan, new: &HostPlan) -> Result<RefreshReport, NftError> {
    if skeleton(old) != skeleton(new) {
        return Err(NftError::NotRefreshable(
            "the sets, chains or rules differ, or the names feeding a learned set do (the gateway resolver takes those only at apply)".to_owned(),
        ));
    }
    let mut report = RefreshReport::default();
    let mut b = Batch::new();
    for (ot, nt) in [(&old.inet, &new.inet), (&old.bridge, &new.bridge)] {
        for (os, ns) in ot.sets.iter().zip(&nt.sets) {
            if ns.kind != SetKind::Interval || os.elements == ns.elements {
                continue;
            }
            let before: BTreeSet<AddrRange> = os.elements.iter().copied().collect();
            let after: BTreeSet<AddrRange> = ns.elements.iter().copied().collect();
            let removed: Vec<AddrRange> = before.difference(&after).copied().collect();
            let added: Vec<AddrRange> = after.difference(&before).copied().collect();
            // Deletions first: a range may be replaced by one sharing its start.
            queue_elements(&mut b, Op::Del, nt.family, ns, &removed)?;
            queue_elements(&mut b, Op::Add, nt.family, ns, &added)?;
            report.sets.push(ns.name.clone());
            report.added += added.len();
            report.removed += removed.len();
        }
        for (os, ns) in ot.keyed_sets.iter().zip(&nt.keyed_sets) {
            if ns.kind != KeyedKind::Static || os.elements == ns.elements {
                continue;
            }
            let before: BTreeSet<&Vec<KeyValue>> = os.elements.iter().collect();
            let after: BTreeSet<&Vec<KeyValue>> = ns.elements.iter().collect();
            let removed: Vec<Vec<KeyValue>> =
                before.difference(&after).map(|e| (*e).clone()).collect();
            let added: Vec<Vec<KeyValue>> =
                after.difference(&before).map(|e| (*e).clone()).collect();
            queue_keyed_elements(&mut b, Op::Del, nt.family, ns, &removed)?;
            queue_keyed_elements(&mut b, Op::Add, nt.family, ns, &added)?;
            report.sets.push(ns.name.clone());
            report.added += added.len();
            report.removed += removed.len();
        }
    }
    if b.len() > 0 {
        report.batch = Some(send(&b.finish())?);
    }
    Ok(report)
}
