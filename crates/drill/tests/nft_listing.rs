//! The operator's view of a host corral enforces: `nft list ruleset` (the
//! nftables tool, an independent witness) lists corral's tables with every
//! kind of set holding elements — port bindings (one added live through
//! `Host::bind_port`, the service's path), the quarantine, the host's
//! networks, names learned through a real gateway, and the meters the
//! kernel fills from a sandbox's DHCP, DNS and TCP/53 traffic — and shows
//! each element corral reads back. An `nft` 1.0.6 once aborted on such a
//! host (`concat_expr_msort_value: Assertion 'ilen > 0' failed`) and
//! printed every bound port name as `""`: corral described the keys of
//! its sets to userspace badly.

// Test code: a failed unwrap is a failed test, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use corral_drill::attack::gateway::hold_tcp_dns;
use corral_drill::attack::l2::Attacker;
use corral_drill::lab::{Lab, LabGateways};
use corral_drill::raw::dhcp;
use corral_egress::netns::Netns;
use corral_egress::nft::{LiveSet, read_live};
use corral_egress::plan::render::{map_element_text, range_text};
use corral_egress::plan::{KeyPart, KeyedSetPlan, TablePlan};
use corral_egress::resolve::Resolution;
use corral_gateway::probe::query;
use corral_gateway::wire::{TYPE_A, TYPE_AAAA};
use corral_sandbox_core::config::Config;

const T: Duration = Duration::from_millis(1500);

/// An allowlist by name (learned sets and TCP/53 caps) with IPv6, the
/// built-in internet profile and an isolated one.
const PROFILES: &str = r#"
[[profile]]
name = "names"
bridge = "corral-names"
subnet = "10.231.4.0/24"
subnet_v6 = "fd00:c0a1:4::/64"
mode = "allowlist"
allow = ["*.corral-list.test:443/tcp", "203.0.113.0/28:8000-8100/tcp"]

[[profile]]
name = "internet"
bridge = "corral-net"
subnet = "10.231.2.0/24"
subnet_v6 = "fd00:c0a1:2::/64"
mode = "internet"

[[profile]]
name = "isolated"
bridge = "corral-iso"
subnet = "10.231.1.0/24"
mode = "none"
"#;

const NAME: &str = "www.corral-list.test";
/// AS112's range: globally reachable in the special-purpose registry, so
/// the gateway hands it out (a reserved answer, e.g. 198.18.0.0/15, is
/// refused at the lookup); the lab never routes it anywhere.
const LEARNED_V4: Ipv4Addr = Ipv4Addr::new(192, 175, 48, 7);
/// Outside every range the gateway's rebinding guard drops (it drops
/// answers in 2001:db8::/32); the lab never routes it anywhere.
const LEARNED_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0x4860, 0x77, 0, 0, 0, 0, 7);

/// `nft ARGS` inside `ns`: (exit status success, stdout, stderr).
fn nft(ns: &Netns, args: &[&str]) -> (bool, String, String) {
    let mut cmd = std::process::Command::new("nft");
    cmd.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = ns
        .spawn(cmd)
        .and_then(|c| c.wait_with_output())
        .unwrap_or_else(|e| panic!("cannot run nft {args:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The text of `set NAME { … }` inside `table FAMILY corral { … }` of a
/// listing.
fn set_block<'a>(listing: &'a str, family: &str, set: &str) -> &'a str {
    let table = listing
        .find(&format!("table {family} corral {{"))
        .unwrap_or_else(|| panic!("no table {family} corral in:\n{listing}"));
    let rest = &listing[table..];
    let start = rest
        .find(&format!("\tset {set} {{"))
        .or_else(|| rest.find(&format!("\tmap {set} {{")))
        .unwrap_or_else(|| panic!("no set {set} in table {family} corral:\n{rest}"));
    let block = &rest[start..];
    &block[..block.find("\n\t}").unwrap_or(block.len())]
}

/// One part of a key as `nft` prints it.
fn part_text(part: KeyPart, bytes: &[u8]) -> String {
    match part {
        KeyPart::IfName => {
            let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
            format!("\"{}\"", String::from_utf8_lossy(&bytes[..end]))
        }
        KeyPart::Ether => bytes
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
        KeyPart::Ipv4 => Ipv4Addr::from(<[u8; 4]>::try_from(bytes).unwrap()).to_string(),
        KeyPart::Ipv6 => Ipv6Addr::from(<[u8; 16]>::try_from(bytes).unwrap()).to_string(),
        KeyPart::Raw(_) => {
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let digits = hex.trim_start_matches('0');
            format!("0x{}", if digits.is_empty() { "0" } else { digits })
        }
    }
}

/// A live key of `set` as `nft` prints it.
fn key_text(set: &KeyedSetPlan, key: &[u8]) -> String {
    let concat = set.key.len() > 1;
    let mut at = 0;
    let mut parts = Vec::new();
    for p in &set.key {
        let len = p.len() as usize;
        parts.push(part_text(*p, &key[at..at + len]));
        at += if concat { p.padded_len() as usize } else { len };
    }
    parts.join(" . ")
}

/// What `nft` must show of a live set: each element's text (a verdict
/// map's elements as planned, `"br" : jump chain`, when the live map holds
/// as many; verify compares them byte for byte).
fn shown(table: &TablePlan, ls: &LiveSet) -> Vec<String> {
    if let Some(k) = table.keyed_sets.iter().find(|s| s.name == ls.name) {
        return ls.keys.iter().map(|key| key_text(k, key)).collect();
    }
    if let Some(m) = table.maps.iter().find(|m| m.name == ls.name) {
        let starts = ls.jumps.iter().filter(|j| !j.1).count();
        assert_eq!(
            starts,
            m.elements.len(),
            "live map {}: {:?}",
            m.name,
            ls.jumps
        );
        return m.elements.iter().map(map_element_text).collect();
    }
    ls.elements.iter().map(range_text).collect()
}

fn non_empty(live: &corral_egress::nft::LiveState, table: &TablePlan, set: &str) {
    let s = live
        .table(table.family)
        .and_then(|t| t.set(set))
        .unwrap_or_else(|| panic!("no live set {set}"));
    assert!(
        !s.keys.is_empty(),
        "precondition: set {} {set} holds no element",
        table.family.keyword()
    );
}

#[test]
fn nft_lists_every_set_of_an_enforced_host_with_its_elements() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let cfg = Config::from_toml_str(PROFILES, "nft_listing").unwrap();
    let mut lab = Lab::new(&cfg.profiles, &Resolution::new()).unwrap();
    let host = lab.topo.host.try_clone().unwrap();

    // Control: the witness lists the namespace before corral's tables exist.
    let (ok, _, err) = nft(&host, &["list", "ruleset"]);
    assert!(ok, "control: nft cannot list an empty namespace: {err}");

    // Every sandbox bound but two: one bound later through bind_port, one
    // left to the quarantine.
    let late = lab.topo.sandboxes_of("names").nth(1).unwrap().port.clone();
    let loose = lab
        .topo
        .sandboxes_of("isolated")
        .nth(1)
        .unwrap()
        .port
        .clone();
    let all = lab.plan.bindings.clone();
    let early: Vec<_> = all
        .iter()
        .filter(|b| b.port.as_str() != late && b.port.as_str() != loose)
        .cloned()
        .collect();
    lab.plan = lab.plan.with_bindings(&lab.profiles, early).unwrap();
    lab.apply().unwrap();
    lab.topo.attach_sandboxes(true).unwrap();
    lab.host.sweep_ports(&lab.plan).unwrap();
    let late_binding = all.iter().find(|b| b.port.as_str() == late).unwrap();
    lab.plan = lab
        .host
        .bind_port(&lab.plan, &lab.profiles, late_binding.clone())
        .unwrap();

    // Traffic that makes the kernel and the gateway fill the other sets.
    let gateways = LabGateways::start(&lab).unwrap();
    gateways
        .upstream
        .set(NAME, &[IpAddr::V4(LEARNED_V4), IpAddr::V6(LEARNED_V6)], 600);
    let sb = lab.topo.sandboxes_of("names").nth(1).unwrap();
    let dns4 = SocketAddr::new(sb.gateway_v4.into(), 53);
    let dns6 = SocketAddr::new(sb.gateway_v6.unwrap().into(), 53);
    for qtype in [TYPE_A, TYPE_AAAA] {
        let r = sb.ns.run(|| query(dns4, NAME, qtype, T)).unwrap();
        assert!(
            r.is_ok(),
            "the gateway did not answer {NAME} ({qtype}): {r:?}"
        );
    }
    let att = Attacker::new(sb).unwrap();
    let lease = dhcp::obtain(&att.sock, att.mac(), att.mac(), 11, T).unwrap();
    assert_eq!(
        lease.map(|l| l.addr),
        Some(sb.v4),
        "no lease for {}",
        sb.name
    );
    // Held open until the listing: the meter counts live connections.
    let held4 = hold_tcp_dns(&sb.ns, dns4, 1, T).unwrap();
    let held6 = hold_tcp_dns(&sb.ns, dns6, 1, T).unwrap();
    assert_eq!((held4.len(), held6.len()), (1, 1), "TCP/53 not accepted");

    let live = lab.host.netns().run(read_live).unwrap().unwrap();
    let names = &lab.plan.inet;
    let bridge = &lab.plan.bridge;
    for set in [
        "hostnet4",
        "hostnet6",
        "names-dns4-tcp-443",
        "names-dns6-tcp-443",
    ] {
        non_empty(&live, names, set);
    }
    for set in ["names-dnstcp4", "names-dnstcp6"] {
        non_empty(&live, names, set);
    }
    // The drop log's meters fill only when something is blocked; their key
    // (an interface name) is the rate meters' key, which fills above. The
    // cut ports fill only when an apply removes a profile with ports.
    for s in bridge
        .keyed_sets
        .iter()
        .filter(|s| !s.name.ends_with(corral_egress::plan::droplog::METER_SUFFIX))
        .filter(|s| s.name != corral_egress::plan::fail_closed::CUT_PORTS)
    {
        non_empty(&live, bridge, &s.name);
    }

    // The witness: every listing works, and shows every element.
    for args in [
        &["list", "tables"][..],
        &["list", "sets"],
        &["list", "ruleset"],
    ] {
        let (ok, _, err) = nft(&host, args);
        assert!(ok, "nft {args:?} failed: {err}");
    }
    let (_, listing, _) = nft(&host, &["list", "ruleset"]);
    for table in [&lab.plan.inet, &lab.plan.bridge] {
        let lt = live.table(table.family).unwrap();
        for ls in &lt.sets {
            let block = set_block(&listing, table.family.keyword(), &ls.name);
            for e in shown(table, ls) {
                assert!(
                    block.contains(&e),
                    "nft does not show element {e} of set {} {}:\n{block}",
                    table.family.keyword(),
                    ls.name
                );
            }
        }
    }
    drop((held4, held6, gateways));
}
