//! What a lab checks before it starts (tools, kernel, free names) and the
//! stale rules and tables of earlier runs it sweeps away.

use super::{LabError, netlink_error};
use corral_egress::link::{LinkError, Links};
use corral_egress::netns::Netns;
use corral_egress::nft;
use corral_egress::plan::TableFamily;
use futures::TryStreamExt;
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage};

/// Refuses unless the host has no corral tables and no corral-stamped
/// bridge (teardown would remove them), and the lab's interface names and
/// routing rule priorities are free.
pub(crate) fn preflight(here: &Netns, names: &[&str], priorities: &[u32]) -> Result<(), LabError> {
    let live = here.run(nft::read_live)??;
    for (family, word) in [(TableFamily::Inet, "inet"), (TableFamily::Bridge, "bridge")] {
        if live.table(family).is_some() {
            return Err(LabError::Refused(format!(
                "this host already has a `table {word} corral`; the test would replace a live ruleset. Run it on a host without corral state (or `corral host teardown` first if that state is stale)"
            )));
        }
    }
    let (stamped, taken) = here.run_async(|| async {
        let links = Links::connect()?;
        let stamped: Vec<String> = links
            .stamped_bridges()
            .await?
            .into_iter()
            .map(|l| l.name)
            .collect();
        let mut taken = Vec::new();
        for name in names {
            if links.get(name).await?.is_some() {
                taken.push((*name).to_owned());
            }
        }
        Ok::<_, LinkError>((stamped, taken))
    })??;
    if !stamped.is_empty() {
        return Err(LabError::Refused(format!(
            "this host has corral-managed bridges ({}); teardown would delete them",
            stamped.join(", ")
        )));
    }
    if !taken.is_empty() {
        return Err(LabError::Refused(format!(
            "interface(s) {} already exist; a previous run may have leaked them",
            taken.join(", ")
        )));
    }
    sweep_stale_gateways(names);
    let rules = here.run_async(|| async {
        let links = Links::connect()?;
        sweep_stale_rules(&links).await?;
        let msgs: Vec<RuleMessage> = links
            .handle()
            .rule()
            .get(rtnetlink::IpVersion::V4)
            .execute()
            .try_collect()
            .await
            .map_err(|e| netlink_error("list routing rules", e))?;
        Ok::<_, LabError>(msgs)
    })??;
    let taken_priority = rules
        .iter()
        .flat_map(|r| &r.attributes)
        .find_map(|a| match a {
            RuleAttribute::Priority(p) if priorities.contains(p) => Some(*p),
            _ => None,
        });
    if let Some(p) = taken_priority {
        return Err(LabError::Refused(format!(
            "routing rule priority {p} is taken"
        )));
    }
    Ok(())
}

/// Stops the dnsmasq gateways a killed lab left behind for one of `bridges`.
/// A gateway keeps its socket on the lab's address after the bridge is
/// gone, so the next lab with that address could not start its own. Only
/// gateways running in this network namespace whose configuration lives
/// under the temporary directory (a lab's state directory) and names one
/// of the lab's bridges are stopped: the caller holds the host lock and
/// has checked those bridges do not exist here, so no live lab or
/// deployment owns them.
fn sweep_stale_gateways(bridges: &[&str]) {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    let tmp = std::env::temp_dir();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if !args
            .first()
            .is_some_and(|a| std::path::Path::new(a).ends_with("dnsmasq"))
        {
            continue;
        }
        let Some(conf) = args
            .iter()
            .find_map(|a| a.strip_prefix("--conf-file="))
            .map(std::path::PathBuf::from)
        else {
            continue;
        };
        if !conf.starts_with(&tmp) {
            continue;
        }
        // Another network namespace's gateway (a cluster lab member's, whose
        // bridges of the same names live there) is not this lab's.
        let ns = |p: &std::path::Path| std::fs::read_link(p.join("ns/net")).ok();
        if ns(&entry.path()) != ns(std::path::Path::new("/proc/self")) {
            continue;
        }
        let head = std::fs::read_to_string(&conf).unwrap_or_default();
        let first = head.lines().next().unwrap_or_default();
        if let Some(bridge) = bridges
            .iter()
            .find(|b| first.contains(&format!("on bridge `{b}`")))
        {
            eprintln!(
                "stopping dnsmasq {pid} ({}): a killed test lab left its gateway for `{bridge}` behind",
                conf.display()
            );
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            // Its sockets are free once it is gone (reaped by init).
            for _ in 0..100 {
                if !entry.path().exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
}

/// Rule priorities the labs use: [`HostLab`] from 9000, the built-in
/// profiles' lab from 8000.
pub(super) const LAB_PRIORITIES: [std::ops::Range<u32>; 2] = [8000..8800, 9000..9400];

/// Routing tables the labs create (`0xc0_0000 + n`, `0xc1_0000 + priority`).
pub(super) const LAB_TABLES: std::ops::Range<u32> = 0x00c0_0000..0x00c2_0000;

/// Removes the routing rules a lab killed before its clean-up left behind.
/// The caller holds the host lock, so no live lab owns any of them; left
/// in place, a stale `iif <bridge> unreachable` of an earlier run (the
/// built-in bridge names repeat) shadows the next lab's routes and every
/// allowed destination looks blocked.
pub(super) async fn sweep_stale_rules(links: &Links) -> Result<(), LabError> {
    for version in [rtnetlink::IpVersion::V4, rtnetlink::IpVersion::V6] {
        let msgs: Vec<RuleMessage> = links
            .handle()
            .rule()
            .get(version)
            .execute()
            .try_collect()
            .await
            .map_err(|e| netlink_error("list routing rules", e))?;
        for rule in msgs {
            let priority = rule.attributes.iter().find_map(|a| match a {
                RuleAttribute::Priority(p) => Some(*p),
                _ => None,
            });
            let table = rule.attributes.iter().find_map(|a| match a {
                RuleAttribute::Table(t) => Some(*t),
                _ => None,
            });
            let ours = priority.is_some_and(|p| LAB_PRIORITIES.iter().any(|r| r.contains(&p)))
                && (table.is_some_and(|t| LAB_TABLES.contains(&t))
                    || rule.header.action == RuleAction::Unreachable);
            if ours {
                eprintln!(
                    "removing routing rule priority {priority:?} table {table:?}: a killed test lab left it behind"
                );
                links
                    .handle()
                    .rule()
                    .del(rule)
                    .execute()
                    .await
                    .map_err(|e| netlink_error("remove a stale lab routing rule", e))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::process::{Command, Stdio};

    /// A dnsmasq like a lab's gateway, its configuration in a temporary
    /// directory naming `bridge`, serving nothing.
    fn fake_gateway(dir: &std::path::Path, bridge: &str) -> std::process::Child {
        let conf = dir.join(format!("{bridge}.conf"));
        std::fs::write(
            &conf,
            format!("# corral gateway for profile `t` on bridge `{bridge}`; test\nport=0\n"),
        )
        .unwrap();
        Command::new("dnsmasq")
            .arg(format!("--conf-file={}", conf.display()))
            .arg("--keep-in-foreground")
            // Two at once: the default pid file would be shared.
            .arg("--pid-file=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_killed_labs_gateway_is_stopped_and_no_other() {
        if !corral_test_support::gate::root()
            || !corral_test_support::gate::tool("dnsmasq", "dnsmasq")
        {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut stale = fake_gateway(dir.path(), "csweep1");
        let mut other = fake_gateway(dir.path(), "csweep2");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(stale.try_wait().unwrap().is_none(), "the fake gateway runs");
        super::sweep_stale_gateways(&["csweep1"]);
        let stale_status = stale.wait().unwrap();
        let other_running = other.try_wait().unwrap().is_none();
        let _ = other.kill();
        let _ = other.wait();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            stale_status.signal(),
            Some(9),
            "the stale gateway was killed"
        );
        // Control: a gateway for a bridge the lab does not use is left alone.
        assert!(other_running, "a gateway for another bridge kept running");
    }
}
