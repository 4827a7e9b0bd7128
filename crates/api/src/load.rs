//! Reading the configuration at start-up: `--networks-conf`, else
//! `--config`, else `/etc/corral/corral.toml` when it exists, else the
//! built-in profiles (the same rule as the CLI's).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use corral_sandbox_core::config::Config;

/// The default configuration file.
pub const DEFAULT_CONFIG: &str = "/etc/corral/corral.toml";

/// Load the configuration; returns it with a description of its origin.
pub fn load(
    config: Option<&Path>,
    networks_conf: Option<&Path>,
) -> anyhow::Result<(Config, String)> {
    if let Some(path) = networks_conf {
        let text = read(path)?;
        let cfg = Config::from_networks_conf(&text, &path.display().to_string())?;
        return Ok((cfg, path.display().to_string()));
    }
    let path: PathBuf = match config {
        Some(p) => p.to_owned(),
        None if Path::new(DEFAULT_CONFIG).exists() => PathBuf::from(DEFAULT_CONFIG),
        None => return Ok((Config::builtin_default(), "built-in defaults".to_owned())),
    };
    let text = read(&path)?;
    let cfg = Config::from_toml_str(&text, &path.display().to_string())?;
    Ok((cfg, path.display().to_string()))
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
