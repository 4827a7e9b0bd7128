//! Which configuration to load — one rule for every front end (`corral`,
//! `corrald`): the legacy `networks.conf` when named, else the named
//! `corral.toml`, else the default path when it exists, else the built-in
//! profiles. Pure: the caller says whether the default file exists.

use std::path::Path;

/// Where operators keep the host's configuration.
pub const DEFAULT_CONFIG_PATH: &str = "/etc/corral/corral.toml";

/// The two file formats corral reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigFormat {
    /// `corral.toml`.
    Toml,
    /// The legacy `networks.conf` (`name bridge subnet allowed-hosts`).
    NetworksConf,
}

/// What to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigChoice<'a> {
    /// Read and parse this file.
    File {
        /// The file.
        path: &'a Path,
        /// Its format.
        format: ConfigFormat,
    },
    /// No file: [`super::Config::builtin_default`].
    Builtin,
}

/// Applies the rule in the module docs. `default_exists` is whether
/// [`DEFAULT_CONFIG_PATH`] exists on this host.
pub fn choose_config<'a>(
    networks_conf: Option<&'a Path>,
    config: Option<&'a Path>,
    default_exists: bool,
) -> ConfigChoice<'a> {
    match (networks_conf, config) {
        (Some(path), _) => ConfigChoice::File {
            path,
            format: ConfigFormat::NetworksConf,
        },
        (None, Some(path)) => ConfigChoice::File {
            path,
            format: ConfigFormat::Toml,
        },
        (None, None) if default_exists => ConfigChoice::File {
            path: Path::new(DEFAULT_CONFIG_PATH),
            format: ConfigFormat::Toml,
        },
        (None, None) => ConfigChoice::Builtin,
    }
}

impl super::Config {
    /// Parses `text` (named `file` in messages) in `format`.
    pub fn parse(
        text: &str,
        file: &str,
        format: ConfigFormat,
    ) -> Result<super::Config, super::ConfigErrors> {
        match format {
            ConfigFormat::Toml => Self::from_toml_str(text, file),
            ConfigFormat::NetworksConf => Self::from_networks_conf(text, file),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule() {
        let n = Path::new("n.conf");
        let t = Path::new("c.toml");
        assert_eq!(
            choose_config(Some(n), Some(t), true),
            ConfigChoice::File {
                path: n,
                format: ConfigFormat::NetworksConf
            }
        );
        assert_eq!(
            choose_config(None, Some(t), true),
            ConfigChoice::File {
                path: t,
                format: ConfigFormat::Toml
            }
        );
        assert_eq!(
            choose_config(None, None, true),
            ConfigChoice::File {
                path: Path::new(DEFAULT_CONFIG_PATH),
                format: ConfigFormat::Toml
            }
        );
        assert_eq!(choose_config(None, None, false), ConfigChoice::Builtin);
    }
}
