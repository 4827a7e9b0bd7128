//! Shared set-up for the real-daemon tests: the provider, unique names, and
//! the CI rule (`corral_test_support::gate`: a missing daemon fails under a
//! truthy `CI`, is a counted skip otherwise).
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

use corral_provider_incus::{IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::SandboxSpec;

/// The provider on the local daemon, or `None` (skip) when there is no
/// daemon and we are not in CI.
pub async fn provider() -> Option<IncusProvider> {
    provider_with(IncusConfig::local()).await
}

/// Like [`provider`] with a custom config. `CORRAL_INCUS_SOCKET` overrides
/// the socket path (to check the CI rule without stopping the daemon).
pub async fn provider_with(mut config: IncusConfig) -> Option<IncusProvider> {
    // The one rule (fail under CI, counted skip elsewhere); it honours
    // CORRAL_INCUS_SOCKET.
    let socket = corral_test_support::gate::incus()?;
    config.endpoint = corral_provider_incus::Endpoint::Unix(socket);
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

/// Removes instance `name` when dropped (force, through the raw API), so a
/// failing test leaves nothing behind. Harmless when the test already
/// deleted it.
pub struct Cleanup {
    client: corral_provider_incus::IncusClient,
    names: Vec<String>,
}

impl Cleanup {
    /// Guard the instances named `names` of `provider`'s project.
    pub fn new(provider: &IncusProvider, names: &[&SandboxName]) -> Self {
        Self {
            client: provider.client().clone(),
            names: names.iter().map(|n| n.to_string()).collect(),
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let client = self.client.clone();
        let names = std::mem::take(&mut self.names);
        // Drop cannot await; a throwaway thread with its own runtime can.
        let worker = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                for name in names {
                    let path = format!("/1.0/instances/{name}");
                    let stop = serde_json::json!({"action": "stop", "force": true});
                    let wait = std::time::Duration::from_secs(60);
                    let _ = client
                        .run(
                            http::Method::PUT,
                            &format!("{path}/state"),
                            Some(&stop),
                            wait,
                        )
                        .await;
                    let _ = client.run(http::Method::DELETE, &path, None, wait).await;
                }
            });
        });
        let _ = worker.join();
    }
}
