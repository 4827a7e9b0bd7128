//! Fault tests inside anonymous network namespaces: a rejected transaction
//! changes nothing, teardown leaves no corral state, and foreign tables are
//! never touched.

// Tests: a failed step should abort the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use corral_egress::drift::diff;
use corral_egress::nft::{Fault, NftError, apply, apply_with_fault, delete_tables, read_live};
use nft_support::{allowlist_plan, in_netns, nft, sample_plan};

#[test]
fn a_rejected_batch_leaves_the_previous_ruleset_in_force() {
    in_netns(|| {
        let old = sample_plan(&["192.0.2.10"]);
        apply(&old).unwrap();
        let new = allowlist_plan(2_000);
        let err = apply_with_fault(&new, Fault::JumpToMissingChain).unwrap_err();
        match &err {
            NftError::Rejected { what, .. } => assert!(what.contains("injected"), "{err}"),
            other => panic!("expected a rejected transaction, got {other:?}"),
        }
        assert!(err.to_string().contains("previous ruleset stays"), "{err}");
        let d = diff(&old, &read_live().unwrap());
        assert!(d.is_empty(), "old ruleset changed: {d:#?}");
        // And on an empty namespace a rejected apply creates nothing.
        delete_tables().unwrap();
        apply_with_fault(&old, Fault::JumpToMissingChain).unwrap_err();
        assert!(read_live().unwrap().is_empty());
    });
}

#[test]
fn teardown_removes_every_corral_table_and_is_idempotent() {
    in_netns(|| {
        apply(&sample_plan(&["192.0.2.10"])).unwrap();
        assert_eq!(read_live().unwrap().tables.len(), 2);
        delete_tables().unwrap();
        assert!(read_live().unwrap().is_empty());
        delete_tables().unwrap();
        let listing = nft(&["list", "ruleset"]);
        assert!(
            !String::from_utf8_lossy(&listing.stdout).contains("corral"),
            "{}",
            String::from_utf8_lossy(&listing.stdout)
        );
    });
}

#[test]
fn foreign_tables_survive_apply_and_teardown() {
    in_netns(|| {
        let script = "table inet other {\n\
            set keep { type ipv4_addr; flags interval; elements = { 10.0.0.0/8 }; }\n\
            chain c { type filter hook input priority 0; policy accept; ip saddr @keep counter accept; }\n\
            }\n\
            table bridge other { chain f { type filter hook forward priority 0; counter; }; }\n";
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("other.nft");
        std::fs::write(&file, script).unwrap();
        let out = nft(&["-f", file.to_str().unwrap()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let list = || {
            let i = nft(&["list", "table", "inet", "other"]);
            let b = nft(&["list", "table", "bridge", "other"]);
            assert!(i.status.success() && b.status.success());
            (i.stdout, b.stdout)
        };
        let before = list();
        apply(&sample_plan(&["192.0.2.10"])).unwrap();
        assert_eq!(list(), before);
        apply_with_fault(&allowlist_plan(10), Fault::JumpToMissingChain).unwrap_err();
        assert_eq!(list(), before);
        delete_tables().unwrap();
        assert_eq!(list(), before);
        assert!(read_live().unwrap().is_empty());
    });
}
