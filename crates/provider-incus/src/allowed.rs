//! The instance config keys and device keys corral accepts, as allowlists:
//! what corral itself sets, and what Incus records on its own. Used by the
//! topology check before every start and by backup import before upload,
//! so a key Incus adds in a later release (or a crafted backup carries) is
//! refused until it is judged, rather than let through a short denylist.

use std::collections::BTreeMap;

use crate::api::{Device, MOUNT_DEVICE_PREFIX, NIC_DEVICE, NO_DAD_KEY, ROOT_DEVICE};

/// Config keys corral sets on an instance.
const EXACT_KEYS: [&str; 5] = [
    "limits.cpu",
    "limits.memory",
    "cloud-init.user-data",
    "security.idmap.isolated",
    NO_DAD_KEY,
];

/// Key prefixes: the image's description (`image.*`), Incus's own state
/// (`volatile.*`), corral's stamp (`user.corral.*`).
const PREFIXES: [&str; 3] = ["image.", "volatile.", "user.corral."];

/// Keys a root disk may carry.
const ROOT_KEYS: [&str; 4] = ["type", "path", "pool", "size"];
/// Keys a mount disk may carry.
pub(crate) const MOUNT_KEYS: [&str; 4] = ["type", "source", "path", "readonly"];
/// Keys the one NIC carries (see `api::nic_device`; the topology check
/// also holds `hwaddr` and `host_name` to the values corral bound).
const NIC_KEYS: [&str; 7] = [
    "type",
    "nictype",
    "parent",
    "name",
    "security.port_isolation",
    "hwaddr",
    "host_name",
];

/// Host ids below this are the host's own users and system accounts; an id
/// map must never reach them (Incus maps containers into subordinate ranges
/// far above).
const LOWEST_MAPPED_HOST_ID: u64 = 65536;

/// Why `key = value` is not acceptable instance config, if it is not.
pub fn config_problem(key: &str, value: &str) -> Option<String> {
    let known = EXACT_KEYS.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p));
    if !known {
        return Some(format!(
            "config key `{}` is not one corral sets or accepts",
            corral_sandbox_core::text::Shown(key)
        ));
    }
    if key == "security.idmap.isolated" && !is_true(value) {
        return Some(format!("`{key}` is `{value}`, not true"));
    }
    // The one sysctl corral sets; any other value is not corral's.
    if key == NO_DAD_KEY && value != "0" {
        return Some(format!("`{key}` is `{value}`, not 0"));
    }
    let is_map = matches!(
        key,
        "volatile.idmap.next" | "volatile.idmap.current" | "volatile.last_state.idmap"
    );
    if is_map && idmap_reaches_host_ids(value) {
        return Some(format!(
            "`{key}` maps guest ids onto host ids below {LOWEST_MAPPED_HOST_ID}"
        ));
    }
    None
}

/// Every problem with a whole config map.
pub fn config_problems(config: &BTreeMap<String, String>) -> Vec<String> {
    config
        .iter()
        .filter_map(|(k, v)| config_problem(k, v))
        .collect()
}

/// Why device `name` has keys corral does not accept, if it has.
pub fn device_problem(name: &str, device: &Device) -> Option<String> {
    let allowed: &[&str] = if name == ROOT_DEVICE {
        &ROOT_KEYS
    } else if name == NIC_DEVICE {
        &NIC_KEYS
    } else if name.starts_with(MOUNT_DEVICE_PREFIX) {
        &MOUNT_KEYS
    } else {
        return Some(format!(
            "device `{}` is not one corral creates",
            corral_sandbox_core::text::Shown(name)
        ));
    };
    let extra: Vec<&str> = device
        .keys()
        .map(String::as_str)
        .filter(|k| !allowed.contains(k))
        .collect();
    (!extra.is_empty()).then(|| {
        format!(
            "device `{name}` has keys corral does not accept: {}",
            corral_sandbox_core::text::escape_controls(&extra.join(", "))
        )
    })
}

/// True when `value` is an Incus id map (JSON) with an entry whose host
/// range starts below [`LOWEST_MAPPED_HOST_ID`]; unreadable maps count.
fn idmap_reaches_host_ids(value: &str) -> bool {
    if value.trim().is_empty() {
        return false;
    }
    let Ok(serde_json::Value::Array(entries)) = serde_json::from_str(value) else {
        return true;
    };
    entries.iter().any(|e| {
        e.get("Hostid")
            .and_then(serde_json::Value::as_u64)
            .is_none_or(|h| h < LOWEST_MAPPED_HOST_ID)
    })
}

fn is_true(value: &str) -> bool {
    matches!(
        value.to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_corral_and_incus_set_passes_and_nothing_else() {
        for (k, v) in [
            ("limits.cpu", "2"),
            ("image.os", "busybox"),
            ("volatile.uuid", "x"),
            ("user.corral.stamp", "1"),
            ("security.idmap.isolated", "true"),
            (
                "volatile.idmap.next",
                r#"[{"Isuid":true,"Isgid":false,"Hostid":1000000,"Nsid":0,"Maprange":65536}]"#,
            ),
            ("volatile.last_state.idmap", "[]"),
            ("volatile.idmap.base", "0"),
            (NO_DAD_KEY, "0"),
        ] {
            assert_eq!(config_problem(k, v), None, "{k}");
        }
        for (k, v) in [
            ("raw.lxc", "lxc.apparmor.profile=unconfined"),
            ("raw.idmap", "both 0 0"),
            ("security.privileged", "true"),
            ("security.nesting", "false"),
            ("linux.kernel_modules", "ip_tables"),
            ("security.syscalls.intercept.mount", "true"),
            ("user.user-data", "x"),
            ("security.idmap.isolated", "false"),
            (NO_DAD_KEY, "1"),
            ("linux.sysctl.net.ipv4.ip_forward", "1"),
            (
                "volatile.idmap.next",
                r#"[{"Isuid":true,"Isgid":false,"Hostid":0,"Nsid":0,"Maprange":1}]"#,
            ),
        ] {
            assert!(config_problem(k, v).is_some(), "{k}={v}");
        }
    }

    #[test]
    fn devices_carry_only_their_own_keys() {
        let root = Device::from([
            ("type".into(), "disk".into()),
            ("path".into(), "/".into()),
            ("pool".into(), "default".into()),
        ]);
        assert_eq!(device_problem(ROOT_DEVICE, &root), None);
        let mut shifted = root.clone();
        shifted.insert("shift".into(), "true".into());
        assert!(device_problem(ROOT_DEVICE, &shifted).is_some());
        assert!(device_problem("gpu0", &root).is_some());
    }
}
