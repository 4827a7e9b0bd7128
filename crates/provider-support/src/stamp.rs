//! The ownership stamp the CLI-driven providers write: which VM, for which
//! sandbox, from which image, on which profile and, where commands may run
//! elsewhere (multipass-remote), where.

use serde::{Deserialize, Serialize};

use crate::staging::OwnershipStamp;

/// Stamp format version.
pub const STAMP_VERSION: u32 = 1;

/// What corral records about a VM it created.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmStamp {
    /// Format version.
    pub version: u32,
    /// The backend's name of the VM.
    pub vm: String,
    /// The corral sandbox name.
    pub sandbox: String,
    /// Where the VM lives (`local` or `ssh:<target>`), for a provider
    /// whose commands may run on another host; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The profile it was attached to.
    pub profile: Option<String>,
    /// The image it was made from.
    pub image: String,
}

impl OwnershipStamp for VmStamp {
    fn vm(&self) -> &str {
        &self.vm
    }
}

impl VmStamp {
    /// Why this stamp does not make `vm` corral's for a provider running
    /// at `location` (`None`: a provider that records none), if it does
    /// not.
    pub fn mismatch(&self, vm: &str, location: Option<&str>) -> Option<String> {
        if self.version != STAMP_VERSION {
            Some(format!(
                "stamp version {} is not {STAMP_VERSION}",
                self.version
            ))
        } else if self.vm != vm {
            Some(format!("the stamp names `{}`", self.vm))
        } else if self.location.as_deref() != location {
            Some(format!(
                "the stamp was written for {}, this provider runs on {}",
                self.location.as_deref().unwrap_or("no recorded location"),
                location.unwrap_or("no recorded location")
            ))
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stamp(location: Option<&str>) -> VmStamp {
        VmStamp {
            version: STAMP_VERSION,
            vm: "corral-a".to_owned(),
            sandbox: "a".to_owned(),
            location: location.map(str::to_owned),
            profile: None,
            image: "img".to_owned(),
        }
    }

    /// A stamp vouches only for its VM, version and location; one
    /// executor's stamp never vouches for a VM of the same name elsewhere.
    #[test]
    fn a_stamp_matches_its_vm_version_and_location_only() {
        assert_eq!(stamp(None).mismatch("corral-a", None), None);
        let remote = stamp(Some("ssh:ops@exec-1"));
        assert_eq!(remote.mismatch("corral-a", Some("ssh:ops@exec-1")), None);
        assert!(remote.mismatch("corral-a", Some("local")).is_some());
        assert!(remote.mismatch("corral-a", None).is_some());
        assert!(stamp(None).mismatch("corral-b", None).is_some());
        let old = VmStamp {
            version: 0,
            ..stamp(None)
        };
        assert!(old.mismatch("corral-a", None).is_some());
    }
}
