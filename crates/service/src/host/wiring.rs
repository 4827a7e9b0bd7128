//! Which sandbox is on which of corral's bridges, and which corral sandbox
//! is not on its profile's bridge: for `host status`, and so `host
//! teardown` never pulls the rules out from under a running sandbox.

use corral_sandbox_core::sandbox::{Attachment, ProviderError, SandboxState};
use corral_sandbox_core::{ProfileName, ProfileSet};
use serde::Serialize;

use crate::provider::Backend;

/// An instance with a network interface on one of corral's bridges.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attached {
    /// The instance.
    pub name: String,
    /// corral's bridge it is on.
    pub bridge: String,
    /// Its stamped profile (corral's instances only).
    pub profile: Option<ProfileName>,
    /// True when corral made it.
    pub owned: bool,
    /// Its state (a running one has a port on the bridge now).
    pub state: SandboxState,
}

/// A corral sandbox whose profile's bridge is not among its interfaces'.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Detached {
    /// The sandbox.
    pub name: String,
    /// Its stamped profile.
    pub profile: ProfileName,
    /// That profile's bridge on this host (`None`: the profile is not
    /// configured here).
    pub expected: Option<String>,
    /// The bridges its interfaces are on instead.
    pub actual: Vec<String>,
    /// Its state.
    pub state: SandboxState,
}

/// Every attachment to corral's bridges and every sandbox off its own.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Wiring {
    /// Instances on corral's bridges, by bridge then name.
    pub attached: Vec<Attached>,
    /// corral's sandboxes that should be on their profile's bridge and are not.
    pub detached: Vec<Detached>,
}

impl Wiring {
    /// The attached instances that are not stopped: each has a port on a
    /// bridge now.
    pub fn live(&self) -> impl Iterator<Item = &Attached> {
        self.attached
            .iter()
            .filter(|a| a.state != SandboxState::Stopped)
    }
}

/// Judge `instances` against the bridges of `profiles` (and `extra`
/// bridges corral created, from its record).
pub fn wiring(profiles: &ProfileSet, extra: &[String], instances: &[Attachment]) -> Wiring {
    let mut bridges: Vec<String> = profiles.iter().map(|p| p.bridge.to_string()).collect();
    bridges.extend(extra.iter().cloned());
    let mut out = Wiring::default();
    for inst in instances {
        for bridge in &inst.bridges {
            if bridges.contains(bridge) {
                out.attached.push(Attached {
                    name: inst.name.clone(),
                    bridge: bridge.clone(),
                    profile: inst.profile.clone(),
                    owned: inst.owned,
                    state: inst.state,
                });
            }
        }
        let Some(profile) = inst.profile.as_ref().filter(|_| inst.owned) else {
            continue;
        };
        let expected = profiles
            .iter()
            .find(|p| &p.name == profile)
            .map(|p| p.bridge.to_string());
        if expected.as_ref().is_none_or(|b| !inst.bridges.contains(b)) {
            out.detached.push(Detached {
                name: inst.name.clone(),
                profile: profile.clone(),
                expected,
                actual: inst.bridges.clone(),
                state: inst.state,
            });
        }
    }
    out.attached
        .sort_by(|a, b| (&a.bridge, &a.name).cmp(&(&b.bridge, &b.name)));
    out.detached.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The wiring read from `backend` now; `None` when the backend cannot
/// tell (its instances are not on this host's bridges).
pub async fn read(
    backend: &Backend,
    profiles: &ProfileSet,
    extra: &[String],
) -> Result<Option<Wiring>, ProviderError> {
    let mut all = Vec::new();
    for p in backend.providers().await? {
        match p.attachments().await? {
            Some(found) => all.extend(found),
            None => return Ok(None),
        }
    }
    Ok(Some(wiring(profiles, extra, &all)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corral_sandbox_core::config::Config;

    fn inst(name: &str, owned: bool, profile: Option<&str>, bridges: &[&str]) -> Attachment {
        Attachment {
            name: name.to_owned(),
            state: SandboxState::Running,
            owned,
            profile: profile.map(|p| ProfileName::new(p).unwrap()),
            bridges: bridges.iter().map(|b| (*b).to_owned()).collect(),
        }
    }

    #[test]
    fn attached_and_detached_are_told_apart() {
        let config = Config::builtin_default();
        let profiles = &config.profiles;
        let first = profiles.iter().next().unwrap();
        let (p, b) = (first.name.as_str(), first.bridge.to_string());
        let got = wiring(
            profiles,
            &["cbr-old".to_owned()],
            &[
                inst("on-it", true, Some(p), &[&b]),
                inst("foreign", false, None, &[&b]),
                inst("moved", true, Some(p), &["incusbr0"]),
                inst("bare", true, Some(p), &[]),
                inst("ghost", true, Some("not-here"), &["cbr-old"]),
                inst("plain", true, None, &[]),
                inst("elsewhere", false, None, &["incusbr0"]),
            ],
        );
        let attached: Vec<(&str, &str, bool)> = got
            .attached
            .iter()
            .map(|a| (a.name.as_str(), a.bridge.as_str(), a.owned))
            .collect();
        let mut want = vec![
            ("ghost", "cbr-old", true),
            ("foreign", b.as_str(), false),
            ("on-it", b.as_str(), true),
        ];
        want.sort_by(|x, y| (x.1, x.0).cmp(&(y.1, y.0)));
        assert_eq!(attached, want);
        let detached: Vec<(&str, Option<&str>)> = got
            .detached
            .iter()
            .map(|d| (d.name.as_str(), d.expected.as_deref()))
            .collect();
        assert_eq!(
            detached,
            vec![
                ("bare", Some(b.as_str())),
                ("ghost", None),
                ("moved", Some(b.as_str()))
            ]
        );
        assert_eq!(got.live().count(), 3);
    }
}
