//! Incus request and response shapes corral uses, and the pure builders of
//! the bodies it sends (unit-tested as JSON, so VM requests are checked by
//! shape even where VMs cannot start).

use std::collections::BTreeMap;

use corral_sandbox_core::sandbox::{
    BoundNic, InstanceType, ProviderError, SandboxSpec, SandboxState,
};
use corral_sandbox_core::{InterfaceName, SandboxName};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::stamp::Stamp;

/// One device: its key/value settings.
pub type Device = BTreeMap<String, String>;

/// The host bridge of each bridged NIC of `inst` (its `parent`, or its
/// managed `network`), profiles applied.
pub fn nic_bridges(inst: &Instance) -> Vec<String> {
    inst.expanded_devices
        .values()
        .filter(|d| d.get("type").map(String::as_str) == Some("nic"))
        .filter_map(|d| d.get("parent").or_else(|| d.get("network")).cloned())
        .collect()
}

/// The name of the only NIC corral gives an instance.
pub const NIC_DEVICE: &str = "eth0";
/// The root disk device.
pub const ROOT_DEVICE: &str = "root";
/// Prefix of host-mount disk devices corral adds.
pub const MOUNT_DEVICE_PREFIX: &str = "corral-mount-";

/// An instance as `GET /1.0/instances/<name>` returns it (the fields corral
/// reads, plus those a `PUT` must send back).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Instance {
    /// Its name.
    pub name: String,
    /// "Running", "Stopped", "Frozen", "Error"…
    #[serde(default)]
    pub status: String,
    /// "container" or "virtual-machine".
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Its architecture.
    #[serde(default)]
    pub architecture: String,
    /// Local config.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Local devices.
    #[serde(default)]
    pub devices: BTreeMap<String, Device>,
    /// Config after profiles are applied.
    #[serde(default)]
    pub expanded_config: BTreeMap<String, String>,
    /// Devices after profiles are applied.
    #[serde(default)]
    pub expanded_devices: BTreeMap<String, Device>,
    /// Attached profiles (corral attaches none).
    #[serde(default)]
    pub profiles: Vec<String>,
    /// Creation time.
    #[serde(default)]
    pub created_at: String,
    /// Deleted when stopped.
    #[serde(default)]
    pub ephemeral: bool,
    /// Stateful snapshots.
    #[serde(default)]
    pub stateful: bool,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// The cluster member it runs on (`none` or empty off a cluster).
    #[serde(default)]
    pub location: String,
}

impl Instance {
    /// corral's view of the Incus status.
    pub fn state(&self) -> SandboxState {
        state_of(&self.status)
    }

    /// Container or VM.
    pub fn instance_type(&self) -> InstanceType {
        if self.kind == "virtual-machine" {
            InstanceType::Vm
        } else {
            InstanceType::Container
        }
    }

    /// True when any device of the instance (profiles' included) is a
    /// NIC.
    pub fn has_any_nic(&self) -> bool {
        self.devices
            .values()
            .chain(self.expanded_devices.values())
            .any(|d| d.get("type").map(String::as_str) == Some("nic"))
    }

    /// The NIC device Incus applies (the expanded view, which profiles
    /// could add to; the local one when the record has no expanded view).
    pub fn nic_device(&self) -> Option<&Device> {
        if self.expanded_devices.is_empty() {
            self.devices.get(NIC_DEVICE)
        } else {
            self.expanded_devices.get(NIC_DEVICE)
        }
    }

    /// The body of a `PUT /1.0/instances/<name>` that keeps everything but
    /// the local config and devices, which it replaces.
    pub fn put_body(
        &self,
        config: &BTreeMap<String, String>,
        devices: &BTreeMap<String, Device>,
    ) -> Value {
        json!({
            "architecture": self.architecture,
            "config": config,
            "devices": devices,
            "ephemeral": self.ephemeral,
            "profiles": self.profiles,
            "stateful": self.stateful,
            "description": self.description,
        })
    }
}

/// Map an Incus status string.
pub fn state_of(status: &str) -> SandboxState {
    match status {
        "Running" => SandboxState::Running,
        "Stopped" => SandboxState::Stopped,
        "Frozen" => SandboxState::Frozen,
        "Error" => SandboxState::Error,
        "Starting" | "Stopping" | "Aborting" | "Freezing" | "Thawed" | "Restarting" => {
            SandboxState::Transitioning
        }
        _ => SandboxState::Unknown,
    }
}

/// `GET /1.0/instances/<name>/state`, the part corral reads.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct InstanceState {
    /// The pid of the instance's init as the host numbers it (containers;
    /// 0 or absent when not running).
    #[serde(default)]
    pub pid: i64,
    /// Network interfaces by name.
    #[serde(default)]
    pub network: Option<BTreeMap<String, NetworkState>>,
}

/// One interface in [`InstanceState`].
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NetworkState {
    /// Its addresses.
    #[serde(default)]
    pub addresses: Vec<NetworkAddress>,
    /// Its MAC address.
    #[serde(default)]
    pub hwaddr: String,
}

/// One address of an interface.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct NetworkAddress {
    /// "inet" or "inet6".
    #[serde(default)]
    pub family: String,
    /// The address.
    #[serde(default)]
    pub address: String,
    /// "global", "link", "local".
    #[serde(default)]
    pub scope: String,
}

/// A snapshot as `GET …/snapshots?recursion=1` lists it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Snapshot {
    /// Its name (without the instance prefix).
    pub name: String,
    /// Creation time.
    #[serde(default)]
    pub created_at: String,
}

/// A host mount as a disk device, after the mount policy approved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountDevice {
    /// Host path Incus reads (resolved, or a staged copy).
    pub source: String,
    /// Path inside the guest.
    pub target: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// The bridged NIC corral attaches: the instance's only path out.
pub fn nic_device(bridge: &str, nic: Option<&BoundNic>) -> Device {
    let mut device = BTreeMap::from([
        ("type".to_owned(), "nic".to_owned()),
        ("nictype".to_owned(), "bridged".to_owned()),
        ("parent".to_owned(), bridge.to_owned()),
        ("name".to_owned(), NIC_DEVICE.to_owned()),
        // Sandboxes on one bridge must not reach each other at L2.
        ("security.port_isolation".to_owned(), "true".to_owned()),
    ]);
    if let Some(nic) = nic {
        // The MAC and port name the host's rules bind (corral chose them
        // before the instance existed).
        device.insert(NIC_HWADDR.to_owned(), nic.mac.to_string());
        device.insert(NIC_HOST_NAME.to_owned(), nic.port.to_string());
    }
    device
}

/// The instance key that turns duplicate address detection off on the
/// container's NIC. LXC applies it after it brings the NIC up, so it
/// spares the SLAAC address's detection, not the link-local address's.
pub const NO_DAD_KEY: &str = "linux.sysctl.net.ipv6.conf.eth0.accept_dad";

/// The NIC key holding its MAC.
pub const NIC_HWADDR: &str = "hwaddr";
/// The NIC key holding the name of its host side (the bridge port).
pub const NIC_HOST_NAME: &str = "host_name";

/// The MAC and host-side name a NIC device carries, when it carries both
/// (and they parse).
pub fn bound_nic(device: &Device) -> Option<BoundNic> {
    let mac = device.get(NIC_HWADDR)?.parse().ok()?;
    let port = InterfaceName::new(device.get(NIC_HOST_NAME)?.as_str()).ok()?;
    Some(BoundNic { mac, port })
}

/// The disk device for a mount. No `shift`: Incus refuses it for a source
/// under a restricted project's disk-path allowlist, so a container sees
/// mounted files through its own id map (and a VM's virtiofs cannot remap).
pub fn mount_device(mount: &MountDevice) -> Device {
    let mut device = BTreeMap::from([
        ("type".to_owned(), "disk".to_owned()),
        ("source".to_owned(), mount.source.clone()),
        ("path".to_owned(), mount.target.clone()),
    ]);
    if mount.read_only {
        device.insert("readonly".to_owned(), "true".to_owned());
    }
    device
}

/// The devices corral gives a new instance: root disk on `pool`, the one
/// NIC when there is a network, and the approved mounts.
pub fn devices_for(
    spec: &SandboxSpec,
    pool: &str,
    mounts: &[MountDevice],
) -> BTreeMap<String, Device> {
    let mut root = BTreeMap::from([
        ("type".to_owned(), "disk".to_owned()),
        ("path".to_owned(), "/".to_owned()),
        ("pool".to_owned(), pool.to_owned()),
    ]);
    if let Some(gib) = spec.resources.disk_gib {
        root.insert("size".to_owned(), format!("{gib}GiB"));
    }
    let mut devices = BTreeMap::from([(ROOT_DEVICE.to_owned(), root)]);
    if let Some(net) = &spec.network {
        devices.insert(
            NIC_DEVICE.to_owned(),
            nic_device(net.bridge.as_str(), net.nic.as_ref()),
        );
    }
    for (i, mount) in mounts.iter().enumerate() {
        devices.insert(format!("{MOUNT_DEVICE_PREFIX}{i}"), mount_device(mount));
    }
    devices
}

/// The body of `POST /1.0/instances` for `spec`: no profiles, the stamp,
/// resources, cloud-init user-data, created stopped.
pub fn create_body(
    spec: &SandboxSpec,
    pool: &str,
    stamp: &Stamp,
    mounts: &[MountDevice],
) -> Result<Value, ProviderError> {
    if spec.image.trim().is_empty() {
        return Err(ProviderError::InvalidSpec {
            field: "image",
            reason: "empty; expected an image alias in corral's Incus project".into(),
        });
    }
    let mut config = stamp.to_config();
    // Each container gets its own host id range, so one sandbox's root
    // (and any file it leaves in a read-write mount) is not another's.
    if spec.instance_type == InstanceType::Container {
        config.insert("security.idmap.isolated".into(), "true".into());
        // Duplicate address detection holds a new SLAAC address tentative
        // for a second or more, and a connect meanwhile leaves from the
        // link-local source and times out. It cannot find anything on a
        // corral bridge: the port is bound to one MAC and the addresses
        // formed from it, and the bridge table drops any other source.
        if spec.network.is_some() {
            config.insert(NO_DAD_KEY.into(), "0".into());
        }
    }
    let r = &spec.resources;
    if let Some(cpus) = r.cpus {
        if cpus == 0 {
            return Err(ProviderError::InvalidSpec {
                field: "resources.cpus",
                reason: "0; expected at least 1".into(),
            });
        }
        config.insert("limits.cpu".into(), cpus.to_string());
    }
    if let Some(mib) = r.memory_mib {
        if mib == 0 {
            return Err(ProviderError::InvalidSpec {
                field: "resources.memory_mib",
                reason: "0; expected at least 1".into(),
            });
        }
        config.insert("limits.memory".into(), format!("{mib}MiB"));
    }
    if let Some(user_data) = &spec.user_data {
        config.insert("cloud-init.user-data".into(), user_data.clone());
    }
    Ok(json!({
        "name": spec.name.as_str(),
        "type": incus_type(spec.instance_type),
        "source": { "type": "image", "alias": spec.image },
        "profiles": [],
        "config": config,
        "devices": devices_for(spec, pool, mounts),
        "start": false,
    }))
}

/// Incus's word for the instance type.
pub fn incus_type(instance_type: InstanceType) -> &'static str {
    match instance_type {
        InstanceType::Container => "container",
        InstanceType::Vm => "virtual-machine",
    }
}

/// The body of a copy of `source` (an instance, or `instance/snapshot`).
pub fn copy_body(target: &SandboxName, source: &str) -> Value {
    json!({
        "name": target.as_str(),
        "source": { "type": "copy", "source": source, "instance_only": true },
        "profiles": [],
        "start": false,
    })
}

/// The body of an exec that records its output server-side.
pub fn exec_body(
    argv: &[String],
    env: &BTreeMap<String, String>,
    user: Option<(u32, u32)>,
    cwd: Option<&str>,
) -> Value {
    let mut body = json!({
        "command": argv,
        "environment": env,
        "interactive": false,
        "wait-for-websocket": false,
        "record-output": true,
    });
    if let Some((uid, gid)) = user {
        body["user"] = json!(uid);
        body["group"] = json!(gid);
    }
    if let Some(cwd) = cwd {
        body["cwd"] = json!(cwd);
    }
    body
}

/// The body of a state change.
pub fn state_body(action: &str, force: bool, timeout_secs: Option<u64>) -> Value {
    let mut body = json!({ "action": action, "force": force });
    if let Some(secs) = timeout_secs {
        body["timeout"] = json!(secs);
    }
    body
}

/// `GET /1.0/operations?recursion=1`: the project's operations by status
/// (only the running ones are read).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct Operations {
    /// The operations still going.
    #[serde(default)]
    pub running: Vec<RunningOperation>,
}

/// One running operation, as much of it as an exec count needs.
#[derive(Debug, Clone, Deserialize)]
pub struct RunningOperation {
    /// Incus's words for it ("Executing command" for an exec).
    #[serde(default)]
    pub description: String,
    /// What it acts on: `instances` holds `/1.0/instances/NAME?project=P`.
    #[serde(default)]
    pub resources: Option<BTreeMap<String, Vec<String>>>,
}

impl Operations {
    /// The commands running in instance `name`.
    pub fn exec_sessions_on(&self, name: &str) -> u32 {
        let path = format!("/1.0/instances/{name}");
        let on = |op: &RunningOperation| {
            op.resources
                .as_ref()
                .and_then(|r| r.get("instances"))
                .is_some_and(|i| i.iter().any(|u| u.split('?').next() == Some(path.as_str())))
        };
        let n = self
            .running
            .iter()
            .filter(|op| op.description == "Executing command" && on(op))
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use corral_sandbox_core::sandbox::{NetworkAttachment, Resources};
    use corral_sandbox_core::{BridgeName, ProfileName};

    use super::*;

    fn name(s: &str) -> SandboxName {
        SandboxName::new(s).unwrap_or_else(|e| panic!("{e}"))
    }

    fn attachment() -> NetworkAttachment {
        NetworkAttachment {
            profile: ProfileName::new("claude").unwrap_or_else(|e| panic!("{e}")),
            bridge: BridgeName::new("cb-claude").unwrap_or_else(|e| panic!("{e}")),
            subnet_v4: "10.99.2.0/24".parse().unwrap_or_else(|e| panic!("{e}")),
            gateway_v4: "10.99.2.1".parse().unwrap_or_else(|e| panic!("{e}")),
            resolved_allow: Vec::new(),
            nic: None,
        }
    }

    fn stamp() -> Stamp {
        Stamp::new(None, None, "corral-test").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_vm_request_has_no_profiles_one_nic_resources_and_user_data() {
        let mut spec = SandboxSpec::new(name("agent"), "debian-12");
        spec.instance_type = InstanceType::Vm;
        spec.network = Some(attachment());
        spec.resources = Resources {
            cpus: Some(2),
            memory_mib: Some(2048),
            disk_gib: Some(20),
        };
        spec.user_data = Some("#cloud-config\n".into());
        let mounts = [MountDevice {
            source: "/srv/repo".into(),
            target: "/work".into(),
            read_only: true,
        }];
        let body = create_body(&spec, "fast", &stamp(), &mounts).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(body["type"], "virtual-machine");
        assert_eq!(body["profiles"], json!([]));
        assert_eq!(body["start"], false);
        assert_eq!(
            body["source"],
            json!({"type": "image", "alias": "debian-12"})
        );
        assert_eq!(body["config"]["limits.cpu"], "2");
        assert_eq!(body["config"]["limits.memory"], "2048MiB");
        assert_eq!(body["config"]["cloud-init.user-data"], "#cloud-config\n");
        assert_eq!(body["config"]["user.corral.stamp"], "1");
        assert_eq!(
            body["devices"],
            json!({
                "root": {"type": "disk", "path": "/", "pool": "fast", "size": "20GiB"},
                "eth0": {
                    "type": "nic", "nictype": "bridged", "parent": "cb-claude",
                    "name": "eth0", "security.port_isolation": "true"
                },
                "corral-mount-0": {"type": "disk", "source": "/srv/repo", "path": "/work", "readonly": "true"},
            })
        );
    }

    #[test]
    fn no_network_means_no_nic_at_all() {
        let spec = SandboxSpec::new(name("offline"), "corral-test");
        let body = create_body(&spec, "default", &stamp(), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(body["type"], "container");
        let devices = body["devices"]
            .as_object()
            .map(|d| d.keys().cloned().collect::<Vec<_>>());
        assert_eq!(devices, Some(vec!["root".to_owned()]));
        assert!(body["config"].get("limits.cpu").is_none());
        assert_eq!(body["config"]["security.idmap.isolated"], "true");
        assert!(body["config"].get(NO_DAD_KEY).is_none());
    }

    #[test]
    fn a_container_on_a_bridge_skips_duplicate_address_detection() {
        let mut spec = SandboxSpec::new(name("agent"), "corral-test");
        spec.network = Some(attachment());
        let body = create_body(&spec, "default", &stamp(), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(body["config"][NO_DAD_KEY], "0");
        assert!(NO_DAD_KEY.ends_with(&format!(".{NIC_DEVICE}.accept_dad")));
        // A VM's kernel is its own: Incus has no sysctl key for it.
        spec.instance_type = InstanceType::Vm;
        let body = create_body(&spec, "default", &stamp(), &[]).unwrap_or_else(|e| panic!("{e}"));
        assert!(body["config"].get(NO_DAD_KEY).is_none());
    }

    #[test]
    fn read_write_mounts_have_no_readonly_key() {
        let mount = MountDevice {
            source: "/a".into(),
            target: "/b".into(),
            read_only: false,
        };
        let device = mount_device(&mount);
        assert!(!device.contains_key("readonly"));
        assert!(!device.contains_key("shift"));
    }

    #[test]
    fn bad_specs_are_refused_before_any_request() {
        let mut spec = SandboxSpec::new(name("x"), " ");
        assert!(matches!(
            create_body(&spec, "default", &stamp(), &[]),
            Err(ProviderError::InvalidSpec { field: "image", .. })
        ));
        spec.image = "img".into();
        spec.resources.cpus = Some(0);
        assert!(matches!(
            create_body(&spec, "default", &stamp(), &[]),
            Err(ProviderError::InvalidSpec {
                field: "resources.cpus",
                ..
            })
        ));
    }

    #[test]
    fn exec_keeps_argv_intact() {
        let argv = vec![
            "sh".to_owned(),
            "-c".to_owned(),
            "echo \"$1\"; exit 3".to_owned(),
            "a b".to_owned(),
        ];
        let body = exec_body(&argv, &BTreeMap::new(), Some((1000, 1001)), Some("/tmp"));
        assert_eq!(body["command"], json!(argv));
        assert_eq!(
            (body["user"].clone(), body["group"].clone()),
            (json!(1000), json!(1001))
        );
        assert_eq!(body["cwd"], "/tmp");
        assert_eq!(body["record-output"], true);
    }

    #[test]
    fn statuses_map_to_states() {
        assert_eq!(state_of("Running"), SandboxState::Running);
        assert_eq!(state_of("Stopped"), SandboxState::Stopped);
        assert_eq!(state_of("Wat"), SandboxState::Unknown);
    }

    #[test]
    fn any_nic_counts_wherever_it_comes_from() {
        let disk = Device::from([("type".to_owned(), "disk".to_owned())]);
        let nic = Device::from([("type".to_owned(), "nic".to_owned())]);
        let mut inst = Instance::default();
        inst.devices.insert("root".into(), disk);
        assert!(!inst.has_any_nic());
        inst.expanded_devices.insert("eth9".into(), nic.clone());
        assert!(inst.has_any_nic());
        inst.expanded_devices.clear();
        inst.devices.insert("eth0".into(), nic);
        assert!(inst.has_any_nic());
    }

    #[test]
    fn exec_sessions_count_running_execs_on_the_instance_alone() {
        let ops: Operations = serde_json::from_value(json!({
            "running": [
                {"description": "Executing command",
                 "resources": {"instances": ["/1.0/instances/box?project=corral"]}},
                {"description": "Executing command",
                 "resources": {"instances": ["/1.0/instances/box"]}},
                {"description": "Executing command",
                 "resources": {"instances": ["/1.0/instances/box2?project=corral"]}},
                {"description": "Starting instance",
                 "resources": {"instances": ["/1.0/instances/box?project=corral"]}},
                {"description": "Executing command", "resources": null}
            ],
            "success": [{"description": "Executing command"}]
        }))
        .unwrap();
        assert_eq!(ops.exec_sessions_on("box"), 2);
        assert_eq!(ops.exec_sessions_on("box2"), 1);
        assert_eq!(ops.exec_sessions_on("bo"), 0);
        assert_eq!(Operations::default().exec_sessions_on("box"), 0);
    }
}
