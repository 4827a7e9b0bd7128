//! The one rule for where corral keeps what it applied (and its gateways'
//! files, and the verification gate): `--state-dir` when given, else the
//! configuration's `state_dir`, with a sub-directory per `--netns` target so
//! acting on a namespace never overwrites what was applied to the host.
//! The CLI and corrald both call [`state_dir`], so `corral host apply
//! --netns X` and `corrald --netns X` read and write the same files.

use std::path::{Path, PathBuf};

/// The state directory for `netns` under `config_state_dir`, unless an
/// explicit directory overrides it (an explicit directory is used as given,
/// namespace or not: the caller chose it).
pub fn state_dir(explicit: Option<&Path>, config_state_dir: &Path, netns: Option<&str>) -> PathBuf {
    if let Some(dir) = explicit {
        return dir.to_owned();
    }
    match netns {
        None => config_state_dir.to_owned(),
        Some(name) => config_state_dir.join("netns").join(netns_dir_name(name)),
    }
}

/// A namespace name or path as one safe path component: anything but
/// ASCII letters, digits, `-` and `.` becomes `_` (so `/proc/42/ns/net`
/// is `_proc_42_ns_net`, and no name can climb out with `..`/`/`).
pub fn netns_dir_name(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // `.` and `..` alone would name the parent or the directory itself.
    if safe.chars().all(|c| c == '.') {
        safe.replace('.', "_")
    } else {
        safe
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_netns_never_shares_the_hosts_state_directory() {
        let base = Path::new("/var/lib/corral");
        assert_eq!(state_dir(None, base, None), base);
        let ns = state_dir(None, base, Some("/proc/42/ns/net"));
        assert_eq!(ns, Path::new("/var/lib/corral/netns/_proc_42_ns_net"));
        assert_eq!(
            state_dir(None, base, Some("lab")),
            Path::new("/var/lib/corral/netns/lab")
        );
        let explicit = Path::new("/tmp/x");
        assert_eq!(state_dir(Some(explicit), base, Some("n")), explicit);
        assert_eq!(netns_dir_name(".."), "__");
        assert_eq!(netns_dir_name("."), "_");
    }

    proptest! {
        /// Whatever the namespace name, its directory is one component
        /// strictly below `<state>/netns`.
        #[test]
        fn namespace_directories_stay_below_the_state_directory(name in "\\PC{1,40}") {
            let base = Path::new("/s");
            let dir = state_dir(None, base, Some(&name));
            prop_assert_eq!(dir.parent(), Some(Path::new("/s/netns")));
            let last = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
            prop_assert!(last != "." && last != ".." && !last.contains('/'));
        }
    }
}
