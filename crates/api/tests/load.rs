//! 100 clients at once against one corrald on this 2-core machine, over
//! real HTTP against the real Incus daemon with real enforcement applied
//! (`corral_tests::hostlab`): each creates a sandbox on the lab's profile
//! (through the start gate), starts it (DHCP lease from the profile's
//! gateway, exec answering) and deletes it. corrald may say "busy" (429
//! with Retry-After; the clients honour it) but never answers a 5xx, and
//! nothing is left behind: no instance, no port on the profile's bridge,
//! no veth on the host, no row in corral's database.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::Duration;

use common::incus::{PrefixCleanup, runtime};
use common::{Req, Server, TOKEN, send};
use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_service::config::{ConfigSource, load};
use corral_service::host::plan_config;
use corral_service::{HostService, Target};
use corral_tests::hostlab::HostLab;
use serde_json::{Value, json};

const CLIENTS: usize = 100;

/// The host-side ends of Incus's NICs (Incus names them `veth…`).
fn veths() -> Vec<String> {
    std::fs::read_dir("/sys/class/net")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("veth"))
        .collect()
}

/// One request, retried while corrald answers 429 (after its Retry-After);
/// the final status and body, and how many 429s it took.
fn call(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value, u32) {
    let auth = format!("Bearer {TOKEN}");
    let text = body.map(Value::to_string);
    let mut busy = 0;
    loop {
        let (status, head, json) = send(
            TcpStream::connect(addr).unwrap(),
            &Req {
                method,
                path,
                host: addr,
                headers: &[("Authorization", &auth)],
                body: text.as_deref(),
                content_type: Some("application/json"),
            },
        );
        if status != 429 {
            return (status, json, busy);
        }
        busy += 1;
        let after: u64 = head
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("retry-after:")
                    .map(|v| v.trim().to_owned())
            })
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("a 429 without Retry-After: {head}"));
        std::thread::sleep(Duration::from_secs(after));
    }
}

/// Every client runs `step` for its own sandbox at once; returns each
/// client's (status, body) and the 429s seen.
fn all_at_once(
    names: &[String],
    step: impl Fn(&str) -> (u16, Value, u32) + Sync,
) -> (Vec<(String, u16, Value)>, u32) {
    let results = Mutex::new(Vec::new());
    let busy = Mutex::new(0u32);
    std::thread::scope(|scope| {
        for name in names {
            let (results, busy, step) = (&results, &busy, &step);
            scope.spawn(move || {
                let (s, body, b) = step(name);
                *busy.lock().unwrap() += b;
                results.lock().unwrap().push((name.clone(), s, body));
            });
        }
    });
    (results.into_inner().unwrap(), busy.into_inner().unwrap())
}

/// What the profile's gateway logged for `addresses` (every query it took
/// from them and how it settled it) and the host's neighbour entries for
/// them: where a refused start's lookup went.
fn gateway_view(lab: &HostLab, addresses: &Value) -> String {
    let ips: Vec<String> = addresses
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut out = String::new();
    let mut logs = Vec::new();
    let mut dirs = vec![lab.state_dir()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = e.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path
                .file_name()
                .is_some_and(|f| f == "dnsmasq.log" || f == "leases")
            {
                logs.push(path);
            }
        }
    }
    for log in logs {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        out.push_str(&format!("--- {}\n", log.display()));
        if log.file_name().is_some_and(|f| f == "dnsmasq.log") {
            out.push_str(&unanswered(&text));
        }
        for line in text.lines() {
            if ips
                .iter()
                .any(|ip| line.contains(&format!("{ip} ")) || line.ends_with(ip.as_str()))
            {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    let bridge = lab.attachment().bridge.to_string();
    let neigh = std::process::Command::new("ip")
        .args(["neigh", "show", "dev", &bridge])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let fdb = std::process::Command::new("bridge")
        .args(["fdb", "show", "br", &bridge])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.push_str(&format!(
        "--- bridge fdb show br {bridge} (learned entries)\n"
    ));
    for line in fdb.lines().filter(|l| !l.contains("permanent")) {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&format!("--- ip neigh show dev {bridge} ({ips:?})\n"));
    // A disposed sandbox reports no address: then every entry, so an
    // entry holding another port's MAC for an address shows.
    for line in neigh.lines() {
        if ips.is_empty() || ips.iter().any(|ip| line.starts_with(&format!("{ip} "))) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// From a gateway's `log-queries=extra` log: how many askers looked a
/// name up, and every query that got neither a reply nor a forward (its
/// serial, asker and lines), then the log's last lines: whether a refused
/// start's lookup reached dnsmasq at all, and whether dnsmasq answered.
fn unanswered(log: &str) -> String {
    // `<date> dnsmasq[<pid>]: <serial> <ip>/<port> <what>`
    let mut by_serial: BTreeMap<u64, (String, Vec<String>)> = BTreeMap::new();
    for line in log.lines() {
        let Some((_, rest)) = line.split_once("]: ") else {
            continue;
        };
        let mut words = rest.splitn(3, ' ');
        let (Some(serial), Some(asker), Some(what)) = (words.next(), words.next(), words.next())
        else {
            continue;
        };
        let (Ok(serial), Some((ip, _))) = (serial.parse::<u64>(), asker.split_once('/')) else {
            continue;
        };
        let e = by_serial
            .entry(serial)
            .or_insert_with(|| (ip.to_owned(), Vec::new()));
        e.1.push(what.to_owned());
    }
    let askers: std::collections::BTreeSet<&str> =
        by_serial.values().map(|(ip, _)| ip.as_str()).collect();
    let open: Vec<String> = by_serial
        .iter()
        .filter(|(_, (_, lines))| {
            lines.iter().any(|l| l.starts_with("query["))
                && !lines.iter().any(|l| {
                    l.starts_with("reply") || l.starts_with("forwarded") || l.starts_with("config")
                })
        })
        .map(|(serial, (ip, lines))| format!("  {serial} from {ip}: {lines:?}\n"))
        .collect();
    // A canary asks a few times; one whose answers never arrive asks on
    // (its probe resends within its bound, and the check is tried twice).
    let mut per_asker: BTreeMap<&str, usize> = BTreeMap::new();
    for (ip, lines) in by_serial.values() {
        if lines.iter().any(|l| l.starts_with("query[")) {
            *per_asker.entry(ip.as_str()).or_insert(0) += 1;
        }
    }
    let most: Vec<String> = {
        let mut v: Vec<(&str, usize)> = per_asker.into_iter().collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1));
        v.into_iter()
            .take(5)
            .map(|(ip, n)| format!("{ip}: {n}"))
            .collect()
    };
    let tail: Vec<&str> = log.lines().rev().take(20).collect();
    format!(
        "{} queries from {} askers; most queries by one asker: {most:?}; unanswered ({}):\n{}last lines:\n{}\n",
        by_serial.len(),
        askers.len(),
        open.len(),
        open.concat(),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    )
}

fn tally(results: &[(String, u16, Value)]) -> BTreeMap<u16, usize> {
    let mut t = BTreeMap::new();
    for (_, s, _) in results {
        *t.entry(*s).or_insert(0) += 1;
    }
    t
}

#[test]
fn a_hundred_clients_create_start_and_delete_and_nothing_is_left() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(socket) = corral_test_support::gate::incus() else {
        return;
    };
    let client = runtime()
        .block_on(IncusProvider::connect(IncusConfig::local()))
        .unwrap_or_else(|e| panic!("cannot connect to Incus: {e}"))
        .client()
        .clone();
    // The lab holds the host lock: no other test adds veths meanwhile.
    let lab = HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let prefix = format!("t-load-{}-", std::process::id());
    let guard = PrefixCleanup {
        client,
        prefix: prefix.clone(),
    };
    let loaded = load(&ConfigSource {
        config: Some(lab.config_path()),
        networks_conf: None,
    })
    .unwrap();
    HostService::new(Target::open(None).unwrap(), lab.state_dir())
        .apply(&plan_config(loaded).unwrap())
        .unwrap();
    let veths_before = veths();
    let srv = Server::start_exact(
        &[
            "--listen",
            "127.0.0.1:0",
            "--incus-socket",
            socket.to_str().unwrap(),
            "--config",
            lab.config_path().to_str().unwrap(),
            "--state-dir",
            lab.state_dir().to_str().unwrap(),
        ]
        .map(str::to_owned),
    );
    let names: Vec<String> = (0..CLIENTS).map(|i| format!("{prefix}{i}")).collect();
    let addr = srv.addr.clone();

    let (created, busy_create) = all_at_once(&names, |name| {
        call(
            &addr,
            "POST",
            "/v1/sandboxes",
            Some(&json!({"name": name, "image": TEST_IMAGE_ALIAS, "profile": "e2e"})),
        )
    });
    assert_eq!(
        tally(&created),
        BTreeMap::from([(201, CLIENTS)]),
        "{created:?}"
    );

    let (started, busy_start) = all_at_once(&names, |name| {
        call(&addr, "POST", &format!("/v1/sandboxes/{name}/start"), None)
    });
    // A refused start's own record says which check failed and how.
    let why: Vec<String> = started
        .iter()
        .filter(|(_, s, _)| *s != 200)
        .map(|(n, _, _)| {
            let (_, events, _) = call(&addr, "GET", &format!("/v1/events?sandbox={n}"), None);
            let (_, info, _) = call(&addr, "GET", &format!("/v1/sandboxes/{n}"), None);
            format!(
                "{n}: {events}\n{info}\n{}",
                gateway_view(&lab, &info["addresses"])
            )
        })
        .collect();
    assert_eq!(
        tally(&started),
        BTreeMap::from([(200, CLIENTS)]),
        "{started:?}\n{}",
        why.join("\n")
    );
    let bridge_ports = |lab: &HostLab| {
        let bridge = lab.attachment().bridge.to_string();
        std::fs::read_dir(format!("/sys/class/net/{bridge}/brif"))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    assert_eq!(
        bridge_ports(&lab),
        CLIENTS,
        "every started sandbox is a port on the bridge"
    );

    let (deleted, busy_delete) = all_at_once(&names, |name| {
        call(&addr, "DELETE", &format!("/v1/sandboxes/{name}"), None)
    });
    assert_eq!(
        tally(&deleted),
        BTreeMap::from([(200, CLIENTS)]),
        "{deleted:?}"
    );
    eprintln!(
        "{CLIENTS} clients: 429 busy answers while creating {busy_create}, starting {busy_start}, deleting {busy_delete}"
    );

    assert_eq!(
        guard.instances(),
        Vec::<String>::new(),
        "instances left behind"
    );
    let rows: Vec<String> = corral_service::Store::open(&lab.state_dir())
        .unwrap()
        .sandboxes()
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert_eq!(rows, Vec::<String>::new(), "database rows left behind");
    assert_eq!(bridge_ports(&lab), 0, "ports left on the profile's bridge");
    let leaked: Vec<String> = veths()
        .into_iter()
        .filter(|v| !veths_before.contains(v))
        .collect();
    assert!(leaked.is_empty(), "veths left behind: {leaked:?}");
    drop(srv);
    drop(guard);
    drop(lab);
}
