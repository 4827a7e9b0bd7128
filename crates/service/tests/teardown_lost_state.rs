//! Teardown after a lost state directory: the bridges it finds stamped in
//! the namespace are deleted whatever the state directory says, so the
//! gateways serving them are found from the processes themselves and
//! stopped, and named — before, they kept running and nothing said so.
//! Real dnsmasq started by a real apply in an anonymous namespace.

// Test helpers panic to report a failure, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::fd::AsRawFd;
use std::path::Path;

use corral_egress::netns::Netns;
use corral_gateway::GatewayStatus;
use corral_sandbox_core::Config;
use corral_service::Target;
use corral_service::config::{LoadedConfig, Origin};
use corral_service::host::{HostService, plan_config};

#[test]
fn teardown_with_another_state_directory_stops_the_gateways_of_the_bridges_it_deletes() {
    if !corral_test_support::gate::netns() {
        return;
    }
    let ns = Netns::new().unwrap();
    let path = format!("/proc/{}/fd/{}", std::process::id(), ns.fd().as_raw_fd());
    let text = "[[profile]]\nname = \"tl\"\nbridge = \"corral-tl\"\nsubnet = \"10.249.4.0/24\"\nmode = \"internet\"\n";
    let planned = plan_config(LoadedConfig {
        config: Config::from_toml_str(text, "teardown_lost_state").unwrap(),
        origin: Origin::Builtin,
    })
    .unwrap();
    let (kept, lost) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let host = |dir: &Path| HostService::new(Target::open(Some(&path)).unwrap(), dir.to_owned());
    host(kept.path()).apply(&planned).unwrap();
    let pid = match corral_gateway::status_recorded(kept.path())
        .into_iter()
        .find(|g| g.bridge.as_str() == "corral-tl")
        .map(|g| g.status)
    {
        Some(GatewayStatus::Running { pid }) => pid,
        other => panic!("control: the apply's gateway does not run: {other:?}"),
    };

    // The state directory that started it is not the one tearing down.
    let report = host(lost.path()).teardown().unwrap();
    assert_eq!(report.bridges_deleted, vec!["corral-tl".to_owned()]);
    assert!(report.is_clean(), "{:?}", report.errors);
    assert!(
        report
            .gateways_stopped
            .iter()
            .any(|g| g.contains(&format!("pid {pid}"))),
        "{:?}",
        report.gateways_stopped
    );
    let gone = !Path::new(&format!("/proc/{pid}")).exists()
        || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        });
    assert!(gone, "the gateway of a deleted bridge still runs");
    let _ = host(kept.path()).teardown();
}
