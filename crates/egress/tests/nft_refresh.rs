//! Refresh inside an anonymous network namespace: set elements change in
//! place, rule handles stay, and an established TCP connection survives
//! both a new apply and a refresh while new connections stay blocked.

// Tests: a failed step should abort the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod nft_support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use corral_egress::drift::diff;
use corral_egress::nft::{NftError, apply, profile_counters, read_live, refresh_sets};
use corral_egress::plan::{HostPlan, PlanSettings, Resolution, TableFamily};
use corral_sandbox_core::{EgressMode, ProfileSet};
use nft_support::{allowlist_plan, in_netns, loopback_up, profile, sample_plan};

/// A profile whose "bridge" is `lo`, so loopback traffic meets its input
/// chain: established flows accepted, new connections dropped.
fn lo_plan(allow: &[&str]) -> HostPlan {
    let p = profile("loop", "lo", "10.94.0.0/24", EgressMode::Allowlist, allow);
    let set = ProfileSet::new(vec![p]).unwrap();
    HostPlan::build(&set, &PlanSettings::default(), &Resolution::new()).unwrap()
}

fn handles(family: TableFamily) -> Vec<(String, u64)> {
    let live = read_live().unwrap();
    live.table(family)
        .unwrap()
        .chains
        .iter()
        .flat_map(|c| c.rules.iter().map(move |r| (c.name.clone(), r.handle)))
        .collect()
}

fn echo(stream: &mut TcpStream, peer: &mut TcpStream, msg: &[u8]) {
    stream.write_all(msg).unwrap();
    let mut buf = vec![0u8; msg.len()];
    peer.read_exact(&mut buf).unwrap();
    assert_eq!(buf, msg);
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

#[test]
fn established_tcp_survives_apply_and_refresh_while_new_flows_are_blocked() {
    in_netns(|| {
        loopback_up();
        // Any corral ruleset turns conntrack on, so the flow below is tracked
        // from its first packet.
        apply(&sample_plan(&["192.0.2.10"])).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let mut client = TcpStream::connect(addr).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        server
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        echo(&mut client, &mut server, b"before");

        let old = lo_plan(&["192.0.2.1"]);
        apply(&old).unwrap();
        echo(&mut client, &mut server, b"after apply");
        echo(&mut server, &mut client, b"reply");
        // The rules are really in force on `lo`: a new connection is dropped.
        let blocked = TcpStream::connect_timeout(&addr, Duration::from_millis(300));
        assert!(blocked.is_err(), "a new flow got through");

        let new = lo_plan(&["192.0.2.2", "198.51.100.0/24"]);
        let h = handles(TableFamily::Inet);
        refresh_sets(&old, &new).unwrap();
        assert_eq!(handles(TableFamily::Inet), h);
        echo(&mut client, &mut server, b"after refresh");

        let live = read_live().unwrap();
        assert!(diff(&new, &live).is_empty());
        let counters = profile_counters(&new, &live);
        assert_eq!(counters.len(), 1);
        assert!(counters[0].accepted_packets >= 4, "{counters:?}");
        assert!(counters[0].blocked_packets >= 1, "{counters:?}");
    });
}
