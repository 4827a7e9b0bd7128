//! `nft::learn`, what corral's resolver adds to a profile's learned sets,
//! inside an anonymous network namespace: an address learned twice does
//! not fail, its lifetime is the one given last, and a set at its size
//! takes none of an answer's addresses (the transaction is all or none)
//! and keeps the ones it has.

// Tests: a failed step should abort the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::net::IpAddr;
use std::time::Duration;

use corral_egress::nft::{LearnElement, apply, learn, read_live, read_set};
use corral_egress::plan::{HostPlan, PlanSettings, TableFamily};
use corral_sandbox_core::ProfileSet;
use nft_support::{api_resolution, dev_profile, in_netns};

/// `dev`'s learned set of `*.example.org` (no port class), IPv4.
const SET: &str = "dev-dns4";

fn element(addr: &str, secs: u64) -> LearnElement {
    LearnElement {
        set: SET.to_owned(),
        addr: addr.parse().unwrap(),
        asker: None,
        timeout: Some(Duration::from_secs(secs)),
    }
}

fn held() -> Vec<(IpAddr, u64)> {
    let live = read_set(TableFamily::Inet, SET).unwrap();
    live.tables
        .iter()
        .flat_map(|t| &t.sets)
        .flat_map(|s| {
            s.elements
                .iter()
                .map(|r| r.start)
                .zip(s.expires_ms.iter().copied())
        })
        .collect()
}

#[test]
fn learning_is_idempotent_and_all_or_nothing_at_the_sets_size() {
    in_netns(|| {
        let mut dev = dev_profile();
        dev.learned_max = 2;
        let set = ProfileSet::new(vec![dev]).unwrap();
        let plan = HostPlan::build(
            &set,
            &PlanSettings::default(),
            &api_resolution(&["192.0.2.10"]),
        )
        .unwrap();
        apply(&plan).unwrap();

        learn(&[element("192.175.48.1", 30)]).unwrap().unwrap();
        // Again, with a longer lifetime: no error, and the lifetime is the
        // new one (kernel 6.10 and later update an element's timeout).
        learn(&[element("192.175.48.1", 300)]).unwrap().unwrap();
        let h = held();
        assert_eq!(h.len(), 1, "{h:?}");
        assert!(h[0].1 > 290_000, "{h:?}");

        // One slot left, two new addresses: neither is added.
        let err = learn(&[element("192.175.48.2", 30), element("192.175.48.3", 30)]).unwrap_err();
        assert!(err.is_set_full(), "{err}");
        assert_eq!(held().len(), 1);
        // One fits.
        learn(&[element("192.175.48.2", 30)]).unwrap().unwrap();
        assert_eq!(held().len(), 2);
        // Full now, yet an address it holds is learned again without error.
        learn(&[element("192.175.48.1", 30)]).unwrap().unwrap();
        let err = learn(&[element("192.175.48.3", 30)]).unwrap_err();
        assert!(err.is_set_full(), "{err}");

        // An address of the other family in the same set is refused before
        // anything is sent.
        let err = learn(&[element("192.175.48.1", 30), element("2001:db8::1", 30)]).unwrap_err();
        assert!(!err.is_set_full(), "{err}");
        assert_eq!(held().len(), 2);
        // Nothing to learn is no transaction.
        assert!(learn(&[]).unwrap().is_none());
    });
}

/// On corral's gateway (`dns = "corral"`) the set is keyed by the sandbox
/// that asked and the address: one address learned for two sandboxes is
/// two elements, each read back with its asker, and the ruleset reads
/// back as planned (no drift from the concatenated key).
#[test]
fn a_pinned_set_holds_each_address_with_the_sandbox_that_asked() {
    in_netns(|| {
        let mut dev = dev_profile();
        dev.dns = corral_sandbox_core::DnsPolicy::Corral;
        let set = ProfileSet::new(vec![dev]).unwrap();
        let plan = HostPlan::build(
            &set,
            &PlanSettings::default(),
            &api_resolution(&["192.0.2.10"]),
        )
        .unwrap();
        assert!(plan.set(SET).unwrap().pinned);
        apply(&plan).unwrap();
        let pinned = |asker: &str| LearnElement {
            asker: Some(asker.parse().unwrap()),
            ..element("192.175.48.1", 30)
        };
        learn(&[pinned("10.90.0.5"), pinned("10.90.0.6")])
            .unwrap()
            .unwrap();
        let live = read_set(TableFamily::Inet, SET).unwrap();
        let s = live.tables[0].sets.iter().find(|s| s.name == SET).unwrap();
        assert!(s.pinned);
        let askers: Vec<String> = s.askers.iter().map(ToString::to_string).collect();
        assert_eq!(askers, ["10.90.0.5", "10.90.0.6"]);
        assert_eq!(
            held()
                .into_iter()
                .map(|h| h.0.to_string())
                .collect::<Vec<_>>(),
            ["192.175.48.1", "192.175.48.1"]
        );
        // An element without its asker does not fit the key.
        assert!(learn(&[element("192.175.48.2", 30)]).is_err());
        let drift = corral_egress::drift::diff(&plan, &read_live().unwrap());
        assert!(drift.is_empty(), "{drift:#?}");
    });
}
