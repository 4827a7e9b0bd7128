//! What corral's resolver serves on a bridge, recorded by the apply in the
//! bridge's gateway directory (`resolver.json`, beside dnsmasq's
//! configuration) and read by whoever hosts the resolver (corrald's
//! supervisor, the drill's lab). The file is the contract, as dnsmasq's
//! configuration file is: an apply from the CLI and one through corrald
//! reach the host the same way.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_sandbox_core::{BridgeName, DnsPolicy, Profile, ProfileSet};

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::{Policy, Upstreams};
use crate::error::GatewayError;
use crate::paths::GatewayPaths;
use crate::process::Gateway;
use crate::spec::DnsTiming;

/// The file, in each gateway's directory.
pub const RESOLVER_FILE: &str = "resolver.json";

/// How long one upstream exchange may take before the next upstream is
/// asked (or, after the last, the sandbox is answered SERVFAIL).
pub const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(4);

/// One bridge's resolver, as the apply recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolverSpec {
    /// The profile served (its bridge, gateway address and names).
    pub profile: Profile,
    /// The host's upstream resolvers, asked in turn until one answers.
    pub upstreams: Vec<SocketAddr>,
    /// The host's own networks, never handed out.
    pub host_networks: Vec<IpNet>,
    /// The most TTL a sandbox is handed, seconds.
    pub ttl_cap_secs: u32,
}

impl ResolverSpec {
    /// The spec for `profile` when corral's gateway serves it (`dns =
    /// "corral"`; on a `none` profile its DHCP server and advertisements
    /// alone, [`ResolverSpec::serves_dns`]); `None` otherwise.
    pub fn of(
        profile: &Profile,
        upstreams: &[SocketAddr],
        host_networks: &[IpNet],
        timing: DnsTiming,
    ) -> Option<Self> {
        (profile.dns == DnsPolicy::Corral).then(|| Self {
            profile: profile.clone(),
            upstreams: upstreams.to_vec(),
            host_networks: host_networks.to_vec(),
            ttl_cap_secs: u32::try_from(timing.client_ttl_cap.as_secs()).unwrap_or(u32::MAX),
        })
    }

    /// Whether a resolver serves the bridge (every mode but `none`).
    pub fn serves_dns(&self) -> bool {
        crate::serves_dns(&self.profile)
    }

    /// The policy it serves.
    pub fn policy(&self) -> Policy {
        let mut p = Policy::for_profile(&self.profile, &self.host_networks);
        p.ttl_ceiling = self.ttl_cap_secs;
        p
    }

    /// The upstreams it asks (`None`: the host has none).
    pub fn upstreams(&self) -> Option<Upstreams> {
        Upstreams::new(self.upstreams.clone(), UPSTREAM_TIMEOUT)
    }

    /// The resolver it describes, learning through `learner` for the
    /// sandboxes of `askers`.
    pub fn resolver(
        &self,
        learner: std::sync::Arc<dyn super::Learn>,
        askers: super::Askers,
        bounds: super::Bounds,
    ) -> Result<super::Resolver, String> {
        let upstreams = self.upstreams().ok_or_else(|| {
            format!(
                "profile `{}` has no upstream resolver; set `dns_upstreams` in the host config",
                self.profile.name
            )
        })?;
        Ok(super::Resolver::new(
            self.policy(),
            crate::names::LearnSets::of(&self.profile),
            upstreams,
            learner,
            askers,
            bounds,
        ))
    }

    /// Where it listens: the bridge's gateway addresses, port 53.
    pub fn listen(&self) -> Vec<SocketAddr> {
        let mut at = vec![SocketAddr::new(self.profile.gateway_v4().into(), 53)];
        at.extend(
            self.profile
                .gateway_v6()
                .map(|g| SocketAddr::new(g.into(), 53)),
        );
        at
    }
}

/// Which version of a record a resolver serves: the file's identity
/// (device, inode, modification time, length). Every write replaces the
/// file (a new inode), so a resolver whose record was rewritten or removed
/// sees it at its next query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordId {
    dev: u64,
    ino: u64,
    mtime_ns: i128,
    len: u64,
}

impl RecordId {
    /// The identity of the file at `path` now; `None` when it is gone.
    pub fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Self {
            dev: m.dev(),
            ino: m.ino(),
            mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            len: m.len(),
        })
    }
}

/// One bridge's record, as read.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// The bridge.
    pub bridge: BridgeName,
    /// The record's path.
    pub path: PathBuf,
    /// The version read.
    pub id: RecordId,
    /// What it says, or why it cannot be used.
    pub spec: Result<ResolverSpec, String>,
}

/// Records `spec` for `gateway`'s bridge, or removes the record (`None`):
/// the bridge is then not corral's resolver's to serve. A record that
/// already says exactly this is left alone (its resolver keeps serving).
pub(crate) fn record(gateway: &Gateway, spec: Option<&ResolverSpec>) -> Result<(), GatewayError> {
    let dir = gateway.dir()?;
    match spec {
        Some(spec) => {
            let text = serde_json::to_vec_pretty(spec).map_err(|e| GatewayError::Record {
                bridge: gateway.bridge().to_string(),
                reason: e.to_string(),
            })?;
            if dir.read(RESOLVER_FILE)?.as_deref() != Some(text.as_slice()) {
                dir.write_regenerated(RESOLVER_FILE, &text, corral_state_files::FILE_MODE)?;
            }
        }
        None => {
            dir.remove(RESOLVER_FILE)?;
        }
    }
    Ok(())
}

/// Records corral's resolver for every profile of `profiles` that has it
/// and removes every other record under `state_dir` (profiles gone, or
/// back on dnsmasq). Called by the apply *before* the ruleset changes, so
/// a resolver still serving the old names sees its record change and
/// refuses from then on, until its host starts the new one: closed while
/// the policy changes, never open.
pub fn record_all(
    state_dir: &Path,
    profiles: &ProfileSet,
    upstreams: &[SocketAddr],
    host_networks: &[IpNet],
    timing: DnsTiming,
) -> Result<(), GatewayError> {
    for r in recorded(state_dir) {
        if profiles
            .by_bridge(r.bridge.as_str())
            .and_then(|p| ResolverSpec::of(p, upstreams, host_networks, timing))
            .is_none()
        {
            record(&Gateway::new(state_dir, &r.bridge), None)?;
        }
    }
    for p in profiles.iter() {
        if let Some(spec) = ResolverSpec::of(p, upstreams, host_networks, timing) {
            record(&Gateway::new(state_dir, &p.bridge), Some(&spec))?;
        }
    }
    Ok(())
}

/// Every resolver recorded under `state_dir`, by bridge, sorted. A record
/// rewritten while it was read is left out (the next read takes it).
pub fn recorded(state_dir: &Path) -> Vec<Recorded> {
    let Some(root) = crate::paths::open_gateway_root(state_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for name in root.names().unwrap_or_default() {
        let Ok(bridge) = BridgeName::new(name.clone()) else {
            continue;
        };
        let path = GatewayPaths::new(state_dir, &bridge)
            .dir()
            .join(RESOLVER_FILE);
        let Some(before) = RecordId::of(&path) else {
            continue;
        };
        let read = root
            .subdir_existing(&name)
            .and_then(|d| d.map(|d| d.read(RESOLVER_FILE)).transpose())
            .map(Option::flatten);
        if RecordId::of(&path) != Some(before) {
            continue;
        }
        let spec = match read {
            Ok(None) => continue,
            Ok(Some(bytes)) => serde_json::from_slice(&bytes)
                .map_err(|e| format!("{} is not a resolver record: {e}", path.display())),
            Err(e) => Err(e.to_string()),
        };
        out.push(Recorded {
            bridge,
            path,
            id: before,
            spec,
        });
    }
    out.sort_by(|a, b| a.bridge.cmp(&b.bridge));
    out
}
