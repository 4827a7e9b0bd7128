//! What the sandbox suites share: Incus's own API on corral's project (to
//! inspect and tamper behind corral's back), a guard that force-deletes
//! every instance a test names, unique names, and `corral` run against a
//! host lab's configuration and state directory.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use corral_provider_incus::api::Instance;
use corral_provider_incus::{IncusClient, IncusConfig, IncusProvider, TEST_IMAGE_ALIAS};
use corral_tests::hostlab::HostLab;
use http::Method;
use serde_json::json;

use super::{CORRAL, Run, corral};

/// A current-thread runtime for one blocking call.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Incus's own API on corral's project, or `None` (a counted skip) without
/// a daemon.
pub fn incus() -> Option<IncusClient> {
    corral_test_support::gate::incus()?;
    // Connecting converges corral's project; one test at a time does it.
    static ONCE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _once = ONCE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    Some(
        runtime()
            .block_on(IncusProvider::connect(IncusConfig::local()))
            .unwrap_or_else(|e| panic!("cannot connect to Incus: {e}"))
            .client()
            .clone(),
    )
}

/// The instance as Incus reports it (`None`: no such instance).
pub fn instance(client: &IncusClient, name: &str) -> Option<Instance> {
    runtime()
        .block_on(client.get::<Instance>(&format!("/1.0/instances/{name}")))
        .ok()
}

/// The instance's status as Incus reports it (`None`: no such instance).
pub fn incus_status(client: &IncusClient, name: &str) -> Option<String> {
    instance(client, name).map(|i| i.status)
}

/// Remove corral's ownership stamp from an instance, behind its back.
pub fn unstamp(client: &IncusClient, name: &str) {
    runtime().block_on(async {
        let path = format!("/1.0/instances/{name}");
        let inst: Instance = client.get(&path).await.unwrap();
        let config: std::collections::BTreeMap<String, String> = inst
            .config
            .iter()
            .filter(|(k, _)| !k.starts_with("user.corral."))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        client
            .run(
                Method::PUT,
                &path,
                Some(&inst.put_body(&config, &inst.devices)),
                Duration::from_secs(30),
            )
            .await
            .unwrap();
    });
}

/// Force-deletes the named instances when dropped.
pub struct Cleanup {
    /// Incus's API.
    pub client: IncusClient,
    /// The instances.
    pub names: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let wait = Duration::from_secs(60);
        runtime().block_on(async {
            for name in &self.names {
                let path = format!("/1.0/instances/{name}");
                let stop = json!({"action": "stop", "force": true});
                let _ = self
                    .client
                    .run(Method::PUT, &format!("{path}/state"), Some(&stop), wait)
                    .await;
                let _ = self.client.run(Method::DELETE, &path, None, wait).await;
            }
        });
    }
}

/// A name no other test (or run) uses.
pub fn unique(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t-cli-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// `corral ARGS… --config C --state-dir S` for the lab.
pub fn in_lab(lab: &HostLab, args: &[&str]) -> Run {
    let config = lab.config_path();
    let state = lab.state_dir();
    in_state(
        &state,
        &[args, &["--config", config.to_str().unwrap()]].concat(),
    )
}

/// `corral ARGS… --config CONFIG --state-dir STATE`.
pub fn in_dirs(config: &Path, state: &Path, args: &[&str]) -> Run {
    in_state(
        state,
        &[args, &["--config", config.to_str().unwrap()]].concat(),
    )
}

/// Token the lab's echo listeners send back.
pub const TOKEN: &str = "corral-cli-probe";

/// A TCP round trip from inside `name` to `to` (busybox `nc`), through
/// `corral exec` with corral's state (its store of events) in `state`
/// (`None`: the default directory): reached only when the token comes back.
pub fn reached_with(state: Option<&Path>, name: &str, to: std::net::SocketAddr) -> bool {
    let script = format!("echo {TOKEN} | timeout 5 nc -w 3 \"$0\" \"$1\"");
    let (ip, port) = (to.ip().to_string(), to.port().to_string());
    let mut args = vec!["exec", name, "-n"];
    let state = state.map(|s| s.to_str().unwrap().to_owned());
    if let Some(s) = &state {
        args.extend(["--state-dir", s.as_str()]);
    }
    args.extend(["--", "sh", "-c", &script, &ip, &port]);
    let run = corral(&args);
    assert!(
        matches!(run.code, Some(0 | 1)),
        "the probe to {to} did not run: {run:?}"
    );
    run.stdout.contains(TOKEN)
}

/// `corral ARGS… --state-dir S`.
pub fn in_state(state: &Path, args: &[&str]) -> Run {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--state-dir", state.to_str().unwrap()]);
    corral(&all)
}

/// `corral ARGS…` with standard input from `/dev/null` (no terminal).
pub fn no_terminal(args: &[&str]) -> Run {
    Command::new(CORRAL)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
        .into()
}

/// `corral exec NAME -- cat PATH`, its standard output.
pub fn cat(name: &str, path: &str) -> String {
    corral(&["exec", name, "-n", "--", "cat", path])
        .expect_code(0)
        .stdout
}

/// A plain sandbox from the test image, running.
pub fn plain(state: &Path, name: &str) {
    in_state(
        state,
        &["new", name, "--no-network", "--image", TEST_IMAGE_ALIAS],
    )
    .expect_code(0);
}
