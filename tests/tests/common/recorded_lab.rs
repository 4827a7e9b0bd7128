//! The drill's namespace lab with one allowlist profile whose plan is
//! recorded in a state directory as `corral host apply` records it (and
//! applied), so a `HostService` — the kernel watch's view of the host —
//! sees it: shared by `tests/kernel_watch.rs` and `benches/heal.rs`.

// Each of the two targets that include this file uses part of it.
#![allow(dead_code)]

use std::os::fd::AsRawFd;

use corral_drill::lab::Lab;
use corral_egress::host::{AppliedInputs, StateStore};
use corral_egress::plan::test_support::profile;
use corral_egress::resolve::Resolution;
use corral_sandbox_core::config::{Config, HostConfig, PhaseProfiles};
use corral_sandbox_core::{EgressMode, ProfileSet};
use corral_service::host::{HostService, Planned, applied};
use corral_service::target::Target;

/// The allowlist's one literal destination, an echo service of the lab.
pub const ALLOWED: (std::net::IpAddr, u16) = (
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(203, 0, 113, 10)),
    443,
);

/// A lab whose plan is recorded and in force.
pub struct RecordedLab {
    /// The namespaces.
    pub lab: Lab,
    /// The host namespace as a `--netns` path.
    pub path: String,
    /// The state directory holding the record.
    pub state: tempfile::TempDir,
    /// What the record says was applied.
    pub planned: Planned,
}

impl RecordedLab {
    /// Profile `name` (bridge `cb-NAME`, `subnet`) allowing `*.corral.test`
    /// and [`ALLOWED`], recorded and applied.
    ///
    /// # Panics
    /// When any step of setting the lab up fails (test code).
    pub fn new(name: &str, subnet: &str) -> Self {
        let p = profile(
            name,
            &format!("cb-{name}"),
            subnet,
            EgressMode::Allowlist,
            &["*.corral.test", "203.0.113.10:443/tcp"],
        );
        let lab = Lab::new(&ProfileSet::new(vec![p]).unwrap(), &Resolution::new()).unwrap();
        lab.control().unwrap();
        let path = format!(
            "/proc/{}/fd/{}",
            std::process::id(),
            lab.topo.host.fd().as_raw_fd()
        );
        let state = tempfile::tempdir().unwrap();
        let config = Config {
            host: HostConfig::default(),
            profiles: lab.profiles.clone(),
            phases: PhaseProfiles::default(),
        };
        let bridges: Vec<String> = lab
            .plan
            .bridges
            .iter()
            .map(|b| b.name.to_string())
            .collect();
        let nets = lab.host.networks(&bridges).unwrap().to_nets();
        StateStore::new(state.path())
            .save(
                &AppliedInputs::new(&config, Resolution::new())
                    .with_host_networks(Some(nets))
                    .with_bindings(lab.plan.bindings.clone()),
            )
            .unwrap();
        let service = HostService::new(Target::open(Some(&path)).unwrap(), state.path().to_owned());
        let planned = applied(&service.store()).unwrap().unwrap();
        lab.host.apply(&planned.plan).unwrap();
        Self {
            lab,
            path,
            state,
            planned,
        }
    }

    /// The host service over this lab's namespace and state directory.
    ///
    /// # Panics
    /// When the namespace cannot be opened (test code).
    pub fn service(&self) -> HostService {
        HostService::new(
            Target::open(Some(&self.path)).unwrap(),
            self.state.path().to_owned(),
        )
    }
}
