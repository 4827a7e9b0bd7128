//! The ownership stamp: `user.corral.*` keys every instance corral creates
//! carries. Operations check it on every instance they name and refuse an
//! instance without one, so corral never touches what it did not make.

use std::collections::BTreeMap;
use std::io::Read;
use std::time::{SystemTime, UNIX_EPOCH};

use corral_sandbox_core::sandbox::{BoundNic, ProviderError};
use corral_sandbox_core::{BridgeName, InterfaceName, ProfileName};

/// Prefix of every key corral writes.
pub const PREFIX: &str = "user.corral.";
/// The stamp format version key and value; bump when the keys change meaning.
pub const VERSION_KEY: &str = "user.corral.stamp";
/// The only stamp version this build understands.
pub const STAMP_VERSION: &str = "1";
const ID: &str = "user.corral.id";
const PROFILE: &str = "user.corral.profile";
const BRIDGE: &str = "user.corral.bridge";
const TEMPLATE: &str = "user.corral.template";
const CREATED: &str = "user.corral.created";
const CORRAL_VERSION: &str = "user.corral.version";
const HWADDR: &str = "user.corral.hwaddr";
const PORT: &str = "user.corral.port";

/// What corral records about an instance it made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// A random id, fresh for every instance (clones and imports get new ones).
    pub id: String,
    /// The profile the instance was created for; `None`: no network.
    pub profile: Option<ProfileName>,
    /// The bridge its only NIC is attached to; `None`: no NIC.
    pub bridge: Option<BridgeName>,
    /// The image or template it came from.
    pub template: String,
    /// When the stamp was written (RFC 3339, UTC).
    pub created: String,
    /// The corral version that wrote it.
    pub corral_version: String,
    /// The MAC and host-side name corral bound its NIC to, if it did; the
    /// topology check holds the NIC to them before every start.
    pub nic: Option<BoundNic>,
}

impl Stamp {
    /// A fresh stamp for a new instance.
    pub fn new(
        profile: Option<ProfileName>,
        bridge: Option<BridgeName>,
        template: impl Into<String>,
    ) -> Result<Self, ProviderError> {
        Ok(Self {
            id: random_id()?,
            profile,
            bridge,
            template: template.into(),
            created: rfc3339(SystemTime::now()),
            corral_version: env!("CARGO_PKG_VERSION").to_owned(),
            nic: None,
        })
    }

    /// The same stamp with its NIC bound to `nic`.
    #[must_use]
    pub fn with_nic(mut self, nic: Option<BoundNic>) -> Self {
        self.nic = nic;
        self
    }

    /// The same lineage (profile, template) under a new identity: for clones
    /// and imports. The NIC binding is not carried over: a binding is one
    /// port's, and two instances never share one.
    pub fn renewed(&self) -> Result<Self, ProviderError> {
        Self::new(
            self.profile.clone(),
            self.bridge.clone(),
            self.template.clone(),
        )
    }

    /// The config keys to write.
    pub fn to_config(&self) -> BTreeMap<String, String> {
        let mut config = BTreeMap::from([
            (VERSION_KEY.to_owned(), STAMP_VERSION.to_owned()),
            (ID.to_owned(), self.id.clone()),
            (TEMPLATE.to_owned(), self.template.clone()),
            (CREATED.to_owned(), self.created.clone()),
            (CORRAL_VERSION.to_owned(), self.corral_version.clone()),
        ]);
        if let Some(profile) = &self.profile {
            config.insert(PROFILE.to_owned(), profile.to_string());
        }
        if let Some(bridge) = &self.bridge {
            config.insert(BRIDGE.to_owned(), bridge.to_string());
        }
        if let Some(nic) = &self.nic {
            config.insert(HWADDR.to_owned(), nic.mac.to_string());
            config.insert(PORT.to_owned(), nic.port.to_string());
        }
        config
    }

    /// Read and check the stamp of instance `name` from its config; an
    /// instance without a valid one is refused as not corral's.
    pub fn read(name: &str, config: &BTreeMap<String, String>) -> Result<Self, ProviderError> {
        let refuse = |reason: String| ProviderError::NotOwned {
            name: name.to_owned(),
            reason,
        };
        let version = config
            .get(VERSION_KEY)
            .ok_or_else(|| refuse(format!("no `{VERSION_KEY}` key")))?;
        if version != STAMP_VERSION {
            return Err(refuse(format!(
                "stamp version {version:?}, this corral reads version {STAMP_VERSION}"
            )));
        }
        let required = |key: &str| {
            config
                .get(key)
                .filter(|v| !v.is_empty())
                .cloned()
                .ok_or_else(|| refuse(format!("stamp key `{key}` is missing")))
        };
        let profile = match config.get(PROFILE) {
            Some(p) => Some(
                ProfileName::new(p.as_str())
                    .map_err(|e| refuse(format!("stamp key `{PROFILE}`: {e}")))?,
            ),
            None => None,
        };
        let bridge = match config.get(BRIDGE) {
            Some(b) => Some(
                BridgeName::new(b.as_str())
                    .map_err(|e| refuse(format!("stamp key `{BRIDGE}`: {e}")))?,
            ),
            None => None,
        };
        if profile.is_some() != bridge.is_some() {
            return Err(refuse(format!(
                "`{PROFILE}` and `{BRIDGE}` must be both present or both absent"
            )));
        }
        let nic = match (config.get(HWADDR), config.get(PORT)) {
            (None, None) => None,
            (Some(mac), Some(port)) if bridge.is_some() => Some(BoundNic {
                mac: mac
                    .parse()
                    .map_err(|e| refuse(format!("stamp key `{HWADDR}`: {e}")))?,
                port: InterfaceName::new(port.as_str())
                    .map_err(|e| refuse(format!("stamp key `{PORT}`: {e}")))?,
            }),
            _ => {
                return Err(refuse(format!(
                    "`{HWADDR}` and `{PORT}` must be both present (with `{BRIDGE}`) or both absent"
                )));
            }
        };
        Ok(Self {
            id: required(ID)?,
            profile,
            bridge,
            template: required(TEMPLATE)?,
            created: required(CREATED)?,
            corral_version: required(CORRAL_VERSION)?,
            nic,
        })
    }
}

/// 128 random bits, hex.
fn random_id() -> Result<String, ProviderError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|source| ProviderError::Io {
            context: "cannot read /dev/urandom for a fresh instance id".into(),
            source,
        })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `time` as RFC 3339 UTC with seconds.
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use proptest::prelude::*;

    use super::*;

    fn stamp() -> Stamp {
        Stamp::new(
            Some(ProfileName::new("claude").unwrap_or_else(|e| panic!("{e}"))),
            Some(BridgeName::new("cb-claude").unwrap_or_else(|e| panic!("{e}"))),
            "corral-test",
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_stamp_reads_back_from_its_config() {
        let s = stamp();
        let back = Stamp::read("x", &s.to_config()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back, s);
        assert_eq!(s.id.len(), 32);
    }

    #[test]
    fn a_bound_nic_reads_back_and_half_of_one_is_refused() {
        let nic = BoundNic {
            mac: "02:c0:0a:63:02:02"
                .parse()
                .unwrap_or_else(|e| panic!("{e}")),
            port: InterfaceName::new("crl0a630202").unwrap_or_else(|e| panic!("{e}")),
        };
        let s = stamp().with_nic(Some(nic.clone()));
        let config = s.to_config();
        let back = Stamp::read("x", &config).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(back.nic, Some(nic));
        assert_eq!(s.renewed().unwrap_or_else(|e| panic!("{e}")).nic, None);
        let mut half = config.clone();
        half.remove(PORT);
        assert!(Stamp::read("x", &half).is_err());
        let mut bad = config;
        bad.insert(HWADDR.into(), "ff:ff:ff:ff:ff:ff:ff".into());
        assert!(Stamp::read("x", &bad).is_err());
    }

    #[test]
    fn renewed_keeps_lineage_but_not_identity() {
        let s = stamp();
        let r = s.renewed().unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(r.id, s.id);
        assert_eq!(
            (r.profile, r.bridge, r.template),
            (s.profile, s.bridge, s.template)
        );
    }

    #[test]
    fn unstamped_and_foreign_stamps_are_refused_with_the_reason() {
        let err = Stamp::read("web", &BTreeMap::new()).err();
        let Some(ProviderError::NotOwned { name, reason }) = err else {
            panic!("expected NotOwned, got {err:?}");
        };
        assert_eq!(name, "web");
        assert!(reason.contains("user.corral.stamp"), "{reason}");

        let mut config = stamp().to_config();
        config.insert(VERSION_KEY.into(), "9".into());
        let err = Stamp::read("web", &config).err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("version \"9\"")));

        let mut config = stamp().to_config();
        config.remove(ID);
        assert!(Stamp::read("web", &config).is_err());

        let mut config = stamp().to_config();
        config.remove(BRIDGE);
        assert!(Stamp::read("web", &config).is_err());
    }

    #[test]
    fn rfc3339_known_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_secs(1_798_761_599)),
            "2026-12-31T23:59:59Z"
        );
    }

    proptest! {
        // Law: formatting is monotone in time, so stamps sort by creation.
        #[test]
        fn rfc3339_sorts_like_time(a in 0u64..8_000_000_000, b in 0u64..8_000_000_000) {
            let (ta, tb) = (UNIX_EPOCH + Duration::from_secs(a), UNIX_EPOCH + Duration::from_secs(b));
            prop_assert_eq!(a.cmp(&b), rfc3339(ta).cmp(&rfc3339(tb)));
        }
    }
}
