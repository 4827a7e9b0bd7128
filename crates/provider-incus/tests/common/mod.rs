//! Shared set-up for the real-daemon tests: the provider, unique names, and
//! the CI rule (a missing daemon fails under `CI=true`, skips otherwise).
#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use corral_provider_incus::client::DEFAULT_SOCKET;
use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::SandboxSpec;

/// The provider on the local daemon, or `None` (skip) when there is no
/// daemon and we are not in CI.
pub async fn provider() -> Option<IncusProvider> {
    provider_with(IncusConfig::local()).await
}

/// Like [`provider`] with a custom config.
pub async fn provider_with(config: IncusConfig) -> Option<IncusProvider> {
    if !Path::new(DEFAULT_SOCKET).exists() {
        let why = format!(
            "no Incus daemon socket at {DEFAULT_SOCKET}; run scripts/incus-setup.sh and scripts/incus-image.sh"
        );
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
        eprintln!("skipped: {why}");
        return None;
    }
    match IncusProvider::connect(config).await {
        Ok(p) => Some(p),
        Err(e) => panic!("cannot connect to the local Incus daemon: {e}"),
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name unique to this process and call, so tests run in parallel and
/// never collide with another run's leftovers.
pub fn unique(tag: &str) -> SandboxName {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    SandboxName::new(format!("t-{tag}-{pid}-{n}-{:x}", nanos & 0xffff))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A no-network spec from the test image.
pub fn spec(name: &SandboxName) -> SandboxSpec {
    SandboxSpec::new(name.clone(), TEST_IMAGE_ALIAS)
}

/// Run `f`, panicking with context on error.
pub fn ok<T, E: std::fmt::Display>(r: Result<T, E>, what: &str) -> T {
    r.unwrap_or_else(|e| panic!("{what}: {e}"))
}
