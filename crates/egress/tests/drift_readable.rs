//! Drift on a real kernel reads like `nft`: one rule deleted behind
//! corral's back (mid-chain) is exactly one `missing` rule, one rule
//! inserted is exactly one `extra`, each printed in `nft` syntax and never
//! as register bytecode. `nft` is the tamperer (test-only).

// Tests: a failed step should abort the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use corral_egress::drift::{Drift, DriftKind, DriftObject, diff};
use corral_egress::nft::{apply, read_live};
use corral_egress::plan::TableFamily;
use corral_egress::plan::render::rule_text;
use nft_support::{in_netns, nft, sample_plan};

const CHAIN: &str = "dev-out";

fn handles() -> Vec<u64> {
    let live = read_live().unwrap();
    let chain = live.table(TableFamily::Inet).unwrap().chain(CHAIN).unwrap();
    chain.rules.iter().map(|r| r.handle).collect()
}

fn nft_ok(args: &[&str]) {
    let out = nft(args);
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn only_drift() -> Drift {
    let plan = sample_plan(&["192.0.2.10", "2001:db8::10"]);
    let d = diff(&plan, &read_live().unwrap());
    assert_eq!(d.len(), 1, "exactly one difference: {d:#?}");
    let one = d.into_iter().next().unwrap();
    assert!(
        !one.detail.contains("reg ") && !one.detail.contains('['),
        "printed as bytecode: {one:?}"
    );
    one
}

#[test]
fn one_deleted_or_inserted_rule_is_one_difference_in_nft_syntax() {
    if !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    in_netns(|| {
        let plan = sample_plan(&["192.0.2.10", "2001:db8::10"]);
        apply(&plan).unwrap();
        assert!(diff(&plan, &read_live().unwrap()).is_empty());
        let planned = &plan
            .inet
            .chains
            .iter()
            .find(|c| c.name == CHAIN)
            .unwrap()
            .rules;
        assert!(planned.len() >= 4, "a chain with a middle");

        // Delete the third rule.
        let h = handles();
        nft_ok(&[
            "delete",
            "rule",
            "inet",
            "corral",
            CHAIN,
            "handle",
            &h[2].to_string(),
        ]);
        let d = only_drift();
        assert_eq!(
            (d.kind, d.object, d.location.as_str()),
            (
                DriftKind::Missing,
                DriftObject::Rule,
                "chain dev-out rule 3"
            )
        );
        assert_eq!(d.detail, format!("`{}`", rule_text(&planned[2])));

        // Put everything back, then insert a rule before the second one.
        apply(&plan).unwrap();
        let h = handles();
        nft_ok(&[
            "insert",
            "rule",
            "inet",
            "corral",
            CHAIN,
            "position",
            &h[1].to_string(),
            "ip",
            "daddr",
            "192.0.2.99",
            "tcp",
            "dport",
            "22",
            "counter",
            "accept",
        ]);
        let d = only_drift();
        assert_eq!(
            (d.kind, d.object, d.location.as_str()),
            (DriftKind::Extra, DriftObject::Rule, "chain dev-out rule 2")
        );
        // nft's own encoding of `tcp dport` checks the protocol first.
        assert_eq!(
            d.detail,
            "`ip daddr 192.0.2.99 meta l4proto tcp th dport 22 counter accept`"
        );
    });
}
