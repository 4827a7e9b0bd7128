//! Reading the configuration at start-up, by the library's rule
//! (`choose_config`), the same as the CLI's.

use std::path::Path;

use anyhow::{Context as _, anyhow};
use corral_sandbox_core::config::{Config, ConfigChoice, DEFAULT_CONFIG_PATH, choose_config};

/// Load the configuration (which file, or the built-in profiles, is the
/// library's rule, `choose_config` — the same as the CLI's); returns it with
/// a description of its origin.
pub fn load(
    config: Option<&Path>,
    networks_conf: Option<&Path>,
) -> anyhow::Result<(Config, String)> {
    let default_exists = Path::new(DEFAULT_CONFIG_PATH).exists();
    match choose_config(networks_conf, config, default_exists) {
        ConfigChoice::File { path, format } => {
            let name = path.display().to_string();
            let cfg = Config::parse(&read(path)?, &name, format)?;
            Ok((cfg, name))
        }
        ConfigChoice::Builtin => Ok((Config::builtin_default(), "built-in defaults".to_owned())),
    }
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| anyhow!(e))
        .with_context(|| format!("cannot read {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_conf_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("n.conf");
        std::fs::write(&ok, "a corral-a 10.80.0.0/24 -\n").unwrap();
        let (cfg, origin) = load(None, Some(&ok)).unwrap();
        assert_eq!(cfg.profiles.names(), ["a"]);
        assert!(origin.ends_with("n.conf"));
        let bad = dir.path().join("bad.conf");
        std::fs::write(&bad, "a corral-a 10.80.0.0/24 - extra\n").unwrap();
        let err = load(None, Some(&bad)).unwrap_err().to_string();
        assert!(err.contains("bad.conf:1"), "{err}");
        assert!(load(Some(Path::new("/nonexistent.toml")), None).is_err());
    }
}
