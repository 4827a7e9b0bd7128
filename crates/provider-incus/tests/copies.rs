//! Clones and backups: a copy gets a fresh identity and a fresh stamp.

mod common;

use std::time::Duration;

use common::{ok, provider, spec, unique};
use corral_provider_incus::api::Instance;
use corral_sandbox_core::sandbox::{
    BoundNic, ExecRequest, NetworkAttachment, ProviderError, SandboxProvider, SandboxState,
    StopOptions,
};
use corral_sandbox_core::{BridgeName, InterfaceName, ProfileName};

const IMAGE_MACHINE_ID: &[u8] = b"0123456789abcdef0123456789abcdef\n";

async fn raw(p: &corral_provider_incus::IncusProvider, name: &str) -> Instance {
    ok(
        p.client().get(&format!("/1.0/instances/{name}")).await,
        "raw get",
    )
}

#[tokio::test]
async fn clones_get_a_fresh_identity() {
    let Some(p) = provider().await else { return };
    // A NIC (on a bridge that need not exist: nothing here starts it).
    let name = unique("orig");
    let (copy, fromsnap) = (unique("copy"), unique("fromsnap"));
    let _cleanup = common::Cleanup::new(&p, &[&name, &copy, &fromsnap]);
    let mut s = spec(&name);
    // Bound, as corral's service binds it: the copies must not inherit it.
    let bound = BoundNic {
        mac: ok("02:c0:0a:63:02:09".parse(), "mac"),
        port: ok(InterfaceName::new("crlcopytest0"), "port"),
    };
    s.network = Some(NetworkAttachment {
        profile: ok(ProfileName::new("claude"), "profile"),
        bridge: ok(BridgeName::new("crl-noexist0"), "bridge"),
        subnet_v4: ok("10.99.2.0/24".parse(), "subnet"),
        gateway_v4: ok("10.99.2.1".parse(), "gw"),
        resolved_allow: Vec::new(),
        nic: Some(bound.clone()),
    });
    let orig = ok(p.create(&s).await, "create");
    assert_eq!(ok(orig.info().await, "info").nic, Some(bound.clone()));
    assert_eq!(ok(orig.nic().await, "nic"), Some(bound.clone()));
    assert_eq!(
        ok(orig.pull_file("/etc/machine-id").await, "pull"),
        IMAGE_MACHINE_ID
    );
    ok(orig.snapshot("base").await, "snapshot");

    let cloned = ok(orig.clone_to(&copy, None).await, "clone");
    let snapclone = ok(
        orig.clone_to(&fromsnap, Some("base")).await,
        "clone from snapshot",
    );

    let (a, b, c) = (
        raw(&p, name.as_str()).await,
        raw(&p, copy.as_str()).await,
        raw(&p, fromsnap.as_str()).await,
    );
    for other in [&b, &c] {
        assert_ne!(
            a.config.get("user.corral.id"),
            other.config.get("user.corral.id")
        );
        assert_eq!(
            other.config.get("user.corral.profile").map(String::as_str),
            Some("claude")
        );
        let (ma, mo) = (
            a.config.get("volatile.eth0.hwaddr"),
            other.config.get("volatile.eth0.hwaddr"),
        );
        assert!(mo.is_none() || mo != ma, "clone kept the MAC {ma:?}");
        assert_ne!(
            a.config.get("volatile.uuid"),
            other.config.get("volatile.uuid")
        );
        // The same NIC, but without the origin's bound MAC and port name.
        let mut unbound = a.devices.get("eth0").cloned().unwrap_or_default();
        assert_eq!(
            unbound.remove("hwaddr").as_deref(),
            Some("02:c0:0a:63:02:09")
        );
        assert_eq!(unbound.remove("host_name").as_deref(), Some("crlcopytest0"));
        assert_eq!(other.devices.get("eth0"), Some(&unbound));
        assert!(!other.config.contains_key("user.corral.port"));
    }
    assert_eq!(ok(cloned.info().await, "info").nic, None);
    assert_eq!(ok(cloned.nic().await, "nic"), None);
    assert_eq!(
        ok(cloned.pull_file("/etc/machine-id").await, "pull clone"),
        b""
    );
    assert_eq!(
        ok(
            snapclone.pull_file("/etc/machine-id").await,
            "pull snapclone"
        ),
        b""
    );
    assert_eq!(
        ok(orig.pull_file("/etc/machine-id").await, "pull orig"),
        IMAGE_MACHINE_ID
    );
    // Clones carry no snapshots of their origin.
    assert!(ok(cloned.snapshots().await, "snapshots").is_empty());
    assert!(matches!(
        orig.clone_to(&copy, None).await,
        Err(ProviderError::AlreadyExists { .. })
    ));
    assert!(matches!(
        orig.clone_to(&unique("nosnap"), Some("missing")).await,
        Err(ProviderError::NotFound { .. })
    ));
    for sb in [orig, cloned, snapclone] {
        ok(sb.delete().await, "delete");
    }
}

#[tokio::test]
async fn export_rm_import_round_trip() {
    let Some(p) = provider().await else { return };
    let name = unique("exp");
    let _cleanup = common::Cleanup::new(&p, &[&name]);
    let sb = ok(p.create(&spec(&name)).await, "create");
    ok(sb.start().await, "start");
    ok(sb.push_file("/root/work", b"precious", 0o640).await, "push");
    ok(sb.snapshot("before").await, "snapshot");
    let before = raw(&p, name.as_str()).await;

    let tmp = ok(tempfile::tempdir(), "tempdir");
    let file = tmp.path().join("exp.tar.gz");
    ok(sb.export(&file).await, "export");
    let meta = ok(std::fs::metadata(&file), "stat backup");
    assert!(meta.len() > 0);
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    assert!(matches!(
        sb.export(&file).await,
        Err(ProviderError::AlreadyExists { .. })
    ));
    ok(
        sb.stop(StopOptions {
            force: true,
            timeout: None,
        })
        .await,
        "stop",
    );
    ok(sb.delete().await, "delete");

    let imported = ok(p.import(&file, &name).await, "import");
    let after = raw(&p, name.as_str()).await;
    assert_ne!(
        before.config.get("user.corral.id"),
        after.config.get("user.corral.id")
    );
    assert_eq!(
        after.config.get("user.corral.template"),
        before.config.get("user.corral.template")
    );
    assert!(after.profiles.is_empty());
    assert_eq!(
        ok(imported.pull_file("/root/work").await, "pull"),
        b"precious"
    );
    assert_eq!(
        ok(imported.pull_file("/etc/machine-id").await, "machine-id"),
        b""
    );
    let snaps = ok(imported.snapshots().await, "snapshots");
    assert_eq!(
        snaps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["before"]
    );
    ok(imported.start().await, "start imported");
    assert_eq!(
        ok(imported.info().await, "info").state,
        SandboxState::Running
    );
    let out = ok(
        imported
            .exec(&ExecRequest::new(["cat", "/root/work"]))
            .await,
        "exec",
    );
    assert_eq!(out.stdout, b"precious");

    // A taken name is refused before any transfer.
    let started = std::time::Instant::now();
    let err = p.import(&file, &name).await.err();
    assert!(
        matches!(err, Some(ProviderError::AlreadyExists { .. })),
        "{err:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(matches!(
        p.import(&tmp.path().join("missing.tar.gz"), &unique("nofile"))
            .await,
        Err(ProviderError::NotFound { .. })
    ));
    ok(imported.delete().await, "delete imported");
}
