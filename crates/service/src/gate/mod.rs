//! The start gate: before a profiled sandbox is created or started, the
//! live enforcement of ITS profile is read back and compared with what was
//! applied. Anything missing refuses the start (fail closed), naming what
//! is missing and the command that restores it.
//!
//! What is checked, for profile P:
//! 1. something was applied to this target (`<state>/applied.json`), and
//!    it holds P exactly as the configuration defines it;
//! 2. the live nftables state of P's scope ([`ProfileScope`]): both corral
//!    tables, P's chains, the base chains that dispatch to them, the sets
//!    they look up; P's bridge present, up, with its gateway address(es);
//!    the forwarding and bridge-netfilter sysctls;
//! 3. P's gateway (dnsmasq: DHCP, and the resolver when P has one) runs,
//!    and its resolver answers a query on the gateway address;
//! 4. for a sandbox's start ([`check_sandbox`]): its NIC's port is bound in
//!    what was applied, on P's bridge, to the MAC the NIC carries — and,
//!    through item 2, the binding's set elements are live.
//!
//! Items 1 and 2 are read under the state directory's host lock, so a bind
//! or unbind of another sandbox (which changes the record and the live sets
//! together) is never seen half done. Before item 2 the gate sweeps the
//! ports of the applied bridges (isolates each, quarantines each unbound
//! one: it only tightens), so a sibling's NIC plugged in a moment earlier —
//! Incus attaches a port, then isolates it — does not refuse this start.
//!
//! The check runs with blocking netlink calls: async callers use
//! `tokio::task::spawn_blocking`.

mod scope;

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use corral_egress::host::{HostDrift, HostError, StateStore};
use corral_egress::plan::{HostPlan, PortBinding};
use corral_gateway::{Gateway, GatewayStatus};
use corral_sandbox_core::config::Config;
use corral_sandbox_core::sandbox::BoundNic;
use corral_sandbox_core::{Profile, ProfileName};
use serde::Serialize;

pub use scope::ProfileScope;

use crate::host::{PlanningError, applied};
use crate::target::{Target, TargetError};

/// How long the resolver gets to answer the liveness query.
const RESOLVER_TIMEOUT: Duration = Duration::from_secs(3);

/// A dotless name: every corral resolver answers it itself (`domain-needed`,
/// and the filtered resolver's catch-all), so the query never leaves the host.
const LIVENESS_NAME: &str = "corral-gate-check";

/// One thing the profile's enforcement lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Missing {
    /// Nothing was ever applied to this target.
    NothingApplied {
        /// The record that does not exist.
        state_file: PathBuf,
    },
    /// What was applied has no such profile.
    ProfileNotApplied,
    /// The configured profile differs from the applied one.
    ProfileChanged,
    /// A planned object differs from the live one.
    Enforcement {
        /// The difference.
        drift: HostDrift,
    },
    /// The profile's gateway (dnsmasq) is not running.
    Gateway {
        /// The bridge it serves.
        bridge: String,
        /// Its state.
        state: String,
    },
    /// corral's own gateway (`dns = "corral"`, a profile with no resolver
    /// to ask) is hosted by no process.
    Hosted {
        /// The bridge it serves.
        bridge: String,
        /// Why it reads as not hosted.
        reason: String,
    },
    /// The sandbox's port binding is not what its NIC carries.
    Binding {
        /// The port, when the NIC names one.
        port: Option<String>,
        /// What is wrong, and what to do.
        problem: String,
    },
    /// The gateway runs but its resolver does not answer.
    Resolver {
        /// The address asked.
        address: SocketAddr,
        /// What happened.
        error: String,
    },
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::NothingApplied { state_file } => write!(
                f,
                "nothing has been applied here ({} does not exist)",
                state_file.display()
            ),
            Missing::ProfileNotApplied => f.write_str("the profile is not in what was applied"),
            Missing::ProfileChanged => f.write_str(
                "the configured profile differs from the applied one (bridge, subnet, mode or allowlist changed since the last apply)",
            ),
            Missing::Enforcement { drift } => write!(f, "{drift}"),
            Missing::Gateway { bridge, state } => {
                write!(f, "gateway (dnsmasq) of bridge {bridge} is {state}")
            }
            Missing::Hosted { bridge, reason } => write!(
                f,
                "corral's gateway of bridge {bridge} is not served: {reason}; the profile has \
                 dns = \"corral\": corral's gateway is served by corrald or `corral host \
                 watch`; start one"
            ),
            Missing::Resolver { address, error } => {
                write!(f, "gateway resolver at {address} does not answer: {error}")
            }
            Missing::Binding { port: Some(port), problem } => {
                write!(f, "port binding of {port}: {problem}")
            }
            Missing::Binding { port: None, problem } => write!(f, "port binding: {problem}"),
        }
    }
}

/// The profile's enforcement is incomplete: the sandbox must not start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    /// The profile.
    pub profile: String,
    /// `this host` or the namespace.
    pub target: String,
    /// Every problem found.
    pub missing: Vec<Missing>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.missing.iter().map(ToString::to_string).collect();
        write!(
            f,
            "profile `{}` is not enforced on {} ({} problem{}: {}); refusing to start a sandbox on it — run `corral host apply` (with the same --config, --netns and --state-dir) to restore it",
            self.profile,
            self.target,
            list.len(),
            if list.len() == 1 { "" } else { "s" },
            list.join("; ")
        )
    }
}

/// The gate refused, or could not look (which refuses as well).
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The enforcement is incomplete.
    #[error("{0}")]
    Refused(Refusal),
    /// The namespace could not be opened.
    #[error("start gate: cannot check the enforcement of profile `{profile}`")]
    Target {
        /// The profile.
        profile: String,
        /// The cause.
        #[source]
        source: TargetError,
    },
    /// The applied record could not be read.
    #[error("start gate: cannot check the enforcement of profile `{profile}`")]
    Planning {
        /// The profile.
        profile: String,
        /// The cause.
        #[source]
        source: PlanningError,
    },
    /// The live state could not be read.
    #[error("start gate: cannot read the live enforcement of profile `{profile}`")]
    Host {
        /// The profile.
        profile: String,
        /// The cause.
        #[source]
        source: HostError,
    },
    /// The host lock could not be taken to read the record and the live
    /// state together.
    #[error("start gate: cannot take the host lock to check profile `{profile}`")]
    Lock {
        /// The profile.
        profile: String,
        /// The cause.
        #[source]
        source: corral_egress::host::StateError,
    },
}

/// The profile's enforcement matched: what was checked, for reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GatePass {
    /// The profile.
    pub profile: String,
    /// Its bridge.
    pub bridge: String,
    /// Chains read back, as `family name`.
    pub chains: Vec<String>,
    /// Sets read back.
    pub sets: Vec<String>,
    /// The gateway's dnsmasq pid; `None` where corral's own gateway serves
    /// the profile (its resolver answered instead).
    pub gateway_pid: Option<u32>,
    /// The resolver that answered, when the profile has one.
    pub resolver: Option<SocketAddr>,
    /// The sandbox's port binding: the one made for it (a create, after
    /// the check) or the one checked as applied and live (a start).
    pub binding: Option<PortBinding>,
}

/// How many times the gate sweeps and checks while the only drift left is
/// ports plugged in meanwhile.
const SWEEPS: usize = 3;

/// Check the enforcement of `profile` (as `config` defines it) on the
/// namespace `netns`, against what was applied under `state_dir`.
pub fn check(
    config: &Config,
    profile: &ProfileName,
    netns: Option<&str>,
    state_dir: &Path,
) -> Result<GatePass, GateError> {
    check_with(config, profile, None, netns, state_dir)
}

/// [`check`], and the port binding of a sandbox about to start whose NIC
/// carries `nic` (`None`: its NIC carries no binding, which refuses).
pub fn check_sandbox(
    config: &Config,
    profile: &ProfileName,
    nic: Option<&BoundNic>,
    netns: Option<&str>,
    state_dir: &Path,
) -> Result<GatePass, GateError> {
    check_with(config, profile, Some(nic), netns, state_dir)
}

fn check_with(
    config: &Config,
    profile: &ProfileName,
    nic: Option<Option<&BoundNic>>,
    netns: Option<&str>,
    state_dir: &Path,
) -> Result<GatePass, GateError> {
    let name = profile.to_string();
    let target = Target::open(netns).map_err(|source| GateError::Target {
        profile: name.clone(),
        source,
    })?;
    let refuse = |missing: Vec<Missing>| {
        GateError::Refused(Refusal {
            profile: name.clone(),
            target: target.describe(),
            missing,
        })
    };
    let store = StateStore::new(state_dir);
    // The record and the live state are read under the host lock: a bind
    // or unbind of another sandbox changes both, and a check between its
    // two halves would see drift that is not there.
    let lock = store.lock().map_err(|source| GateError::Lock {
        profile: name.clone(),
        source,
    })?;
    let Some(applied) = applied(&store).map_err(|source| GateError::Planning {
        profile: name.clone(),
        source,
    })?
    else {
        return Err(refuse(vec![Missing::NothingApplied {
            state_file: store.path(),
        }]));
    };
    let Some(applied_profile) = applied.config.profiles.get(profile.as_str()) else {
        return Err(refuse(vec![Missing::ProfileNotApplied]));
    };
    if config.profiles.get(profile.as_str()) != Some(applied_profile) {
        return Err(refuse(vec![Missing::ProfileChanged]));
    }
    let scope = ProfileScope::of(&applied.plan, profile.as_str());
    let host_err = |source| GateError::Host {
        profile: name.clone(),
        source,
    };
    // A sibling's NIC plugged in a moment ago is not isolated yet (Incus
    // attaches, then isolates; corrald's sweeper follows): sweep first —
    // isolate every port, quarantine every unbound one, which only ever
    // tightens — so this start is not refused for it. Only port drift is
    // retried, and only as often as it takes a burst of plugs to settle.
    let mut attempts = 0;
    let drift = loop {
        attempts += 1;
        target.host.sweep_ports(&applied.plan).map_err(&host_err)?;
        let drift: Vec<HostDrift> = target
            .host
            .verify(&applied.plan)
            .map_err(&host_err)?
            .into_iter()
            .filter(|d| scope.covers(d))
            .collect();
        let only_ports = drift.iter().all(|d| matches!(d, HostDrift::Port { .. }));
        if drift.is_empty() || !only_ports || attempts >= SWEEPS {
            break drift;
        }
    };
    let mut missing: Vec<Missing> = drift
        .into_iter()
        .map(|drift| Missing::Enforcement { drift })
        .collect();
    drop(lock);
    let (gateway_pid, resolver) = match check_gateway(&target, state_dir, applied_profile) {
        Ok(found) => found,
        Err(m) => {
            missing.push(m);
            (None, None)
        }
    };
    let binding = match nic.map(|nic| check_binding(&applied.plan, applied_profile, nic)) {
        None => None,
        Some(Ok(b)) => Some(b.clone()),
        Some(Err(m)) => {
            missing.push(m);
            None
        }
    };
    if !missing.is_empty() {
        return Err(refuse(missing));
    }
    Ok(GatePass {
        profile: name,
        bridge: applied_profile.bridge.to_string(),
        chains: scope
            .chains
            .iter()
            .map(|(f, c)| format!("{} {c}", f.keyword()))
            .collect(),
        sets: scope.sets.iter().map(|(_, s)| s.clone()).collect(),
        gateway_pid,
        resolver,
        binding,
    })
}

/// The binding `nic` names, as applied: on `profile`'s bridge, to the MAC
/// the NIC carries. Its live elements are checked with the rest of the
/// profile's scope.
fn check_binding<'a>(
    plan: &'a HostPlan,
    profile: &Profile,
    nic: Option<&BoundNic>,
) -> Result<&'a PortBinding, Missing> {
    let Some(nic) = nic else {
        return Err(Missing::Binding {
            port: None,
            problem: "the sandbox's NIC carries no MAC and port name bound by corral (made before corral bound ports, or copied); delete it and create it again".to_owned(),
        });
    };
    let wrong = |problem: String| Missing::Binding {
        port: Some(nic.port.to_string()),
        problem,
    };
    let Some(b) = plan.binding(nic.port.as_str()) else {
        return Err(wrong(
            "the port is not bound in what was applied (its binding was removed, or made under another state directory); delete the sandbox and create it again".to_owned(),
        ));
    };
    if b.bridge != profile.bridge {
        return Err(wrong(format!(
            "bound on bridge {}, not on the profile's bridge {}",
            b.bridge, profile.bridge
        )));
    }
    if b.mac != nic.mac {
        return Err(wrong(format!(
            "bound to MAC {}, but the sandbox's NIC carries {}",
            b.mac, nic.mac
        )));
    }
    Ok(b)
}

/// The gateway of `profile` runs and, when it serves DNS, answers.
fn check_gateway(
    target: &Target,
    state_dir: &Path,
    profile: &Profile,
) -> Result<(Option<u32>, Option<SocketAddr>), Missing> {
    // corral's own gateway (no dnsmasq) is asked below, by its resolver.
    let pid = match Gateway::new(state_dir, &profile.bridge).status() {
        GatewayStatus::Running { pid } => Some(pid),
        GatewayStatus::Hosted => None,
        other => {
            return Err(Missing::Gateway {
                bridge: profile.bridge.to_string(),
                state: other.to_string(),
            });
        }
    };
    if !corral_gateway::serves_dns(profile) {
        // No resolver to ask: corral's gateway is asked whether it is
        // hosted at all (dnsmasq's pid stands for itself above).
        if pid.is_none()
            && let Err(why) = corral_gateway::is_hosted(state_dir, &profile.bridge)
        {
            return Err(Missing::Hosted {
                bridge: profile.bridge.to_string(),
                reason: why,
            });
        }
        return Ok((pid, None));
    }
    let address = SocketAddr::new(IpAddr::V4(profile.gateway_v4()), 53);
    let answer = target.host.netns().run(|| {
        corral_gateway::probe::query(
            address,
            LIVENESS_NAME,
            corral_gateway::wire::TYPE_A,
            RESOLVER_TIMEOUT,
        )
    });
    // corral's resolver lives in the supervisor's process, not in a
    // daemon of its own: say where it should have come from.
    let hint = if profile.dns == corral_sandbox_core::DnsPolicy::Corral {
        " (the profile has dns = \"corral\": corral's resolver is served by corrald or `corral host watch`; start one)"
    } else {
        ""
    };
    match answer {
        Ok(Ok(_)) => Ok((pid, Some(address))),
        Ok(Err(e)) => Err(Missing::Resolver {
            address,
            error: format!("{e}{hint}"),
        }),
        Err(e) => Err(Missing::Resolver {
            address,
            error: format!("cannot query from the target namespace: {e}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use corral_egress::drift::{Drift, DriftKind, DriftObject};
    use corral_egress::plan::TableFamily;

    use super::*;

    #[test]
    fn a_refusal_names_every_problem_and_the_fix() {
        let r = Refusal {
            profile: "allowlist".into(),
            target: "this host".into(),
            missing: vec![
                Missing::Enforcement {
                    drift: HostDrift::Nft(Drift {
                        kind: DriftKind::Missing,
                        object: DriftObject::Table,
                        family: TableFamily::Inet,
                        location: "table inet corral".into(),
                        detail: "the table does not exist; apply the plan".into(),
                    }),
                },
                Missing::Gateway {
                    bridge: "corral-allow".into(),
                    state: "stopped".into(),
                },
            ],
        };
        let text = r.to_string();
        for needle in [
            "profile `allowlist` is not enforced on this host",
            "2 problems",
            "table inet corral",
            "gateway (dnsmasq) of bridge corral-allow is stopped",
            "`corral host apply`",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["missing"][1]["what"], "gateway");
    }

    #[test]
    fn a_start_needs_the_binding_its_nic_names() {
        use corral_egress::host::plan_settings;
        use corral_egress::plan::Resolution;

        let config = Config::builtin_default();
        let internet = config.profiles.get("internet").unwrap();
        let other = config.profiles.get("isolated").unwrap();
        let b = PortBinding::allocate(internet, &[]).unwrap();
        let plan = HostPlan::build(
            &config.profiles,
            &plan_settings(&config.host),
            &Resolution::new(),
        )
        .unwrap()
        .with_bindings(&config.profiles, vec![b.clone()])
        .unwrap();
        let nic = b.nic();
        assert_eq!(check_binding(&plan, internet, Some(&nic)), Ok(&b));
        let problem = |r: Result<&PortBinding, Missing>| match r {
            Err(m) => m.to_string(),
            Ok(b) => panic!("expected a refusal, got {b:?}"),
        };
        assert!(problem(check_binding(&plan, internet, None)).contains("no MAC and port name"));
        let stranger = BoundNic {
            port: corral_sandbox_core::InterfaceName::new("crl0000beef").unwrap(),
            ..nic.clone()
        };
        assert!(problem(check_binding(&plan, internet, Some(&stranger))).contains("not bound"));
        let spoofed = BoundNic {
            mac: "02:c0:0a:00:00:99".parse().unwrap(),
            ..nic.clone()
        };
        assert!(problem(check_binding(&plan, internet, Some(&spoofed))).contains("bound to MAC"));
        assert!(
            problem(check_binding(&plan, other, Some(&nic)))
                .contains("not on the profile's bridge")
        );
    }

    #[test]
    fn nothing_applied_refuses_before_touching_the_kernel() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::builtin_default();
        let p = ProfileName::new("internet").unwrap();
        match check(&config, &p, None, dir.path()) {
            Err(GateError::Refused(r)) => {
                assert!(
                    matches!(r.missing.as_slice(), [Missing::NothingApplied { .. }]),
                    "{r}"
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}
