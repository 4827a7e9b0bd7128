//! cloud-init user-data for a Multipass sandbox: the route swap.
//!
//! A Multipass VM always has a first NIC on Multipass's own bridge (its
//! control plane; the host drops forwarded traffic there) and, with
//! `--network`, a second NIC on the profile bridge. Linux picks the first
//! NIC's default route, so a small one-shot unit, run at every boot, makes
//! the profile bridge's interface the only default route. The interface is
//! found by the connected route of the profile's subnet, and the gateway is
//! the profile's gateway — both computed from the profile, nothing
//! hard-coded. No firewall is installed in the guest: enforcement lives on
//! the host, out of a root agent's reach.

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use yaml_serde::{Mapping, Value};

/// Where the route-swap script lives in the guest.
pub const SCRIPT_PATH: &str = "/usr/local/sbin/corral-route-swap";
/// The systemd unit that runs it at every boot.
pub const UNIT_PATH: &str = "/etc/systemd/system/corral-route-swap.service";
/// How long the script waits for the profile NIC to get its address.
pub const ADDRESS_WAIT_SECS: u32 = 60;

/// Why user-data could not be built.
#[derive(Debug, thiserror::Error)]
pub enum CloudInitError {
    /// The template's user-data is not a `#cloud-config` mapping.
    #[error(
        "template user-data is not a `#cloud-config` document ({reason}); corral can only merge its route swap into cloud-config YAML"
    )]
    NotCloudConfig {
        /// What is wrong.
        reason: String,
    },
    /// The template already uses a key corral needs with an incompatible shape.
    #[error("template user-data key `{key}` must be a list so corral can append to it")]
    Conflict {
        /// The key.
        key: &'static str,
    },
    /// YAML serialisation failed.
    #[error("cannot write cloud-init YAML: {0}")]
    Yaml(#[from] yaml_serde::Error),
}

/// The network the route swap points the default route at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSwap {
    /// The profile bridge's IPv4 subnet.
    pub subnet: Ipv4Net,
    /// The profile bridge's gateway.
    pub gateway: Ipv4Addr,
}

impl RouteSwap {
    /// The shell script the unit runs. Only typed addresses are interpolated.
    pub fn script(&self) -> String {
        let subnet = self.subnet.trunc();
        let gateway = self.gateway;
        format!(
            r#"#!/bin/sh
# corral: send all traffic through the profile bridge's interface.
set -eu
subnet='{subnet}'
gateway='{gateway}'
tries=0
while :; do
  dev=$(ip -4 -o route show exact "$subnet" | awk '{{for (i = 1; i < NF; i++) if ($i == "dev") {{ print $(i + 1); exit }}}}')
  [ -n "$dev" ] && break
  tries=$((tries + 1))
  if [ "$tries" -ge {ADDRESS_WAIT_SECS} ]; then
    echo "corral-route-swap: no interface has an address in $subnet" >&2
    exit 1
  fi
  sleep 1
done
while ip -4 route del default 2>/dev/null; do :; done
ip -4 route add default via "$gateway" dev "$dev"
"#
        )
    }

    /// The systemd unit.
    pub fn unit() -> String {
        format!(
            "[Unit]\nDescription=corral route swap onto the profile bridge\nWants=network-online.target\nAfter=network-online.target\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart={SCRIPT_PATH}\n\n[Install]\nWantedBy=multi-user.target\n"
        )
    }
}

fn text(s: &str) -> Value {
    Value::String(s.to_owned())
}

fn write_file(path: &str, permissions: &str, content: String) -> Value {
    let mut m = Mapping::new();
    m.insert(text("path"), text(path));
    m.insert(text("owner"), text("root:root"));
    m.insert(text("permissions"), text(permissions));
    m.insert(text("content"), Value::String(content));
    Value::Mapping(m)
}

fn command(argv: &[&str]) -> Value {
    Value::Sequence(argv.iter().map(|a| text(a)).collect())
}

/// Append `items` to the list under `key`, creating it when absent.
fn append(doc: &mut Mapping, key: &'static str, items: Vec<Value>) -> Result<(), CloudInitError> {
    match doc.get_mut(key) {
        None => {
            doc.insert(text(key), Value::Sequence(items));
        }
        Some(Value::Sequence(list)) => list.extend(items),
        Some(Value::Null) => {
            doc.insert(text(key), Value::Sequence(items));
        }
        Some(_) => return Err(CloudInitError::Conflict { key }),
    }
    Ok(())
}

/// Build the user-data: the template's own `#cloud-config` (if any) with
/// the route swap (if the sandbox has a profile) appended.
pub fn user_data(
    template: Option<&str>,
    swap: Option<RouteSwap>,
) -> Result<String, CloudInitError> {
    let mut doc = match template {
        None => Mapping::new(),
        Some(text) => parse_template(text)?,
    };
    if let Some(swap) = swap {
        append(
            &mut doc,
            "write_files",
            vec![
                write_file(SCRIPT_PATH, "0755", swap.script()),
                write_file(UNIT_PATH, "0644", RouteSwap::unit()),
            ],
        )?;
        append(
            &mut doc,
            "runcmd",
            vec![
                command(&["systemctl", "daemon-reload"]),
                command(&["systemctl", "enable", "--now", "corral-route-swap.service"]),
            ],
        )?;
    }
    let body = yaml_serde::to_string(&Value::Mapping(doc))?;
    Ok(format!("#cloud-config\n{body}"))
}

fn parse_template(source: &str) -> Result<Mapping, CloudInitError> {
    let first = source.lines().next().unwrap_or("").trim_end();
    if first != "#cloud-config" {
        return Err(CloudInitError::NotCloudConfig {
            reason: "its first line is not `#cloud-config`".to_owned(),
        });
    }
    match yaml_serde::from_str::<Value>(source) {
        Ok(Value::Mapping(m)) => Ok(m),
        Ok(Value::Null) => Ok(Mapping::new()),
        Ok(_) => Err(CloudInitError::NotCloudConfig {
            reason: "its top level is not a mapping".to_owned(),
        }),
        Err(e) => Err(CloudInitError::NotCloudConfig {
            reason: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swap(subnet: &str, gateway: &str) -> RouteSwap {
        RouteSwap {
            subnet: subnet.parse().unwrap(),
            gateway: gateway.parse().unwrap(),
        }
    }

    fn parsed(yaml: &str) -> Value {
        assert!(yaml.starts_with("#cloud-config\n"));
        yaml_serde::from_str(yaml).unwrap()
    }

    #[test]
    fn route_swap_uses_the_profile_subnet_and_gateway() {
        let yaml = user_data(None, Some(swap("172.20.8.0/22", "172.20.8.1"))).unwrap();
        let doc = parsed(&yaml);
        let script = doc["write_files"][0]["content"].as_str().unwrap();
        assert!(script.contains("subnet='172.20.8.0/22'"), "{script}");
        assert!(script.contains("gateway='172.20.8.1'"), "{script}");
        assert!(!script.contains("10.99"), "{script}");
        assert_eq!(doc["write_files"][0]["path"], SCRIPT_PATH);
        assert_eq!(doc["write_files"][0]["permissions"], "0755");
        assert_eq!(doc["write_files"][1]["path"], UNIT_PATH);
        assert_eq!(doc["runcmd"][1][2], "--now");
    }

    #[test]
    fn no_in_guest_firewall() {
        let yaml = user_data(None, Some(swap("10.99.5.0/24", "10.99.5.1"))).unwrap();
        for word in ["iptables", "nft ", "ufw", "firewall-cmd"] {
            assert!(!yaml.contains(word), "{word} in {yaml}");
        }
    }

    #[test]
    fn script_runs_under_sh_syntax_check() {
        let script = swap("10.99.5.0/24", "10.99.5.1").script();
        let out = std::process::Command::new("/bin/sh")
            .arg("-n")
            .arg("-c")
            .arg(&script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Runs the generated script for real, inside an anonymous network
    /// namespace: two veth pairs stand in for the VM's NICs, the first
    /// holding the default route the way Multipass's own NIC does.
    #[test]
    fn script_swaps_the_default_route_in_a_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("swap.sh");
        std::fs::write(&path, swap("172.20.8.0/22", "172.20.8.1").script()).unwrap();
        let setup = "ip link add d0 type veth peer name e0 \
            && ip link add d1 type veth peer name e1 \
            && for l in d0 e0 d1 e1; do ip link set $l up; done \
            && ip addr add 192.168.77.5/24 dev d0 \
            && ip route add default via 192.168.77.1 dev d0 \
            && ip addr add 172.20.9.5/22 dev d1";
        let probe = std::process::Command::new("unshare")
            .args([
                "--net",
                "/bin/sh",
                "-c",
                "ip link add p0 type veth peer name q0",
            ])
            .output();
        if !probe.as_ref().is_ok_and(|o| o.status.success()) {
            corral_test_support::skip(format!(
                "needs unshare --net and root to create a network namespace ({probe:?})"
            ));
            return;
        }
        let out = std::process::Command::new("unshare")
            .arg("--net")
            .arg("/bin/sh")
            .arg("-c")
            .arg(format!(
                "{setup} && /bin/sh \"$0\" && ip -4 route show default"
            ))
            .arg(&path)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(stdout.trim(), "default via 172.20.8.1 dev d1");
    }

    #[test]
    fn without_a_profile_there_is_no_swap() {
        let yaml = user_data(None, None).unwrap();
        assert_eq!(parsed(&yaml), Value::Mapping(Mapping::new()));
    }

    #[test]
    fn merges_into_template_lists() {
        let template = "#cloud-config\npackages: [git]\nruncmd:\n  - [touch, /x]\nwrite_files:\n  - path: /etc/a\n    content: a\n";
        let yaml = user_data(Some(template), Some(swap("10.99.5.0/24", "10.99.5.1"))).unwrap();
        let doc = parsed(&yaml);
        assert_eq!(doc["packages"][0], "git");
        assert_eq!(doc["runcmd"].as_sequence().unwrap().len(), 3);
        assert_eq!(doc["runcmd"][0][1], "/x");
        assert_eq!(doc["write_files"].as_sequence().unwrap().len(), 3);
        assert_eq!(doc["write_files"][0]["path"], "/etc/a");
    }

    #[test]
    fn refuses_non_cloud_config_templates() {
        let err = user_data(Some("#!/bin/sh\necho hi\n"), None).unwrap_err();
        assert!(
            matches!(err, CloudInitError::NotCloudConfig { .. }),
            "{err}"
        );
        let err = user_data(Some("#cloud-config\n- a\n"), None).unwrap_err();
        assert!(
            matches!(err, CloudInitError::NotCloudConfig { .. }),
            "{err}"
        );
        let err = user_data(
            Some("#cloud-config\nruncmd: echo\n"),
            Some(swap("10.99.5.0/24", "10.99.5.1")),
        )
        .unwrap_err();
        assert!(
            matches!(err, CloudInitError::Conflict { key: "runcmd" }),
            "{err}"
        );
    }
}
