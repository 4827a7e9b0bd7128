use core::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use ipnet::{IpNet, Ipv4Net};
use serde::{Deserialize, Serialize};

use crate::mac::MacAddr;
use crate::names::{BridgeName, InterfaceName, ProfileName, SandboxName};
use crate::platform::SandboxKind;
use crate::profile::Profile;

/// Container or virtual machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InstanceType {
    /// A system container (shares the host kernel).
    #[default]
    Container,
    /// A virtual machine (its own kernel).
    Vm,
}

/// CPU, memory and disk limits. `None` leaves the backend's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Resources {
    /// Virtual CPUs.
    pub cpus: Option<u32>,
    /// Memory in MiB.
    pub memory_mib: Option<u64>,
    /// Root disk size in GiB.
    pub disk_gib: Option<u64>,
}

/// A host directory shown inside the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MountSpec {
    /// Host path (must resolve beneath an allowed root; the provider checks).
    pub source: PathBuf,
    /// Absolute path inside the sandbox.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// Everything a provider needs to put a sandbox on a profile's bridge.
///
/// Providers never import the egress crate; this is the part of a profile
/// (plus resolved addresses, for filters that live in the provider) that
/// they may act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkAttachment {
    /// The profile's name.
    pub profile: ProfileName,
    /// The bridge to attach the sandbox's only NIC to.
    pub bridge: BridgeName,
    /// The bridge's IPv4 subnet.
    pub subnet_v4: Ipv4Net,
    /// The bridge's gateway (the host side of the bridge).
    pub gateway_v4: Ipv4Addr,
    /// Resolved allowlist (for provider-side filters such as Tart Softnet).
    pub resolved_allow: Vec<IpNet>,
    /// The NIC corral bound the sandbox's bridge port to, when it did: the
    /// provider must give the NIC exactly this MAC and host-side name, or
    /// the host's rules treat the port as a stranger (no lease, no
    /// traffic). `None`: the provider chooses (nothing is bound).
    #[serde(default)]
    pub nic: Option<BoundNic>,
}

/// A sandbox NIC as corral bound it on the host: the MAC the sandbox must
/// use and the name of the NIC's host side (the bridge port).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BoundNic {
    /// The NIC's MAC address.
    pub mac: MacAddr,
    /// The host-side interface (the port on the profile's bridge).
    pub port: InterfaceName,
}

impl NetworkAttachment {
    /// The attachment for `profile`, with the addresses its names resolved to.
    pub fn for_profile(profile: &Profile, resolved_allow: Vec<IpNet>) -> Self {
        Self {
            profile: profile.name.clone(),
            bridge: profile.bridge.clone(),
            subnet_v4: profile.subnet_v4,
            gateway_v4: profile.gateway_v4(),
            resolved_allow,
            nic: None,
        }
    }

    /// The same attachment with its NIC bound to `nic`.
    #[must_use]
    pub fn with_nic(mut self, nic: BoundNic) -> Self {
        self.nic = Some(nic);
        self
    }
}

/// What to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// The sandbox's name.
    pub name: SandboxName,
    /// Template or image to create it from (backend-specific reference).
    pub image: String,
    /// The network profile; `None` means no network at all (no NIC).
    pub network: Option<NetworkAttachment>,
    /// Resource limits.
    pub resources: Resources,
    /// Host directories to mount.
    pub mounts: Vec<MountSpec>,
    /// Container or VM.
    pub instance_type: InstanceType,
    /// cloud-init user-data, when the template has some.
    pub user_data: Option<String>,
    /// The cluster member to place it on (backends that run a cluster;
    /// `None`: the backend's own choice, or a single host).
    #[serde(default)]
    pub target: Option<String>,
}

impl SandboxSpec {
    /// A minimal spec: `name` from `image`, no network, defaults elsewhere.
    pub fn new(name: SandboxName, image: impl Into<String>) -> Self {
        Self {
            name,
            image: image.into(),
            network: None,
            resources: Resources::default(),
            mounts: Vec::new(),
            instance_type: InstanceType::Container,
            user_data: None,
            target: None,
        }
    }
}

/// What a provider reports about a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxInfo {
    /// The sandbox's name.
    pub name: SandboxName,
    /// The backend.
    pub kind: SandboxKind,
    /// Lifecycle state.
    pub state: super::SandboxState,
    /// Container or VM.
    pub instance_type: InstanceType,
    /// The profile it is attached to, as stamped at creation.
    pub profile: Option<ProfileName>,
    /// The template or image it was created from, as stamped at creation.
    pub image: Option<String>,
    /// Creation time as the backend reports it (RFC 3339 when known).
    pub created: Option<String>,
    /// Addresses the backend reports for it.
    pub addresses: Vec<IpAddr>,
    /// Its NIC's MAC and host-side name as the backend has them configured,
    /// when corral bound them (`None`: no NIC, or one the backend names).
    #[serde(default)]
    pub nic: Option<BoundNic>,
    /// The cluster member it runs on, as the backend reports it (`None`:
    /// not a cluster).
    #[serde(default)]
    pub location: Option<String>,
}

/// Where one instance of the backend's scope is wired: its network
/// interfaces' host bridges, and the profile corral stamped on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The instance's name.
    pub name: String,
    /// Lifecycle state.
    pub state: super::SandboxState,
    /// True when it carries corral's ownership stamp.
    pub owned: bool,
    /// The profile stamped at creation (corral's instances only).
    pub profile: Option<ProfileName>,
    /// The host bridge of each of its network interfaces.
    pub bridges: Vec<String>,
}

/// A snapshot of a sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    /// Snapshot name.
    pub name: String,
    /// Creation time as the backend reports it.
    pub created: Option<String>,
}
