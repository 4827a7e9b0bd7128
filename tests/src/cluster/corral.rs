//! corral on the lab's members: host enforcement applied in a member's
//! namespace ([`MemberCorral`], [`Enforced`]) and attestations taken
//! in-process ([`LabAttester`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::config::ConfigFormat;
use corral_service::{Backend, SandboxService, Settings};

use super::{ClusterLab, ClusterLabError, Member};

/// corral's host enforcement applied in one member's namespace, with a
/// state directory of its own (what that member's corral runs); torn down
/// (gateways stopped, tables and bridges removed) when dropped, which
/// must happen before the lab goes.
#[derive(Debug)]
pub struct MemberCorral {
    netns: String,
    config: PathBuf,
    state: PathBuf,
}

impl MemberCorral {
    /// `corral host apply --netns` for `member` with `config`, recording
    /// into `state`.
    pub fn apply(config: &Path, member: &Member, state: PathBuf) -> Result<Self, ClusterLabError> {
        let corral =
            |e: &dyn std::fmt::Display| ClusterLabError::Corral(format!("{}: {e}", member.name));
        let loaded = corral_service::config::load_file(config, ConfigFormat::Toml)
            .map_err(|e| corral(&e))?;
        let planned = corral_service::host::plan_config(loaded).map_err(|e| corral(&e))?;
        let target = corral_service::Target::open(Some(&member.netns)).map_err(|e| corral(&e))?;
        let applied = Self {
            netns: member.netns.clone(),
            config: config.to_owned(),
            state: state.clone(),
        };
        corral_service::HostService::new(target, state)
            .apply(&planned)
            .map_err(|e| corral(&corral_service::error::chain(&e)))?;
        Ok(applied)
    }

    /// The sandbox service as this member's corral runs it: its namespace,
    /// its state, its own daemon's socket.
    pub fn service(&self, member: &Member) -> Result<SandboxService, ClusterLabError> {
        let corral =
            |e: &dyn std::fmt::Display| ClusterLabError::Corral(format!("{}: {e}", member.name));
        let loaded = corral_service::config::load_file(&self.config, ConfigFormat::Toml)
            .map_err(|e| corral(&e))?;
        let settings = Arc::new(Settings::new(
            loaded,
            Some(member.netns.clone()),
            Some(&self.state),
        ));
        let backend = Backend::select(
            "linux",
            SandboxKind::Incus,
            &settings.config.host,
            member.socket(),
        )
        .map_err(|e| corral(&e))?;
        Ok(SandboxService::new(settings, Arc::new(backend))
            .without_canary("the cluster lab runs each member's verifier itself"))
    }
}

impl MemberCorral {
    fn host_and_plan(
        &self,
    ) -> Result<(corral_service::HostService, corral_service::host::Planned), String> {
        host_and_plan(&self.netns, &self.config, &self.state)
    }

    /// This member's attestation against `expected` (the placing side's
    /// configuration), taken in its namespace.
    pub fn attest(
        &self,
        member: &str,
        expected: &corral_sandbox_core::Config,
    ) -> Result<corral_service::cluster::Attestation, String> {
        let (host, planned) = self.host_and_plan()?;
        corral_service::cluster::attest(member, expected, &planned, &host)
    }

    /// Apply again (what the member's corral does to repair drift).
    pub fn reapply(&self) -> Result<(), String> {
        let (host, planned) = self.host_and_plan()?;
        host.apply(&planned)
            .map(|_| ())
            .map_err(|e| corral_service::error::chain(&e))
    }

    /// Its state directory (where its controller writes the standings).
    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    /// The member's settings, as its corral loads them.
    pub fn settings(&self, member: &Member) -> Result<Settings, ClusterLabError> {
        let loaded = corral_service::config::load_file(&self.config, ConfigFormat::Toml)
            .map_err(|e| ClusterLabError::Corral(format!("{}: {e}", member.name)))?;
        Ok(Settings::new(
            loaded,
            Some(member.netns.clone()),
            Some(&self.state),
        ))
    }

    fn seat(&self) -> Seat {
        Seat {
            netns: self.netns.clone(),
            config: self.config.clone(),
            state: self.state.clone(),
        }
    }
}

fn host_and_plan(
    netns: &str,
    config: &Path,
    state: &Path,
) -> Result<(corral_service::HostService, corral_service::host::Planned), String> {
    let loaded =
        corral_service::config::load_file(config, ConfigFormat::Toml).map_err(|e| e.to_string())?;
    let planned = corral_service::host::plan_config(loaded).map_err(|e| e.to_string())?;
    let target = corral_service::Target::open(Some(netns)).map_err(|e| e.to_string())?;
    Ok((
        corral_service::HostService::new(target, state.to_owned()),
        planned,
    ))
}

/// Where a member's corral runs: enough to take its attestation.
#[derive(Debug, Clone)]
struct Seat {
    netns: String,
    config: PathBuf,
    state: PathBuf,
}

/// Every member's attestation taken in-process, in its namespace, against
/// the placing side's configuration: what the remote attester gets over
/// mutually authenticated TLS from each member's corrald.
#[derive(Debug)]
pub struct LabAttester {
    seats: Vec<(String, Seat)>,
    expected: corral_sandbox_core::Config,
}

impl LabAttester {
    /// Attest `members` (name and its corral) against `expected`.
    pub fn new(
        members: &[(&Member, &MemberCorral)],
        expected: corral_sandbox_core::Config,
    ) -> Self {
        Self {
            seats: members
                .iter()
                .map(|(m, c)| (m.name.clone(), c.seat()))
                .collect(),
            expected,
        }
    }
}

#[async_trait::async_trait]
impl corral_service::cluster::Attester for LabAttester {
    async fn attest(&self, member: &str) -> Result<corral_service::cluster::Attestation, String> {
        let Some((_, seat)) = self.seats.iter().find(|(m, _)| m == member) else {
            return Err(format!("{member}: no corral answers for it"));
        };
        let (host, planned) = host_and_plan(&seat.netns, &seat.config, &seat.state)?;
        corral_service::cluster::attest(member, &self.expected, &planned, &host)
    }
}

impl Drop for MemberCorral {
    fn drop(&mut self) {
        let Ok(target) = corral_service::Target::open(Some(&self.netns)) else {
            return;
        };
        if let Err(e) = corral_service::HostService::new(target, self.state.clone()).teardown() {
            eprintln!("cleanup: corral teardown in {}: {e}", self.netns);
        }
    }
}

/// corral's built-in profiles applied on every member of a lab, each with
/// a state directory of its own under the directory given; torn down when
/// dropped (declare it after the lab, so it goes first).
#[derive(Debug)]
pub struct Enforced {
    /// The configuration file every member applied.
    pub config: PathBuf,
    /// Each member's state directory, in member order.
    pub states: Vec<PathBuf>,
    /// Each member's corral, in member order.
    pub corral: Vec<MemberCorral>,
}

impl ClusterLab {
    /// Write the built-in configuration under `dir` and apply it on every
    /// member (see [`Enforced`]).
    pub fn enforce_builtin(&self, dir: &Path) -> Result<Enforced, ClusterLabError> {
        let config = dir.join("corral.toml");
        std::fs::write(
            &config,
            corral_sandbox_core::Config::builtin_default().to_toml_string(),
        )?;
        let states: Vec<PathBuf> = self.members.iter().map(|m| dir.join(&m.name)).collect();
        let corral = self
            .members
            .iter()
            .zip(&states)
            .map(|(m, s)| MemberCorral::apply(&config, m, s.clone()))
            .collect::<Result<_, _>>()?;
        Ok(Enforced {
            config,
            states,
            corral,
        })
    }
}
