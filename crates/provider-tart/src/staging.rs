//! The staging directory: per-sandbox state (Softnet policy, the pid and
//! log of `tart run`) and the ownership stamp.
//!
//! Tart keeps no metadata corral could tag, so ownership lives here: a VM
//! is corral's when its name carries corral's prefix AND
//! `<root>/<vm>/corral-stamp.json` exists and names that VM. The directory
//! handling (0700 directories, 0600 files, no symlinks) is shared with the
//! other CLI-driven providers in `corral-provider-support`; what a Tart
//! stamp records is `corral-provider-support`'s `VmStamp` (without a
//! location); the files kept beside it are defined here.

pub use corral_provider_support::staging::{STAMP_FILE, StagingError};
pub use corral_provider_support::stamp::{STAMP_VERSION, VmStamp as Stamp};

/// File name of the Softnet policy the VM runs under (JSON).
pub const POLICY_FILE: &str = "softnet.json";
/// File name holding the pid of the VM's `tart run`.
pub const PID_FILE: &str = "run.pid";
/// File name of the `tart run` log.
pub const LOG_FILE: &str = "run.log";

/// The staging root, holding Tart stamps.
pub type Staging = corral_provider_support::staging::Staging<Stamp>;

#[cfg(test)]
mod tests {
    use corral_provider_support::testing::stamp_json;

    use super::*;

    #[test]
    fn the_on_disk_format_is_stable() {
        let stamp = Stamp {
            version: STAMP_VERSION,
            vm: "corral-a".to_owned(),
            sandbox: "a".to_owned(),
            location: None,
            profile: None,
            image: "ghcr.io/cirruslabs/ubuntu:latest".to_owned(),
        };
        let expected = serde_json::json!({
            "version": 1,
            "vm": "corral-a",
            "sandbox": "a",
            "profile": null,
            "image": "ghcr.io/cirruslabs/ubuntu:latest",
        });
        assert_eq!(stamp_json(&stamp), expected);
    }
}
