//! From what a caller asks for to the provider's `SandboxSpec`: the
//! template looked up and filled in (image, resources, its cloud-init
//! user-data), the name checked, the profile looked up (its one network
//! attachment), the size presets and size strings.

use std::fmt;
use std::str::FromStr;

use corral_sandbox_core::SandboxName;
use corral_sandbox_core::config::Config;
use corral_sandbox_core::sandbox::{
    InstanceType, NetworkAttachment, ProviderError, Resources, SandboxSpec,
};
use serde::{Deserialize, Serialize};

use crate::error::ServiceError;
use crate::templates::{self, Catalog, Rendered, Template};

/// A sandbox to create.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewSandbox {
    /// Its name.
    pub name: String,
    /// The image (an alias or fingerprint the backend knows); `None`: the
    /// template's.
    #[serde(default)]
    pub image: Option<String>,
    /// The template; `None`: [`templates::DEFAULT_TEMPLATE`].
    #[serde(default)]
    pub template: Option<String>,
    /// The network profile; `None` means no network at all.
    pub profile: Option<String>,
    /// Resource limits; each one left `None` is the template's.
    pub resources: Resources,
    /// Container or virtual machine.
    pub instance_type: InstanceType,
    /// The Incus cluster member to place it on; `None`: Incus's choice
    /// (or a single host).
    #[serde(default)]
    pub target: Option<String>,
    /// Its time to live, seconds: deleted that long after it is created;
    /// `None`: the template's (none unless the template sets one).
    #[serde(default)]
    pub ttl_secs: Option<u64>,
    /// How long it may sit idle while running before it is stopped,
    /// seconds; `None`: the template's.
    #[serde(default)]
    pub idle_stop_secs: Option<u64>,
}

impl NewSandbox {
    /// A container `name` from `image`, on no network, from the default
    /// template.
    pub fn new(name: impl Into<String>, image: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            image: Some(image.into()),
            template: None,
            profile: None,
            resources: Resources::default(),
            instance_type: InstanceType::Container,
            target: None,
            ttl_secs: None,
            idle_stop_secs: None,
        }
    }

    /// The same on `profile`.
    #[must_use]
    pub fn on(mut self, profile: impl Into<String>) -> Self {
        self.profile = Some(profile.into());
        self
    }

    /// The same, placed on cluster member `member`.
    #[must_use]
    pub fn on_member(mut self, member: impl Into<String>) -> Self {
        self.target = Some(member.into());
        self
    }
}

/// What a create will ask the provider for, and the template it renders.
#[derive(Debug, Clone)]
pub struct CreatePlan {
    /// The provider's spec (with the template's user-data).
    pub spec: SandboxSpec,
    /// The template as it reaches the guest.
    pub rendered: Rendered,
    /// Its lifetime (the request's, else the template's).
    pub lifetime: crate::lifetimes::Limits,
}

/// `req` with what it leaves open taken from `template`.
pub fn filled(req: &NewSandbox, template: &Template) -> NewSandbox {
    let r = req.resources;
    let t = template.resources;
    NewSandbox {
        image: Some(req.image.clone().unwrap_or_else(|| template.image.clone())),
        template: Some(template.name.clone()),
        resources: Resources {
            cpus: r.cpus.or(t.cpus),
            memory_mib: r.memory_mib.or(t.memory_mib),
            disk_gib: r.disk_gib.or(t.disk_gib),
        },
        ttl_secs: req.ttl_secs.or(template.ttl_secs),
        idle_stop_secs: req.idle_stop_secs.or(template.idle_stop_secs),
        ..req.clone()
    }
}

/// The create `req` asks for under `config`, with its template from
/// `catalog`.
pub fn plan(
    config: &Config,
    req: &NewSandbox,
    catalog: &Catalog,
) -> Result<CreatePlan, ServiceError> {
    let name = req
        .template
        .as_deref()
        .unwrap_or(templates::DEFAULT_TEMPLATE);
    let template = catalog.get(name)?;
    for (field, v) in [
        ("ttl_secs", req.ttl_secs),
        ("idle_stop_secs", req.idle_stop_secs),
    ] {
        if v.is_some_and(|s| !(1..=crate::lifetimes::duration::MAX_SECS).contains(&s)) {
            return Err(ProviderError::InvalidSpec {
                field,
                reason: format!(
                    "{}; expected 1 to {} seconds",
                    v.unwrap_or_default(),
                    crate::lifetimes::duration::MAX_SECS
                ),
            }
            .into());
        }
    }
    let req = filled(req, template);
    let mut spec = spec_for(config, &req)?;
    let profile = spec
        .network
        .as_ref()
        .and_then(|n| config.profiles.get(n.profile.as_str()));
    let rendered = templates::render::render(template, profile)?;
    spec.user_data = Some(rendered.user_data.clone());
    let lifetime = crate::lifetimes::Limits {
        ttl_secs: req.ttl_secs,
        idle_stop_secs: req.idle_stop_secs,
    };
    Ok(CreatePlan {
        spec,
        rendered,
        lifetime,
    })
}

/// A sandbox name from caller input.
pub fn sandbox_name(raw: &str) -> Result<SandboxName, ProviderError> {
    SandboxName::new(raw).map_err(|e| ProviderError::InvalidSpec {
        field: "name",
        reason: e.to_string(),
    })
}

/// The profile a sandbox gets when the caller names none: the `[phases]
/// work` profile of the configuration.
pub fn default_profile(config: &Config) -> Result<String, ProviderError> {
    config
        .phases
        .name_for(corral_sandbox_core::Phase::Work)
        .map(ToString::to_string)
        .ok_or_else(|| ProviderError::InvalidSpec {
            field: "profile",
            reason: format!(
                "none given and the configuration sets no `[phases] work` profile; name one of: {} (or ask for no network)",
                config.profiles.names().join(", ")
            ),
        })
}

/// The spec `req` asks for under `config`.
pub fn spec_for(config: &Config, req: &NewSandbox) -> Result<SandboxSpec, ProviderError> {
    let name = sandbox_name(&req.name)?;
    let image = req.image.as_deref().unwrap_or_default();
    if image.trim().is_empty() {
        return Err(ProviderError::InvalidSpec {
            field: "image",
            reason: "empty; expected an image alias or fingerprint the backend knows".into(),
        });
    }
    let network = match &req.profile {
        None => None,
        Some(p) => {
            let profile = config
                .profiles
                .get(p)
                .ok_or_else(|| ProviderError::UnknownProfile {
                    profile: p.clone(),
                    configured: config.profiles.names(),
                })?;
            // The allowlist is enforced in the host kernel, not by the
            // provider, so no resolved addresses travel with the attachment.
            Some(NetworkAttachment::for_profile(profile, Vec::new()))
        }
    };
    Ok(SandboxSpec {
        network,
        resources: req.resources,
        instance_type: req.instance_type,
        target: req.target.clone(),
        ..SandboxSpec::new(name, image)
    })
}

/// A resource preset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Size {
    /// 1 CPU, 1 GiB memory, 5 GiB disk.
    Small,
    /// 2 CPUs, 4 GiB memory, 20 GiB disk.
    Medium,
    /// 4 CPUs, 8 GiB memory, 50 GiB disk.
    Large,
}

impl Size {
    /// The limits of this preset.
    pub fn resources(self) -> Resources {
        let (cpus, memory_mib, disk_gib) = match self {
            Size::Small => (1, 1024, 5),
            Size::Medium => (2, 4096, 20),
            Size::Large => (4, 8192, 50),
        };
        Resources {
            cpus: Some(cpus),
            memory_mib: Some(memory_mib),
            disk_gib: Some(disk_gib),
        }
    }
}

/// A size string is not `<number><unit>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a size; write a whole number with a unit, e.g. 512MiB, 2GiB, 20G (M/MB/MiB and G/GB/GiB are all binary)"
)]
pub struct SizeError(pub String);

/// A byte size as written on a command line, in MiB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize {
    /// The size in MiB.
    pub mib: u64,
}

impl ByteSize {
    /// Whole GiB, rounded up (disk sizes are set in GiB).
    pub fn gib_ceil(self) -> u64 {
        self.mib.div_ceil(1024)
    }
}

impl FromStr for ByteSize {
    type Err = SizeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || SizeError(s.to_owned());
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (digits, unit) = t.split_at(split);
        let n: u64 = digits.parse().map_err(|_| err())?;
        let factor = match unit.trim().to_ascii_lowercase().as_str() {
            "m" | "mb" | "mib" => 1,
            "g" | "gb" | "gib" => 1024,
            "t" | "tb" | "tib" => 1024 * 1024,
            _ => return Err(err()),
        };
        let mib = n.checked_mul(factor).filter(|m| *m > 0).ok_or_else(err)?;
        Ok(Self { mib })
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.mib.is_multiple_of(1024) {
            write!(f, "{}GiB", self.mib / 1024)
        } else {
            write!(f, "{}MiB", self.mib)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn req(name: &str, profile: Option<&str>) -> NewSandbox {
        NewSandbox {
            profile: profile.map(Into::into),
            ..NewSandbox::new(name, "corral-test")
        }
    }

    #[test]
    fn the_member_asked_for_reaches_the_spec() {
        let config = Config::builtin_default();
        let spec = spec_for(&config, &req("a1", None).on_member("m2")).unwrap();
        assert_eq!(spec.target.as_deref(), Some("m2"));
        assert_eq!(spec_for(&config, &req("a1", None)).unwrap().target, None);
    }

    #[test]
    fn profile_becomes_the_attachment_of_that_profile() {
        let config = Config::builtin_default();
        let spec = spec_for(&config, &req("a1", Some("allowlist"))).unwrap();
        let profile = config.profiles.get("allowlist").unwrap();
        let net = spec.network.unwrap();
        assert_eq!(net.bridge, profile.bridge);
        assert_eq!(net.subnet_v4, profile.subnet_v4);
        assert_eq!(net.gateway_v4, profile.gateway_v4());
        assert!(
            spec_for(&config, &req("a1", None))
                .unwrap()
                .network
                .is_none()
        );
    }

    #[test]
    fn refusals_name_what_is_wrong() {
        let config = Config::builtin_default();
        let e = spec_for(&config, &req("a1", Some("nope"))).unwrap_err();
        assert!(
            matches!(&e, ProviderError::UnknownProfile { configured, .. } if configured.len() == 3)
        );
        assert!(
            e.to_string().contains("isolated, internet, allowlist"),
            "{e}"
        );
        let e = spec_for(&config, &req("bad name!", None)).unwrap_err();
        assert!(matches!(
            e,
            ProviderError::InvalidSpec { field: "name", .. }
        ));
        let mut r = req("a1", None);
        r.image = Some(" ".into());
        assert!(matches!(
            spec_for(&config, &r).unwrap_err(),
            ProviderError::InvalidSpec { field: "image", .. }
        ));
    }

    #[test]
    fn sizes() {
        assert_eq!("512MiB".parse::<ByteSize>().unwrap().mib, 512);
        assert_eq!("2G".parse::<ByteSize>().unwrap().mib, 2048);
        assert_eq!("3G".parse::<ByteSize>().unwrap().gib_ceil(), 3);
        assert_eq!("1500m".parse::<ByteSize>().unwrap().gib_ceil(), 2);
        for bad in [
            "",
            "G",
            "-1G",
            "1.5G",
            "0",
            // No unit: 1 MiB and 1 GiB are both plausible, so neither is
            // guessed.
            "1",
            "512",
            "2 parsecs",
            "99999999999999999999T",
        ] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad}");
        }
        assert_eq!(Size::Small.resources().cpus, Some(1));
        assert!(Size::Large.resources().memory_mib > Size::Medium.resources().memory_mib);
    }

    #[test]
    fn a_template_fills_what_the_request_leaves_open() {
        let config = Config::builtin_default();
        let catalog = Catalog::builtin().unwrap();
        let mut r = req("a1", Some("internet"));
        r.image = None;
        r.template = Some("claude".into());
        r.resources.cpus = Some(1);
        let p = plan(&config, &r, &catalog).unwrap();
        assert_eq!(p.spec.image, "debian/12");
        let medium = Size::Medium.resources();
        assert_eq!(p.spec.resources.cpus, Some(1), "the request wins");
        assert_eq!(p.spec.resources.memory_mib, medium.memory_mib);
        let ud = p.spec.user_data.unwrap();
        assert!(ud.contains("claude-code"), "{ud}");
        assert!(p.rendered.context.contains("`internet`"));
        // The default template, with the request's image.
        let p = plan(&config, &req("a2", None), &catalog).unwrap();
        assert_eq!(p.rendered.template, "blank");
        assert_eq!(p.spec.image, "corral-test");
        r.template = Some("nope".into());
        let e = plan(&config, &r, &catalog).unwrap_err().to_string();
        assert!(e.contains("template `nope` does not exist"), "{e}");
    }

    #[test]
    fn lifetimes_come_from_the_request_else_the_template_and_are_bounded() {
        let config = Config::builtin_default();
        let catalog = Catalog::builtin().unwrap();
        let mut t = catalog.get("blank").unwrap().clone();
        t.ttl_secs = Some(7200);
        t.idle_stop_secs = Some(1800);
        let mut r = req("a1", None);
        r.idle_stop_secs = Some(60);
        let f = filled(&r, &t);
        assert_eq!(f.ttl_secs, Some(7200), "the template's default");
        assert_eq!(f.idle_stop_secs, Some(60), "the request wins");
        // Control: the built-in template sets none.
        let p = plan(&config, &req("a1", None), &catalog).unwrap();
        assert_eq!(p.lifetime, crate::lifetimes::Limits::default());
        r.ttl_secs = Some(90);
        let p = plan(&config, &r, &catalog).unwrap();
        assert_eq!(
            (p.lifetime.ttl_secs, p.lifetime.idle_stop_secs),
            (Some(90), Some(60))
        );
        for bad in [0, crate::lifetimes::duration::MAX_SECS + 1] {
            r.ttl_secs = Some(bad);
            let e = plan(&config, &r, &catalog).unwrap_err().to_string();
            assert!(e.contains("ttl_secs") && e.contains("expected 1 to"), "{e}");
        }
    }

    proptest! {
        /// Display and parse agree.
        #[test]
        fn size_round_trip(mib in 1u64..10_000_000) {
            let s = ByteSize { mib };
            prop_assert_eq!(s.to_string().parse::<ByteSize>().unwrap(), s);
        }
    }
}
