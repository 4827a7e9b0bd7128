//! The bridge table's hold on ports corral does not know yet (attached
//! after the last sweep, neither bound nor quarantined): a frame between
//! such ports that carries a profile's addresses — IP source or
//! destination, ARP sender or target — is dropped in the profile's
//! `<p>-ports` chain (logged as `<p>-ports/unbound`).
//!
//! `forward` reaches that chain through two verdict maps keyed by the
//! profiles' subnets (`ports4_by_addr`, `ports6_by_addr`), one lookup per
//! address field: six rules whatever the number of profiles, where it
//! used to jump to every profile's chain in turn. The kernel lacks
//! `meta ibrname`, so the bridge a frame crossed cannot be the key.

use corral_sandbox_core::ProfileSet;

use super::build::chain;
use super::model::{AddrFamily, AddrRange, RulePlan, TablePlan, Verdict};
use super::vmap::{self, MapField, MapKey, MapKeyValue, VmapPlan};
use super::{droplog, guard, names};

/// Adds every profile's `<p>-ports` chain, its drop-log meter and the two
/// maps to `t`; returns the `forward` rules that look the maps up.
pub(super) fn dispatch(t: &mut TablePlan, profiles: &ProfileSet) -> Vec<RulePlan> {
    let mut maps = [AddrFamily::V4, AddrFamily::V6]
        .map(|f| VmapPlan::new(vmap::ports_by_addr(f), MapKey::Addr(f)));
    for p in profiles {
        t.keyed_sets.push(droplog::meter_plan(&p.name));
        // One drop: `forward` reaches the chain only through a map whose
        // key was one of the frame's address fields, found in this
        // profile's subnets (with the protocol check that field needs),
        // so looking the four or six fields up again here (a rule each,
        // doubled by the drop log's twins) only made every profile cost
        // rules. The maps are the per-profile data.
        let drop = vec![RulePlan::counted(vec![], Verdict::Drop)];
        let rules = droplog::tap(&p.name, "ports", "unbound", drop);
        t.chains.push(chain(&names::ports_chain(&p.name), p, rules));
        for net in guard::subnets(p) {
            let i = usize::from(AddrFamily::of(net.addr()) == AddrFamily::V6);
            maps[i].push(
                MapKeyValue::Range(AddrRange::from_net(net)),
                names::ports_chain(&p.name),
            );
        }
    }
    let lookup = |field, map: &VmapPlan| {
        RulePlan::counted(
            vec![],
            Verdict::Vmap {
                field,
                map: map.name.clone(),
            },
        )
    };
    let [v4, v6] = maps;
    let mut rules = Vec::new();
    if !v4.elements.is_empty() {
        rules.extend([
            lookup(MapField::Saddr(AddrFamily::V4), &v4),
            lookup(MapField::Daddr(AddrFamily::V4), &v4),
            lookup(MapField::ArpSaddr, &v4),
            lookup(MapField::ArpDaddr, &v4),
        ]);
    }
    if !v6.elements.is_empty() {
        rules.extend([
            lookup(MapField::Saddr(AddrFamily::V6), &v6),
            lookup(MapField::Daddr(AddrFamily::V6), &v6),
        ]);
    }
    t.maps.extend(
        [v4, v6]
            .into_iter()
            .filter(|m| !m.elements.is_empty())
            .map(|mut m| {
                m.elements.sort();
                m
            }),
    );
    rules
}
