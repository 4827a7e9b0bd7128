//! The one-NIC topology check, run before every start: the instance must
//! still look exactly as corral built it. Pure: it compares an instance
//! record with what corral expects and lists every difference in words.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use corral_sandbox_core::BridgeName;
use corral_sandbox_core::sandbox::BoundNic;

use crate::api::{Device, Instance, MOUNT_DEVICE_PREFIX, NIC_DEVICE, ROOT_DEVICE, nic_device};

/// What the instance must look like.
#[derive(Debug, Clone)]
pub struct Expected<'a> {
    /// The pool its root disk lives on.
    pub pool: &'a str,
    /// The bridge of its one NIC; `None`: no NIC at all.
    pub bridge: Option<&'a BridgeName>,
    /// The MAC and host-side name corral bound that NIC to: the NIC must
    /// carry exactly these (`None`: it must carry neither).
    pub nic: Option<&'a BoundNic>,
    /// Host paths mount sources may resolve beneath (allowed roots and the
    /// staging root).
    pub mount_roots: &'a [PathBuf],
}

use crate::allowed::{self, MOUNT_KEYS};

/// Every way `instance` differs from `expected`; empty when it matches.
pub fn differences(instance: &Instance, expected: &Expected<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if !instance.profiles.is_empty() {
        out.push(format!(
            "profiles {:?} are attached (corral attaches none)",
            instance.profiles
        ));
    }
    // Profiles can add devices and config: judge what Incus will apply.
    let devices = effective(&instance.expanded_devices, &instance.devices);
    let config = effective(&instance.expanded_config, &instance.config);

    check_root(devices.get(ROOT_DEVICE), expected.pool, &mut out);
    match (expected.bridge, devices.get(NIC_DEVICE)) {
        (Some(bridge), Some(nic)) => {
            let want = nic_device(bridge.as_str(), expected.nic);
            if nic != &want {
                out.push(format!(
                    "NIC `{NIC_DEVICE}` is {}, expected {}",
                    render(nic),
                    render(&want)
                ));
            }
        }
        (Some(bridge), None) => out.push(format!(
            "NIC `{NIC_DEVICE}` bridged to `{bridge}` is missing"
        )),
        (None, Some(nic)) => out.push(format!(
            "NIC `{NIC_DEVICE}` ({}) is present but the sandbox has no network",
            render(nic)
        )),
        (None, None) => {}
    }
    for (name, device) in devices {
        if name == ROOT_DEVICE || name == NIC_DEVICE {
            continue;
        }
        if name.starts_with(MOUNT_DEVICE_PREFIX) {
            check_mount(name, device, expected.mount_roots, &mut out);
            continue;
        }
        out.push(format!("unexpected device `{name}` ({})", render(device)));
    }
    // An allowlist: what corral sets and Incus records, nothing else
    // (`raw.*`, `security.privileged`, `security.nesting`, and any key a
    // later Incus adds until corral judges it).
    out.extend(allowed::config_problems(config));
    out
}

fn effective<'a, T>(
    expanded: &'a BTreeMap<String, T>,
    local: &'a BTreeMap<String, T>,
) -> &'a BTreeMap<String, T> {
    // Records built by hand (and some older servers) leave `expanded_*`
    // empty; then the local view is all there is.
    if expanded.is_empty() { local } else { expanded }
}

fn check_root(root: Option<&Device>, pool: &str, out: &mut Vec<String>) {
    let Some(root) = root else {
        out.push(format!("root disk `{ROOT_DEVICE}` is missing"));
        return;
    };
    let get = |k: &str| root.get(k).map(String::as_str);
    if get("type") != Some("disk") || get("path") != Some("/") {
        out.push(format!(
            "`{ROOT_DEVICE}` is {}, expected a disk at /",
            render(root)
        ));
    }
    if get("pool") != Some(pool) {
        out.push(format!(
            "root disk is on pool {:?}, expected `{pool}`",
            get("pool").unwrap_or("")
        ));
    }
    if get("source").is_some() {
        out.push("root disk has a host `source`".to_owned());
    }
    out.extend(allowed::device_problem(ROOT_DEVICE, root));
}

fn check_mount(name: &str, device: &Device, roots: &[PathBuf], out: &mut Vec<String>) {
    let extra: BTreeSet<&str> = device
        .keys()
        .map(String::as_str)
        .filter(|k| !MOUNT_KEYS.contains(k))
        .collect();
    if device.get("type").map(String::as_str) != Some("disk") {
        out.push(format!(
            "mount device `{name}` is not a disk ({})",
            render(device)
        ));
        return;
    }
    if !extra.is_empty() {
        out.push(format!(
            "mount device `{name}` has unexpected keys {extra:?}"
        ));
    }
    match device.get("source") {
        Some(source) if beneath_any(Path::new(source), roots) => {}
        Some(source) => out.push(format!(
            "mount device `{name}` source `{source}` is outside the allowed roots"
        )),
        None => out.push(format!("mount device `{name}` has no source")),
    }
}

/// Lexical containment: sources were resolved (symlinks included) before
/// corral wrote them, and `..` is refused here outright.
fn beneath_any(path: &Path, roots: &[PathBuf]) -> bool {
    path.is_absolute()
        && !path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        && roots.iter().any(|root| path.starts_with(root))
}

fn render(device: &Device) -> String {
    let parts: Vec<String> = device.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{MountDevice, devices_for, mount_device};
    use corral_sandbox_core::SandboxName;
    use corral_sandbox_core::sandbox::SandboxSpec;

    fn bridge() -> BridgeName {
        BridgeName::new("cb-claude").unwrap_or_else(|e| panic!("{e}"))
    }

    fn built(with_nic: bool) -> Instance {
        let spec = SandboxSpec::new(
            SandboxName::new("a").unwrap_or_else(|e| panic!("{e}")),
            "img",
        );
        let mut devices = devices_for(&spec, "default", &[]);
        if with_nic {
            devices.insert(NIC_DEVICE.into(), nic_device("cb-claude", None));
        }
        Instance {
            name: "a".into(),
            expanded_devices: devices.clone(),
            devices,
            ..Instance::default()
        }
    }

    fn expect<'a>(bridge: Option<&'a BridgeName>, roots: &'a [PathBuf]) -> Expected<'a> {
        Expected {
            pool: "default",
            bridge,
            nic: None,
            mount_roots: roots,
        }
    }

    #[test]
    fn what_corral_built_passes() {
        let b = bridge();
        assert!(differences(&built(true), &expect(Some(&b), &[])).is_empty());
        assert!(differences(&built(false), &expect(None, &[])).is_empty());
    }

    #[test]
    fn an_extra_nic_is_named() {
        let b = bridge();
        let mut inst = built(true);
        inst.expanded_devices
            .insert("eth1".into(), nic_device("lxdbr0", None));
        let diffs = differences(&inst, &expect(Some(&b), &[]));
        assert_eq!(diffs.len(), 1, "{diffs:?}");
        assert!(
            diffs[0].starts_with("unexpected device `eth1`"),
            "{diffs:?}"
        );
    }

    #[test]
    fn a_nic_on_the_wrong_bridge_or_without_isolation_is_refused() {
        let b = bridge();
        let mut inst = built(true);
        inst.expanded_devices
            .insert(NIC_DEVICE.into(), nic_device("incusbr0", None));
        assert!(!differences(&inst, &expect(Some(&b), &[])).is_empty());
        let mut nic = nic_device("cb-claude", None);
        nic.remove("security.port_isolation");
        inst.expanded_devices.insert(NIC_DEVICE.into(), nic);
        assert!(!differences(&inst, &expect(Some(&b), &[])).is_empty());
        // A NIC where none belongs.
        assert!(!differences(&built(true), &expect(None, &[])).is_empty());
        // No NIC where one belongs.
        assert!(!differences(&built(false), &expect(Some(&b), &[])).is_empty());
    }

    #[test]
    fn a_bound_nic_must_carry_exactly_its_mac_and_port_name() {
        let b = bridge();
        let bound = BoundNic {
            mac: "02:c0:0a:63:02:02"
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
            port: corral_sandbox_core::InterfaceName::new("crl0a630202")
                .unwrap_or_else(|e| panic!("{e}")),
        };
        let expected = Expected {
            nic: Some(&bound),
            ..expect(Some(&b), &[])
        };
        let mut inst = built(false);
        inst.expanded_devices
            .insert(NIC_DEVICE.into(), nic_device("cb-claude", Some(&bound)));
        assert!(differences(&inst, &expected).is_empty());
        // The unbound NIC of the same bridge is refused, and so is a bound
        // one where none was bound.
        assert!(!differences(&built(true), &expected).is_empty());
        assert!(!differences(&inst, &expect(Some(&b), &[])).is_empty());
        // Changed behind corral's back: another MAC, another port name, or
        // either key dropped.
        for (key, value) in [
            ("hwaddr", Some("02:c0:0a:63:02:03")),
            ("host_name", Some("veth-evil")),
            ("hwaddr", None),
            ("host_name", None),
        ] {
            let mut nic = nic_device("cb-claude", Some(&bound));
            match value {
                Some(v) => nic.insert(key.into(), v.into()),
                None => nic.remove(key),
            };
            inst.expanded_devices.insert(NIC_DEVICE.into(), nic);
            let diffs = differences(&inst, &expected);
            assert_eq!(diffs.len(), 1, "{key}={value:?}: {diffs:?}");
            assert!(diffs[0].contains("NIC `eth0`"), "{diffs:?}");
        }
    }

    #[test]
    fn profiles_raw_nesting_and_privilege_are_refused() {
        let mut inst = built(false);
        inst.profiles = vec!["default".into()];
        inst.expanded_config
            .insert("raw.lxc".into(), "lxc.apparmor.profile=unconfined".into());
        inst.expanded_config
            .insert("security.nesting".into(), "true".into());
        inst.expanded_config
            .insert("security.privileged".into(), "TRUE".into());
        assert_eq!(differences(&inst, &expect(None, &[])).len(), 4);
        inst.profiles.clear();
        inst.expanded_config.clear();
        // An allowlist: a key corral does not set is refused whatever its value.
        inst.expanded_config
            .insert("security.nesting".into(), "false".into());
        assert_eq!(differences(&inst, &expect(None, &[])).len(), 1);
        inst.expanded_config.clear();
        inst.expanded_config
            .insert("linux.kernel_modules".into(), "ip_tables".into());
        assert_eq!(differences(&inst, &expect(None, &[])).len(), 1);
        inst.expanded_config.clear();
        inst.expanded_config
            .insert("volatile.uuid".into(), "x".into());
        assert!(differences(&inst, &expect(None, &[])).is_empty());
    }

    #[test]
    fn mounts_must_stay_beneath_the_roots() {
        let roots = [PathBuf::from("/srv/repos")];
        let mut inst = built(false);
        let ok = MountDevice {
            source: "/srv/repos/a".into(),
            target: "/work".into(),
            read_only: true,
        };
        inst.expanded_devices
            .insert("corral-mount-0".into(), mount_device(&ok));
        assert!(differences(&inst, &expect(None, &roots)).is_empty());
        for bad in ["/etc", "/srv/repos/../../etc", "/srv/repos-evil"] {
            let mount = MountDevice {
                source: bad.into(),
                ..ok.clone()
            };
            inst.expanded_devices
                .insert("corral-mount-0".into(), mount_device(&mount));
            assert_eq!(differences(&inst, &expect(None, &roots)).len(), 1, "{bad}");
        }
    }

    #[test]
    fn the_root_disk_must_be_on_the_pool() {
        let mut inst = built(false);
        if let Some(root) = inst.expanded_devices.get_mut(ROOT_DEVICE) {
            root.insert("pool".into(), "other".into());
        }
        let diffs = differences(&inst, &expect(None, &[]));
        assert_eq!(
            diffs,
            vec!["root disk is on pool \"other\", expected `default`".to_owned()]
        );
    }
}
