//! What the suites that drive the real Incus daemon share: the socket
//! (or a counted skip), a raw client on corral's project for guards and
//! tampering, a guard that force-deletes named instances, unique names and
//! a corrald on loopback TCP.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use axum::http::Method;
use corral_provider_incus::{IncusClient, IncusConfig, IncusProvider};
use serde_json::json;

use super::Server;

/// The daemon's socket (`CORRAL_INCUS_SOCKET` overrides it, so the CI rule
/// can be checked without stopping the daemon), or `None` to skip.
pub fn incus_socket(_test: &str) -> Option<String> {
    let socket = corral_test_support::gate::incus()?
        .to_string_lossy()
        .into_owned();
    {
        // The first connection creates corral's project; on a fresh daemon,
        // parallel first connections would race to create it, so one test
        // does it before any corrald (or raw client) of this suite starts.
        static PROJECT: Mutex<bool> = Mutex::new(false);
        let mut ready = PROJECT.lock().unwrap_or_else(PoisonError::into_inner);
        if !*ready {
            drop(raw_client(&socket));
            *ready = true;
        }
    }
    Some(socket)
}

/// A current-thread runtime for one blocking call.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A raw client on corral's project, for the guard and for tampering.
pub fn raw_client(socket: &str) -> IncusClient {
    let mut config = IncusConfig::local();
    config.endpoint = corral_provider_incus::Endpoint::Unix(socket.into());
    runtime()
        .block_on(IncusProvider::connect(config))
        .unwrap_or_else(|e| panic!("cannot connect to the Incus daemon: {e}"))
        .client()
        .clone()
}

/// The instance's status as Incus reports it (`Running`, `Stopped`, …),
/// `None` when it does not exist.
pub fn status(client: &IncusClient, name: &str) -> Option<String> {
    runtime()
        .block_on(
            client.get::<corral_provider_incus::api::Instance>(&format!("/1.0/instances/{name}")),
        )
        .ok()
        .map(|i| i.status)
}

/// Force-deletes the named instances when dropped.
pub struct Cleanup {
    /// The raw client.
    pub client: IncusClient,
    /// The instances.
    pub names: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        force_delete(&self.client, &self.names);
    }
}

/// Force-deletes every instance whose name starts with a prefix when
/// dropped (for tests whose sandboxes are named by corrald or by many
/// clients).
pub struct PrefixCleanup {
    /// The raw client.
    pub client: IncusClient,
    /// The prefix.
    pub prefix: String,
}

impl PrefixCleanup {
    /// The instances of corral's project whose names start with the prefix.
    pub fn instances(&self) -> Vec<String> {
        runtime()
            .block_on(
                self.client
                    .get::<Vec<corral_provider_incus::api::Instance>>("/1.0/instances?recursion=1"),
            )
            .unwrap()
            .into_iter()
            .map(|i| i.name)
            .filter(|n| n.starts_with(&self.prefix))
            .collect()
    }
}

impl Drop for PrefixCleanup {
    fn drop(&mut self) {
        force_delete(&self.client, &self.instances());
    }
}

fn force_delete(client: &IncusClient, names: &[String]) {
    let wait = Duration::from_secs(60);
    runtime().block_on(async {
        for name in names {
            let path = format!("/1.0/instances/{name}");
            let stop = json!({"action": "stop", "force": true});
            let _ = client
                .run(Method::PUT, &format!("{path}/state"), Some(&stop), wait)
                .await;
            let _ = client.run(Method::DELETE, &path, None, wait).await;
        }
    });
}

/// A name no other test (or run) uses.
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("t-api-{tag}-{}-{:x}", std::process::id(), nanos & 0xffff)
}

/// corrald on loopback TCP, driving the daemon at `socket`.
pub fn server(socket: &str) -> Server {
    Server::start(&["--listen", "127.0.0.1:0", "--incus-socket", socket])
}
