//! The nftables watch hears, at once, a change behind corral's back to its
//! tables — a deleted rule, a flushed set, a deleted table — and stays
//! quiet for what the gateway resolver does all the time (adding learned
//! elements) and for tables that are not corral's. `nft` is the tamperer.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::time::Duration;

use corral_drill::lab::Lab;
use corral_egress::nft::{NftEvent, NftObject, NftWatch};
use corral_egress::resolve::Resolution;
use corral_sandbox_core::{EgressMode, ProfileSet};
use nft_support::{nft_in, profile};

fn lab() -> Lab {
    let p = profile(
        "wat",
        "cb-wat",
        "10.232.7.0/24",
        EgressMode::Allowlist,
        &["*.corral.test", "203.0.113.10:443/tcp"],
    );
    let lab = Lab::new(&ProfileSet::new(vec![p]).unwrap(), &Resolution::new()).unwrap();
    lab.apply().unwrap();
    lab
}

fn watch(lab: &Lab) -> NftWatch {
    let mut w = NftWatch::open(&lab.topo.host).unwrap();
    w.ignore_elements_of(lab.plan.dns_feeds.keys().cloned());
    w
}

/// Everything heard within `quiet` of the last event.
fn drain(w: &mut NftWatch, quiet: Duration) -> Vec<NftEvent> {
    let mut out = Vec::new();
    while let Some(e) = w.next(quiet).unwrap() {
        out.push(e);
    }
    out
}

fn changed(events: &[NftEvent], object: NftObject, deleted: bool) -> bool {
    events
        .iter()
        .any(|e| matches!(e, NftEvent::Changed(c) if c.object == object && c.deleted == deleted))
}

#[test]
fn tampering_with_corrals_tables_is_heard_and_learning_is_not() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let lab = lab();
    let mut w = watch(&lab);
    let quiet = Duration::from_millis(300);
    assert_eq!(drain(&mut w, quiet), vec![], "a quiet namespace");

    // What dnsmasq does: not heard.
    let learned = lab.plan.dns_feeds.keys().next().unwrap().clone();
    nft_in(
        &lab.topo.host,
        &[
            "add",
            "element",
            "inet",
            "corral",
            &learned,
            "{ 203.0.113.77 }",
        ],
    );
    // Another table: not heard.
    nft_in(&lab.topo.host, &["add", "table", "inet", "other"]);
    assert_eq!(drain(&mut w, quiet), vec![], "learning and foreign tables");

    // Control for the filter: the same element added to a set corral
    // fills itself is heard.
    let allow = lab
        .plan
        .inet
        .sets
        .iter()
        .find(|s| !lab.plan.dns_feeds.contains_key(&s.name) && s.name.contains("allow4"))
        .unwrap()
        .name
        .clone();
    nft_in(
        &lab.topo.host,
        &[
            "add",
            "element",
            "inet",
            "corral",
            &allow,
            "{ 203.0.113.77 }",
        ],
    );
    assert!(changed(&drain(&mut w, quiet), NftObject::Elements, false));

    nft_in(&lab.topo.host, &["flush", "set", "inet", "corral", &allow]);
    assert!(changed(&drain(&mut w, quiet), NftObject::Elements, true));

    let listing = nft_in(&lab.topo.host, &["-a", "list", "table", "inet", "corral"]);
    let (chain, handle) = first_rule(&listing);
    nft_in(
        &lab.topo.host,
        &[
            "delete", "rule", "inet", "corral", &chain, "handle", &handle,
        ],
    );
    assert!(changed(&drain(&mut w, quiet), NftObject::Rule, true));

    nft_in(&lab.topo.host, &["delete", "table", "inet", "corral"]);
    assert!(changed(&drain(&mut w, quiet), NftObject::Table, true));
}

/// The chain and handle of the first rule in an `nft -a list` listing.
fn first_rule(listing: &str) -> (String, String) {
    let mut chain = None;
    for line in listing.lines() {
        let t = line.trim();
        if let Some(rest) = t.strip_prefix("chain ") {
            chain = rest.split_whitespace().next().map(str::to_owned);
        } else if let (Some(c), Some((_, h))) = (&chain, t.rsplit_once("# handle "))
            && !t.starts_with("type ")
            && !t.starts_with("set ")
        {
            return (c.clone(), h.trim().to_owned());
        }
    }
    panic!("no rule in {listing}");
}
