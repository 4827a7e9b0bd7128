//! The ownership stamp and the topology check, against a real daemon.

mod common;

use std::collections::BTreeMap;

use common::{ok, provider, spec, unique};
use corral_provider_incus::api::{Instance, nic_device};
use corral_sandbox_core::sandbox::{
    BoundNic, ExecRequest, NetworkAttachment, ProviderError, Sandbox, SandboxProvider,
    SandboxState, StopOptions,
};
use corral_sandbox_core::{BridgeName, InterfaceName, ProfileName};
use http::Method;

fn not_owned<T: std::fmt::Debug>(r: Result<T, ProviderError>, op: &str) {
    assert!(
        matches!(r, Err(ProviderError::NotOwned { .. })),
        "{op} on an unstamped instance was not refused as NotOwned: {r:?}"
    );
}

#[tokio::test]
async fn an_unstamped_instance_is_refused_by_every_operation() {
    let Some(p) = provider().await else { return };
    let name = unique("foreign");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    ok(sb.snapshot("s").await, "snapshot");

    // Strip the stamp behind corral's back, through the raw API.
    let client = p.client();
    let path = format!("/1.0/instances/{name}");
    let inst: Instance = ok(client.get(&path).await, "get");
    let config: BTreeMap<String, String> = inst
        .config
        .iter()
        .filter(|(k, _)| !k.starts_with("user.corral."))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    ok(
        client
            .run(
                Method::PUT,
                &path,
                Some(&inst.put_body(&config, &inst.devices)),
                std::time::Duration::from_secs(30),
            )
            .await,
        "strip stamp",
    );

    not_owned(p.open(&name).await, "open");
    not_owned(sb.info().await, "info");
    not_owned(sb.start().await, "start");
    not_owned(sb.stop(StopOptions::default()).await, "stop");
    not_owned(sb.restart(StopOptions::default()).await, "restart");
    not_owned(sb.exec(&ExecRequest::new(["true"])).await, "exec");
    not_owned(sb.snapshot("t").await, "snapshot");
    not_owned(sb.restore("s").await, "restore");
    not_owned(sb.snapshots().await, "snapshots");
    not_owned(sb.delete_snapshot("s").await, "delete snapshot");
    not_owned(sb.clone_to(&unique("theft"), None).await, "clone");
    not_owned(sb.push_file("/tmp/x", b"x", 0o644).await, "push");
    not_owned(sb.pull_file("/etc/passwd").await, "pull");
    let tmp = ok(tempfile::tempdir(), "tempdir");
    not_owned(sb.export(&tmp.path().join("b.tar.gz")).await, "export");
    assert!(!tmp.path().join("b.tar.gz").exists());
    assert!(!ok(p.list().await, "list").iter().any(|i| i.name == name));
    assert!(matches!(
        p.open(&unique("absent")).await,
        Err(ProviderError::NotFound { .. })
    ));
    // Rename and delete consume the handle; each gets its own.
    let handle = corral_provider_incus::IncusSandbox::for_tests(&p, &name);
    not_owned(handle.rename(&unique("moved")).await.map(|_| ()), "rename");
    let handle = corral_provider_incus::IncusSandbox::for_tests(&p, &name);
    not_owned(handle.delete().await, "delete");

    // Still there, untouched: remove it the backend's way.
    ok(
        client
            .run(
                Method::DELETE,
                &path,
                None,
                std::time::Duration::from_secs(60),
            )
            .await,
        "raw delete",
    );
}

#[tokio::test]
async fn an_extra_nic_added_behind_corrals_back_refuses_to_start() {
    let Some(p) = provider().await else { return };
    let name = unique("tamper");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    let client = p.client();
    let path = format!("/1.0/instances/{name}");
    let inst: Instance = ok(client.get(&path).await, "get");
    let mut devices = inst.devices.clone();
    devices.insert("eth1".into(), nic_device("crl-tamper0", None));
    ok(
        client
            .run(
                Method::PUT,
                &path,
                Some(&inst.put_body(&inst.config, &devices)),
                std::time::Duration::from_secs(30),
            )
            .await,
        "add NIC",
    );
    let err = sb.start().await.err();
    let Some(ProviderError::Topology { differences, .. }) = &err else {
        panic!("expected a topology refusal, got {err:?}");
    };
    assert!(
        differences.iter().any(|d| d.contains("eth1")),
        "{differences:?}"
    );
    assert_eq!(ok(sb.info().await, "info").state, SandboxState::Stopped);

    // raw.* and nesting are refused too.
    let inst: Instance = ok(client.get(&path).await, "get");
    let mut config = inst.config.clone();
    config.insert("security.nesting".into(), "true".into());
    ok(
        client
            .run(
                Method::PUT,
                &path,
                Some(&inst.put_body(&config, &inst.devices)),
                std::time::Duration::from_secs(30),
            )
            .await
            .map(|_| ())
            .or_else(|e| {
                // The restricted project may refuse nesting outright: also a pass.
                if e.to_string().contains("nesting") {
                    Ok(())
                } else {
                    Err(e)
                }
            }),
        "set nesting",
    );
    assert!(matches!(
        sb.start().await,
        Err(ProviderError::Topology { .. })
    ));
    ok(sb.delete().await, "delete");
}

#[tokio::test]
async fn a_bound_nic_changed_behind_corrals_back_refuses_to_start() {
    let Some(p) = provider().await else { return };
    let name = unique("rebound");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let bound = BoundNic {
        mac: ok("02:c0:0a:63:03:07".parse(), "mac"),
        port: ok(InterfaceName::new("crltamper1"), "port"),
    };
    let mut s = spec(&name);
    // On a bridge that does not exist: the start fails after the check.
    s.network = Some(NetworkAttachment {
        profile: ok(ProfileName::new("claude"), "profile"),
        bridge: ok(BridgeName::new("crl-noexist1"), "bridge"),
        subnet_v4: ok("10.99.3.0/24".parse(), "subnet"),
        gateway_v4: ok("10.99.3.1".parse(), "gw"),
        resolved_allow: Vec::new(),
        nic: Some(bound.clone()),
    });
    let sb = ok(p.create(&s).await, "create");
    let client = p.client();
    let path = format!("/1.0/instances/{name}");
    let inst: Instance = ok(client.get(&path).await, "get");
    let nic = inst.devices.get("eth0").cloned().unwrap_or_default();
    assert_eq!(
        nic.get("hwaddr").map(String::as_str),
        Some("02:c0:0a:63:03:07")
    );
    assert_eq!(nic.get("host_name").map(String::as_str), Some("crltamper1"));
    assert_eq!(ok(sb.info().await, "info").nic, Some(bound));

    // Control: as corral built it, the topology check lets the start
    // through (Incus then fails on the missing bridge).
    let control = sb.start().await;
    assert!(
        !matches!(control, Err(ProviderError::Topology { .. }) | Ok(())),
        "control: expected Incus's own failure on the missing bridge, got {control:?}"
    );

    for (key, value) in [
        ("hwaddr", Some("02:c0:0a:63:03:08")),
        ("host_name", Some("vethevil0")),
        ("hwaddr", None),
    ] {
        // Fresh: the failed start recorded volatile keys of its own.
        let cur: Instance = ok(client.get(&path).await, "get");
        let mut devices = cur.devices.clone();
        let mut changed = nic.clone();
        match value {
            Some(v) => changed.insert(key.into(), v.into()),
            None => changed.remove(key),
        };
        devices.insert("eth0".into(), changed);
        ok(
            client
                .run(
                    Method::PUT,
                    &path,
                    Some(&cur.put_body(&cur.config, &devices)),
                    std::time::Duration::from_secs(30),
                )
                .await,
            "change the NIC",
        );
        let err = sb.start().await.err();
        let Some(ProviderError::Topology { differences, .. }) = &err else {
            panic!("{key}={value:?}: expected a topology refusal, got {err:?}");
        };
        assert!(
            differences.iter().any(|d| d.contains("NIC `eth0`")),
            "{differences:?}"
        );
        assert_eq!(ok(sb.info().await, "info").state, SandboxState::Stopped);
    }
    ok(sb.delete().await, "delete");
}
