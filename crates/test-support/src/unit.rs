//! The shipped systemd units, as tests read them: where they are, and the
//! capabilities one leaves its program — so a test can run the program with
//! exactly those (`setpriv`) and see that they are enough. systemd is not
//! PID 1 on our machines; the bounding set is the part of a unit a test can
//! reproduce.

use std::path::PathBuf;

/// `dist/systemd/<name>` in this repository.
pub fn unit_path(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../dist/systemd")).join(name)
}

/// The unit's `CapabilityBoundingSet=`, lowercase without `cap_` (as
/// `setpriv` takes them); panics when the unit sets none.
pub fn unit_capabilities(name: &str) -> Vec<String> {
    let path = unit_path(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .unwrap_or_else(|| panic!("{} sets no CapabilityBoundingSet", path.display()));
    line.split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_ascii_lowercase())
        .collect()
}

/// A `setpriv` command line (program and arguments, ending in `--`) that
/// runs what follows with only the unit's bounding set, no inheritable
/// capabilities and no new privileges, as systemd would.
pub fn as_unit(name: &str) -> Vec<String> {
    let caps: Vec<String> = unit_capabilities(name)
        .iter()
        .map(|c| format!("+{c}"))
        .collect();
    vec![
        "setpriv".into(),
        "--no-new-privs".into(),
        "--inh-caps=-all".into(),
        format!("--bounding-set=-all,{}", caps.join(",")),
        "--".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corralds_unit_parses() {
        let caps = unit_capabilities("corrald.service");
        assert!(caps.contains(&"net_admin".to_owned()), "{caps:?}");
        let argv = as_unit("corrald.service");
        assert_eq!(argv[0], "setpriv");
        assert!(
            argv[3].starts_with("--bounding-set=-all,+net_admin"),
            "{argv:?}"
        );
    }
}
