//! Refresh inside an anonymous network namespace: set elements change in
//! place and rule handles stay. (That an allowed established flow survives
//! apply and refresh while a de-listed one is revoked is proved with real
//! sandbox traffic in `enforce_revocation.rs`.)

// Tests: a failed step should abort the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use corral_egress::drift::diff;
use corral_egress::nft::{NftError, apply, read_live, refresh_sets};
use corral_egress::plan::TableFamily;
use nft_support::{allowlist_plan, in_netns, sample_plan};

fn handles(family: TableFamily) -> Vec<(String, u64)> {
    let live = read_live().unwrap();
    live.table(family)
        .unwrap()
        .chains
        .iter()
        .flat_map(|c| c.rules.iter().map(move |r| (c.name.clone(), r.handle)))
        .collect()
}

#[test]
fn refresh_changes_elements_only_and_keeps_handles() {
    in_netns(|| {
        let old = sample_plan(&["192.0.2.10", "2001:db8::10"]);
        let new = sample_plan(&["192.0.2.11", "192.0.2.12", "2001:db8::10"]);
        apply(&old).unwrap();
        let before = (handles(TableFamily::Inet), handles(TableFamily::Bridge));
        let report = refresh_sets(&old, &new).unwrap();
        assert_eq!(report.sets, vec!["dev-allow4-tcp-443".to_owned()]);
        // .11 and .12 merge into one (non-CIDR) range.
        assert_eq!((report.added, report.removed), (1, 1));
        assert_eq!(
            (handles(TableFamily::Inet), handles(TableFamily::Bridge)),
            before
        );
        let d = diff(&new, &read_live().unwrap());
        assert!(d.is_empty(), "{d:#?}");
        // Nothing to do is no transaction at all.
        assert!(refresh_sets(&new, &new).unwrap().batch.is_none());
        // A structural change is refused, not half-applied.
        let err = refresh_sets(&new, &allowlist_plan(3)).unwrap_err();
        assert!(matches!(err, NftError::NotRefreshable(_)), "{err}");
        // Elements out of sync with `old` make the kernel refuse the whole refresh.
        let err = refresh_sets(&old, &new).unwrap_err();
        assert!(matches!(err, NftError::Rejected { .. }), "{err}");
        assert!(diff(&new, &read_live().unwrap()).is_empty());
    });
}
