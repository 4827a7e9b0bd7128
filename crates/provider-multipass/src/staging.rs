//! The staging directory: per-sandbox files (cloud-init user-data) and the
//! ownership stamp.
//!
//! Multipass keeps no metadata corral could tag, so ownership lives here:
//! a VM is corral's when its name carries corral's prefix AND
//! `<root>/<vm>/corral-stamp.json` exists, names that VM and the same
//! location (local, or the SSH target). The directory handling (0700
//! directories, 0600 files, no symlinks) is shared with the other
//! CLI-driven providers in `corral-provider-support`; what a Multipass
//! stamp records is `corral-provider-support`'s `VmStamp`, with its location.

pub use corral_provider_support::staging::{STAMP_FILE, StagingError};
pub use corral_provider_support::stamp::{STAMP_VERSION, VmStamp as Stamp};

/// File name of the cloud-init user-data.
pub const CLOUD_INIT_FILE: &str = "cloud-init.yaml";

/// The staging root, holding Multipass stamps.
pub type Staging = corral_provider_support::staging::Staging<Stamp>;

#[cfg(test)]
mod tests {
    use corral_provider_support::testing::stamp_json;

    use super::*;

    /// The location is part of the stamp: one executor's stamp never
    /// vouches for a VM of the same name elsewhere.
    #[test]
    fn the_on_disk_format_is_stable_and_records_the_location() {
        let stamp = Stamp {
            version: STAMP_VERSION,
            vm: "corral-a".to_owned(),
            sandbox: "a".to_owned(),
            location: Some("ssh:ops@exec-1".to_owned()),
            profile: Some("dev".to_owned()),
            image: "24.04".to_owned(),
        };
        assert_eq!(
            stamp_json(&stamp),
            serde_json::json!({
                "version": 1,
                "vm": "corral-a",
                "sandbox": "a",
                "location": "ssh:ops@exec-1",
                "profile": "dev",
                "image": "24.04",
            })
        );
    }
}
