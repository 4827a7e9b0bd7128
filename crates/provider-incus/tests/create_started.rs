//! Create and start in one request, against the real daemon: a sandbox
//! that can start comes back running; one whose start fails (its NIC's
//! bridge does not exist) comes back made, stopped, with the start's
//! failure, for the caller to dispose of; one that cannot be made at all
//! (an unknown image) is an error and leaves nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{ok, provider, spec, unique};
use corral_sandbox_core::sandbox::{
    NetworkAttachment, ProviderError, SandboxProvider, SandboxState,
};
use corral_sandbox_core::{BridgeName, ProfileName};

#[tokio::test]
async fn a_create_that_starts_reports_a_failed_start_apart_from_a_failed_create() {
    let Some(p) = provider().await else { return };
    let (good, nobridge, noimage) = (unique("cs-good"), unique("cs-nobr"), unique("cs-noimg"));
    let _cleanup = common::Cleanup::new(&p, &[&good, &nobridge, &noimage]);

    let made = ok(p.create_started(&spec(&good)).await, "create started");
    ok(made.started, "start");
    let info = ok(made.sandbox.info().await, "info");
    assert_eq!(info.state, SandboxState::Running);

    let mut s = spec(&nobridge);
    s.network = Some(NetworkAttachment {
        profile: ok(ProfileName::new("claude"), "profile"),
        bridge: ok(BridgeName::new("crl-noexist1"), "bridge"),
        subnet_v4: ok("10.99.3.0/24".parse(), "subnet"),
        gateway_v4: ok("10.99.3.1".parse(), "gw"),
        resolved_allow: Vec::new(),
        nic: None,
    });
    let made = ok(p.create_started(&s).await, "made, not started");
    assert!(made.started.is_err(), "started without its bridge");
    let info = ok(made.sandbox.info().await, "info");
    assert_eq!(info.state, SandboxState::Stopped);
    ok(made.sandbox.delete().await, "dispose of it");
    assert!(matches!(
        p.open(&nobridge).await,
        Err(ProviderError::NotFound { .. })
    ));

    let mut s = spec(&noimage);
    s.image = "corral-no-such-image".into();
    let err = p.create_started(&s).await.err();
    assert!(
        matches!(&err, Some(ProviderError::ImageMissing { .. })),
        "{err:?}"
    );
    assert!(matches!(
        p.open(&noimage).await,
        Err(ProviderError::NotFound { .. })
    ));
}
