//! Port bindings end to end: the real `corral` binary, the real Incus
//! daemon, corral's rules and gateways applied in the HOST network
//! namespace by `corral host apply` (see `corral_tests::hostlab` for what
//! the lab refuses to touch and how it cleans up, even on panic).
//!
//! What is read back, never taken from corral's own answers alone: the
//! applied record's bindings, the gateway's reservations and leases, the
//! live `table bridge corral` (through `nft`, an independent witness), the
//! instance's NIC through Incus's API, and the MAC and address inside the
//! sandbox.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::sandboxes::{Cleanup, in_dirs, in_lab, incus, reached_with, runtime, unique};
use common::{Run, corral, schema};
use corral_provider_incus::api::{Instance, nic_device};
use corral_provider_incus::{IncusClient, TEST_IMAGE_ALIAS};
use corral_tests::builtin_lab::{BRIDGES, BuiltinLab};
use corral_tests::hostlab::{ALLOWED_NAME, HostLab};
use http::Method;
use serde_json::{Value, json};

/// `corral new NAME --profile P --json` in the lab, checked against the
/// documented schema.
fn new_in(config: &Path, state: &Path, name: &str, profile: &str) -> Value {
    let made = in_dirs(
        config,
        state,
        &[
            "new",
            name,
            "--profile",
            profile,
            "--image",
            TEST_IMAGE_ALIAS,
            "--json",
        ],
    )
    .expect_code(0)
    .json();
    schema::check(&made);
    made
}

/// The bindings recorded with what was applied.
fn recorded_ports(state: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(state.join("applied.json")).unwrap();
    let inputs: Value = serde_json::from_str(&text).unwrap();
    inputs["bindings"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|b| b["port"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The gateway's reservations file of `bridge`.
fn reservations(state: &Path, bridge: &str) -> String {
    std::fs::read_to_string(state.join("gateway").join(bridge).join("reservations"))
        .unwrap_or_default()
}

/// True when the live set `set` of `table bridge corral` holds an element
/// whose key starts with `key`. Read with `nft --debug=netlink`, which
/// prints each element's raw key as 32-bit words in host byte order: the
/// kernel's own bytes, an independent witness that does not depend on how
/// nft formats a key (`drill/tests/nft_listing.rs` checks that).
fn nft_set_has(set: &str, key: &[u8]) -> bool {
    let out = Command::new("nft")
        .args(["--debug=netlink", "list", "set", "bridge", "corral", set])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nft list set {set}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let words: Vec<String> = key
        .chunks(4)
        .map(|c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            format!("{:08x}", u32::from_ne_bytes(w))
        })
        .collect();
    let want = format!("element {}", words.join(" "));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.trim_start().starts_with(&want))
}

/// An interface name as a set key: its bytes, NUL-padded to 16.
fn ifname(name: &str) -> Vec<u8> {
    let mut b = name.as_bytes().to_vec();
    b.resize(16, 0);
    b
}

/// The instance's NIC as Incus has it configured.
fn incus_nic(client: &IncusClient, name: &str) -> BTreeMap<String, String> {
    runtime()
        .block_on(client.get::<Instance>(&format!("/1.0/instances/{name}")))
        .unwrap()
        .devices
        .get("eth0")
        .cloned()
        .unwrap_or_default()
}

/// `corral exec NAME -- sh -c SCRIPT` (no stdin), with corral's state in
/// `state` (never the machine's default directory).
fn sh(state: &Path, name: &str, script: &str) -> Run {
    corral(&[
        "exec",
        name,
        "-n",
        "--state-dir",
        state.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        script,
    ])
}

/// One DHCP exchange on eth0 from inside `name` (busybox udhcpc, which
/// exits non-zero when no server answers with a lease); configures nothing.
fn dhcp_lease_offered(state: &Path, name: &str) -> bool {
    let run = sh(state, name, "udhcpc -i eth0 -n -q -t 3 -T 1 -s /bin/true");
    run.code == Some(0)
}

#[test]
fn a_builtin_profile_sandbox_is_bound_leased_and_unbound() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(client) = incus() else { return };
    let lab = BuiltinLab::new().unwrap_or_else(|e| panic!("{e}"));
    let config = corral_sandbox_core::Config::builtin_default();
    let profile = config.profiles.get("isolated").unwrap().clone();
    let run = |args: &[&str]| in_dirs(&lab.config_path(), &lab.state_dir(), args);
    let name = unique("bound");
    // Declared after the lab: dropped first, before the bridges go.
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![name.clone()],
    };
    let bridge = profile.bridge.to_string();
    assert_eq!(bridge, BRIDGES[0]);
    run(&["host", "apply"]).expect_code(0);
    assert_eq!(
        reservations(&lab.state_dir(), &bridge),
        "",
        "nothing bound yet"
    );

    let made = new_in(&lab.config_path(), &lab.state_dir(), &name, "isolated");
    let binding = &made["gate"]["binding"];
    let (port, mac, v4) = (
        binding["port"].as_str().unwrap().to_owned(),
        binding["mac"].as_str().unwrap().to_owned(),
        binding["v4"].as_str().unwrap().to_owned(),
    );
    // The lowest free address of the subnet, the MAC and port derived from it.
    let v4: Ipv4Addr = v4.parse().unwrap();
    assert!(profile.subnet_v4.contains(&v4), "{made}");
    let o = v4.octets();
    assert_eq!(
        mac,
        format!("02:c0:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
    );
    assert_eq!(port, format!("crl{:08x}", u32::from(v4)));

    // Its lease came through its reservation.
    assert_eq!(made["ready"]["lease"], v4.to_string(), "{made}");
    assert_eq!(
        reservations(&lab.state_dir(), &bridge),
        format!("{mac},{v4}\n")
    );
    let leases =
        std::fs::read_to_string(lab.state_dir().join("gateway").join(&bridge).join("leases"))
            .unwrap();
    assert!(
        leases
            .lines()
            .any(|l| l.contains(&mac) && l.contains(&v4.to_string())),
        "{leases}"
    );
    assert_eq!(recorded_ports(&lab.state_dir()), vec![port.clone()]);

    // The NIC Incus made, the sandbox's own view and the live rules agree.
    let nic = incus_nic(&client, &name);
    assert_eq!(nic.get("hwaddr"), Some(&mac), "{nic:?}");
    assert_eq!(nic.get("host_name"), Some(&port), "{nic:?}");
    assert_eq!(made["info"]["nic"]["mac"], mac.as_str());
    assert_eq!(made["info"]["nic"]["port"], port.as_str());
    let inside = sh(
        &lab.state_dir(),
        &name,
        "cat /sys/class/net/eth0/address; ip -4 addr show eth0",
    )
    .expect_code(0);
    assert!(inside.stdout.contains(&mac), "{}", inside.stdout);
    assert!(
        inside.stdout.contains(&format!("{v4}/")),
        "{}",
        inside.stdout
    );
    assert!(nft_set_has("ports", &ifname(&port)));
    assert!(!nft_set_has("quarantine", &ifname(&port)));
    run(&["host", "verify"]).expect_code(0);
    let info = run(&["info", &name, "--json"]).expect_code(0).json();
    schema::check(&info);
    assert_eq!(info["nic"]["port"], port.as_str());

    // rm: the binding, its reservation and its elements go (read back).
    run(&["rm", "--force", &name]).expect_code(0);
    assert!(recorded_ports(&lab.state_dir()).is_empty());
    assert_eq!(reservations(&lab.state_dir(), &bridge), "");
    assert!(!nft_set_has("ports", &ifname(&port)));
    assert!(!nft_set_has("port-mac", &ifname(&port)));
    run(&["host", "verify"]).expect_code(0);
}

#[test]
fn bindings_hold_across_reapply_and_a_stranger_on_the_bridge_gets_nothing() {
    if !corral_test_support::gate::netns() || !corral_test_support::gate::tool("nft", "nftables") {
        return;
    }
    let Some(client) = incus() else { return };
    let lab = HostLab::for_apply().unwrap_or_else(|e| panic!("{e}"));
    let (box1, rogue) = (unique("kept"), unique("rogue"));
    let _guard = Cleanup {
        client: client.clone(),
        names: vec![box1.clone(), rogue.clone()],
    };
    let bridge = lab.profile.bridge.to_string();
    in_lab(&lab, &["host", "apply"]).expect_code(0);
    let made = new_in(&lab.config_path(), &lab.state_dir(), &box1, "e2e");
    let port = made["gate"]["binding"]["port"].as_str().unwrap().to_owned();
    let mac = made["gate"]["binding"]["mac"].as_str().unwrap().to_owned();
    let resolved = sh(&lab.state_dir(), &box1, &format!("nslookup {ALLOWED_NAME}"));
    assert!(
        resolved
            .stdout
            .contains(&lab.dns_allowed().ip().to_string()),
        "{resolved:?}"
    );
    assert!(
        reached_with(Some(&lab.state_dir()), &box1, lab.dns_allowed()),
        "before the re-apply"
    );

    // A re-apply with an unrelated change keeps the binding: same record,
    // same live elements, and the bound sandbox still gets through.
    let config = std::fs::read_to_string(lab.config_path()).unwrap();
    let unrelated = config.replacen(
        "block = \"reject\"",
        "block = \"reject\"\ndeny = [\"192.0.2.77/32\"]",
        1,
    );
    assert_ne!(config, unrelated);
    std::fs::write(lab.config_path(), unrelated).unwrap();
    let applied = in_lab(&lab, &["host", "apply", "--json"])
        .expect_code(0)
        .json();
    // The address the gateway learned was carried into the new ruleset:
    // reached again without a new lookup.
    assert!(applied["carried"].as_u64() >= Some(1), "{applied}");
    assert!(
        reached_with(Some(&lab.state_dir()), &box1, lab.dns_allowed()),
        "the learned address was lost by an unrelated apply"
    );
    assert_eq!(recorded_ports(&lab.state_dir()), vec![port.clone()]);
    assert!(nft_set_has("ports", &ifname(&port)));
    assert_eq!(
        reservations(&lab.state_dir(), &bridge),
        format!(
            "{mac},{}\n",
            made["gate"]["binding"]["v4"].as_str().unwrap()
        )
    );
    // And the name resolves and is reached as before.
    let again = sh(&lab.state_dir(), &box1, &format!("nslookup {ALLOWED_NAME}"));
    assert!(
        again.stdout.contains(&lab.dns_allowed().ip().to_string()),
        "{again:?}"
    );
    assert!(
        reached_with(Some(&lab.state_dir()), &box1, lab.dns_allowed()),
        "after the re-apply"
    );
    assert!(
        dhcp_lease_offered(&lab.state_dir(), &box1),
        "control: the bound sandbox's DHCP"
    );

    // The binding is live in the kernel: the same probe from a MAC the
    // port is not bound to is dropped (the control is the probe above).
    let set_mac = |m: &str| {
        sh(&lab.state_dir(), &box1,
            &format!(
                "ip link set eth0 down && ip link set eth0 address {m} && ip link set eth0 up && ip route replace default via {}",
                lab.profile.gateway_v4()
            ),
        )
        .expect_code(0);
    };
    set_mac("02:c0:0a:fb:00:98");
    assert!(
        !reached_with(Some(&lab.state_dir()), &box1, lab.dns_allowed()),
        "a forged MAC must lose the bound port's traffic"
    );
    set_mac(&mac);
    // A positive probe may take a few tries: the interface was just taken
    // down and up (the bound MAC's traffic returning is what is asserted;
    // the negative above ran once).
    assert!(
        (0..5).any(|_| reached_with(Some(&lab.state_dir()), &box1, lab.dns_allowed())),
        "its own MAC again"
    );

    // A stranger on the same bridge, made through Incus's API: corral's
    // stamp copied (so `corral exec` reaches it) but no binding.
    create_stranger(&client, &lab.state_dir(), &box1, &rogue, &bridge);
    let addr = format!(
        "{}/{}",
        Ipv4Addr::from(u32::from(lab.profile.subnet_v4.network()) + 200),
        lab.profile.subnet_v4.prefix_len()
    );
    let gw = lab.profile.gateway_v4().to_string();
    sh(
        &lab.state_dir(),
        &rogue,
        &format!("ip addr add {addr} dev eth0 && ip route replace default via {gw}"),
    )
    .expect_code(0);
    // Control: until a sweep quarantines its port, an address it gave
    // itself gets the profile's egress (the hole the sweep closes).
    assert!(
        reached_with(Some(&lab.state_dir()), &rogue, lab.dns_allowed()),
        "control: the unswept stranger must get through"
    );
    assert!(
        !dhcp_lease_offered(&lab.state_dir(), &rogue),
        "the gateway leases only reserved MACs"
    );

    // A refresh sweeps the ports: the stranger's is isolated and
    // quarantined; it gets no lease and reaches nothing.
    let refreshed = in_lab(&lab, &["host", "refresh", "--json"])
        .expect_code(0)
        .json();
    schema::check(&refreshed);
    let stranger_port = incus_host_name(&client, &rogue);
    assert!(
        refreshed["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["port"] == stranger_port.as_str() && p["bound"] == false),
        "{refreshed}"
    );
    assert!(nft_set_has("quarantine", &ifname(&stranger_port)));
    assert!(!dhcp_lease_offered(&lab.state_dir(), &rogue));
    assert!(!reached_with(
        Some(&lab.state_dir()),
        &rogue,
        lab.dns_allowed()
    ));
    let dns = sh(
        &lab.state_dir(),
        &rogue,
        &format!("nslookup {ALLOWED_NAME} {gw}"),
    );
    assert!(
        !dns.stdout.contains(&lab.dns_allowed().ip().to_string()),
        "{dns:?}"
    );
    // The bound sandbox is untouched.
    assert!(reached_with(
        Some(&lab.state_dir()),
        &box1,
        lab.dns_allowed()
    ));
    in_lab(&lab, &["host", "verify"]).expect_code(0);

    // The stranger goes (with its copied stamp it would count as a running
    // sibling for the canary of the next start, which pings it).
    force_delete(&client, &rogue);

    // A binding changed behind corral's back — NIC and stamp rewritten
    // alike, so the provider's own check passes — is refused by the gate.
    in_lab(&lab, &["stop", "--force", &box1]).expect_code(0);
    let forged = "02:c0:0a:fb:00:99";
    rewrite_mac(&client, &box1, forged);
    let run = in_lab(&lab, &["start", &box1]).expect_code(1);
    assert!(
        run.stderr.contains(&format!("port binding of {port}")),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("bound to MAC"), "{}", run.stderr);
    rewrite_mac(&client, &box1, &mac);
    in_lab(&lab, &["start", &box1]).expect_code(0);

    in_lab(&lab, &["rm", "--force", &box1]).expect_code(0);
    assert!(recorded_ports(&lab.state_dir()).is_empty());
    assert!(!nft_set_has("ports", &ifname(&port)));
}

/// The host side of `name`'s NIC while it runs (Incus records it).
fn incus_host_name(client: &IncusClient, name: &str) -> String {
    let inst: Instance = runtime()
        .block_on(client.get(&format!("/1.0/instances/{name}")))
        .unwrap();
    inst.config
        .get("volatile.eth0.host_name")
        .cloned()
        .unwrap_or_else(|| panic!("{name} has no host-side NIC: {:?}", inst.config))
}

/// Creates and starts `name` through Incus's API with an unbound NIC on
/// `bridge` and `model`'s stamp (its identity and binding keys dropped).
fn create_stranger(client: &IncusClient, state: &Path, model: &str, name: &str, bridge: &str) {
    runtime().block_on(async {
        let inst: Instance = client
            .get(&format!("/1.0/instances/{model}"))
            .await
            .unwrap();
        let mut config: BTreeMap<String, String> = inst
            .config
            .iter()
            .filter(|(k, _)| {
                k.starts_with("user.corral.") || k.as_str() == "security.idmap.isolated"
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        config.remove("user.corral.hwaddr");
        config.remove("user.corral.port");
        config.insert("user.corral.id".into(), "0".repeat(32));
        let mut devices = BTreeMap::new();
        devices.insert("root".to_owned(), inst.devices["root"].clone());
        devices.insert("eth0".to_owned(), nic_device(bridge, None));
        let body = json!({
            "name": name,
            "type": "container",
            "profiles": [],
            "start": true,
            "source": {"type": "image", "alias": TEST_IMAGE_ALIAS},
            "config": config,
            "devices": devices,
        });
        client
            .run(
                Method::POST,
                "/1.0/instances",
                Some(&body),
                Duration::from_secs(120),
            )
            .await
            .unwrap();
    });
    // Running and answering exec.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while sh(state, name, "true").code != Some(0) {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} never answered exec"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Stops and deletes `name` through Incus's API.
fn force_delete(client: &IncusClient, name: &str) {
    runtime().block_on(async {
        let path = format!("/1.0/instances/{name}");
        let stop = json!({"action": "stop", "force": true});
        client
            .run(
                Method::PUT,
                &format!("{path}/state"),
                Some(&stop),
                Duration::from_secs(60),
            )
            .await
            .unwrap();
        client
            .run(Method::DELETE, &path, None, Duration::from_secs(60))
            .await
            .unwrap();
    });
}

/// Rewrites the MAC of `name`'s NIC and of its stamp alike (it is stopped).
fn rewrite_mac(client: &IncusClient, name: &str, mac: &str) {
    runtime().block_on(async {
        let path = format!("/1.0/instances/{name}");
        let inst: Instance = client.get(&path).await.unwrap();
        let mut config = inst.config.clone();
        config.insert("user.corral.hwaddr".into(), mac.into());
        let mut devices = inst.devices.clone();
        if let Some(nic) = devices.get_mut("eth0") {
            nic.insert("hwaddr".into(), mac.into());
        }
        client
            .run(
                Method::PUT,
                &path,
                Some(&inst.put_body(&config, &devices)),
                Duration::from_secs(30),
            )
            .await
            .unwrap();
    });
}
