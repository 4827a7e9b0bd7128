//! Apply and read back inside anonymous network namespaces: the read-back
//! matches the plan exactly, twice in a row, at 50k elements, and the
//! rendered `nft -f` text loads into exactly the same ruleset.

// Tests: a failed step should abort the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use corral_egress::drift::diff;
use corral_egress::nft::{self, apply, read_live};
use corral_egress::plan::{HostPlan, PortBinding, TableFamily};
use nft_support::{allowlist_plan, in_netns, nft, sample_plan, sample_profiles};

#[test]
fn apply_twice_reads_back_without_drift() {
    in_netns(|| {
        let plan = sample_plan(&["192.0.2.10", "2001:db8::10"]);
        assert!(
            read_live().unwrap().is_empty(),
            "fresh namespace has no corral tables"
        );
        for round in 1..=2 {
            let stats = apply(&plan).unwrap();
            assert!(stats.messages > 50, "{stats:?}");
            let live = read_live().unwrap();
            assert_eq!(live.tables.len(), 2);
            let d = diff(&plan, &live);
            assert!(d.is_empty(), "round {round}: {d:#?}");
            let inet = live.table(TableFamily::Inet).unwrap();
            let rules: usize = inet.chains.iter().map(|c| c.rules.len()).sum();
            let planned: usize = plan.inet.chains.iter().map(|c| c.rules.len()).sum();
            assert_eq!(rules, planned);
        }
    });
}

#[test]
fn fifty_thousand_interval_elements_apply_in_one_transaction() {
    in_netns(|| {
        let plan = allowlist_plan(50_000);
        let stats = apply(&plan).unwrap();
        assert!(stats.bytes > 1 << 20, "one big sendmsg: {stats:?}");
        let live = read_live().unwrap();
        let set = live
            .table(TableFamily::Inet)
            .unwrap()
            .set("big-allow4")
            .unwrap();
        assert_eq!(set.elements.len(), 50_000);
        assert!(diff(&plan, &live).is_empty());
    });
}

#[test]
fn rendered_text_loads_with_nft_into_exactly_the_planned_ruleset() {
    in_netns(|| {
        let plan = sample_plan(&["192.0.2.10", "2001:db8::10"]);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plan.nft");
        std::fs::write(&file, plan.render_nft()).unwrap();
        let out = nft(&["-f", file.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "nft -f failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // Loading twice replaces, like apply.
        assert!(nft(&["-f", file.to_str().unwrap()]).status.success());
        let live = read_live().unwrap();
        // What nft loaded from the text reads back exactly as the plan's
        // netlink encoding: same tables, chains, sets, elements, and every
        // rule expression for expression. The two paths say the same thing.
        let d = diff(&plan, &live);
        assert!(d.is_empty(), "{d:#?}");
        // And corral's own apply over it converges to the exact plan.
        nft::apply(&plan).unwrap();
        assert!(diff(&plan, &read_live().unwrap()).is_empty());
    });
}

/// The sample plan with two ports of the IPv6 profile and one of the
/// IPv4-only profile bound.
fn bound_plan() -> HostPlan {
    let set = sample_profiles();
    let dev = set.get("dev").unwrap();
    let web = set.get("web").unwrap();
    let a = PortBinding::allocate(dev, &[]).unwrap();
    let b = PortBinding::allocate(dev, std::slice::from_ref(&a)).unwrap();
    let c = PortBinding::allocate(web, &[]).unwrap();
    sample_plan(&["192.0.2.10", "2001:db8::10"])
        .with_bindings(&set, vec![a, b, c])
        .unwrap()
}

#[test]
fn bindings_read_back_and_load_from_text_exactly() {
    in_netns(|| {
        let plan = bound_plan();
        apply(&plan).unwrap();
        let d = diff(&plan, &read_live().unwrap());
        assert!(d.is_empty(), "{d:#?}");
        // The rendered text, keyed sets and their elements included, loads
        // into the same ruleset.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plan.nft");
        std::fs::write(&file, plan.render_nft()).unwrap();
        let out = nft(&["-f", file.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "nft -f failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let d = diff(&plan, &read_live().unwrap());
        assert!(d.is_empty(), "{d:#?}");
        // Unbinding one port is an element update; the rest stays.
        let set = sample_profiles();
        let fewer = plan
            .with_bindings(&set, plan.bindings[1..].to_vec())
            .unwrap();
        let report = nft::refresh_sets(&plan, &fewer).unwrap();
        assert!(report.removed > 0, "{report:?}");
        let d = diff(&fewer, &read_live().unwrap());
        assert!(d.is_empty(), "{d:#?}");
        // And the old plan now reads as drift: its binding is missing.
        assert!(!diff(&plan, &read_live().unwrap()).is_empty());
    });
}
