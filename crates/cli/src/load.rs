//! Reading the configuration the user pointed at (or the built-in one).
//! Parsing and validation are the library's; this module only picks the
//! file, reads it, and classifies failures (a bad or missing file the user
//! named is a usage error, exit 2).

use std::path::Path;

use anyhow::anyhow;
use corral_sandbox_core::config::{self as core_config, Config};
use corral_service::config::{self as service_config, LoadError};

use crate::args::{ConfigFormat, ConfigSource};
use crate::error::CliError;

/// Where a loaded configuration came from.
pub use corral_service::Origin;

/// A validated configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Its origin.
    pub origin: Origin,
}

impl From<corral_service::LoadedConfig> for Loaded {
    fn from(l: corral_service::LoadedConfig) -> Self {
        Self {
            config: l.config,
            origin: l.origin,
        }
    }
}

impl ConfigSource {
    /// The service's view of this source.
    pub fn to_service(&self) -> service_config::ConfigSource {
        service_config::ConfigSource {
            config: self.config.clone(),
            networks_conf: self.networks_conf.clone(),
        }
    }
}

/// A load failure, classified: a bad or missing file the user named is a
/// usage error (exit 2).
pub fn load_error(e: LoadError) -> CliError {
    if e.is_usage() {
        CliError::usage(e)
    } else {
        CliError::failure(e)
    }
}

/// Load what `source` names; which file (or the built-in profiles) is the
/// library's rule, applied by the service.
pub fn load(source: &ConfigSource) -> Result<Loaded, CliError> {
    service_config::load(&source.to_service())
        .map(Loaded::from)
        .map_err(load_error)
}

impl From<core_config::ConfigFormat> for ConfigFormat {
    fn from(format: core_config::ConfigFormat) -> Self {
        match format {
            core_config::ConfigFormat::Toml => ConfigFormat::Toml,
            core_config::ConfigFormat::NetworksConf => ConfigFormat::NetworksConf,
        }
    }
}

impl From<ConfigFormat> for core_config::ConfigFormat {
    fn from(format: ConfigFormat) -> Self {
        match format {
            ConfigFormat::Toml => core_config::ConfigFormat::Toml,
            ConfigFormat::NetworksConf => core_config::ConfigFormat::NetworksConf,
        }
    }
}

/// Read and parse one file in a known format.
pub fn load_file(path: &Path, format: ConfigFormat) -> Result<Loaded, CliError> {
    service_config::load_file(path, format.into())
        .map(Loaded::from)
        .map_err(load_error)
}

/// Read a file the user named; "not found" and "not readable" are usage
/// errors because the fix is a different argument.
pub fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::NotFound => "; check the path",
            std::io::ErrorKind::PermissionDenied => "; run as a user who can read it",
            _ => "",
        };
        CliError::usage(anyhow!(e).context(format!("cannot read {}{hint}", path.display())))
    })
}

/// The format of `path` when the user did not say: a `.conf` name is the
/// legacy networks.conf, anything else TOML.
pub fn guess_format(path: &Path) -> ConfigFormat {
    match path.extension().and_then(|e| e.to_str()) {
        Some("conf") => ConfigFormat::NetworksConf,
        _ => ConfigFormat::Toml,
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;
    use crate::error::Kind;

    #[test]
    fn missing_named_file_is_usage_error() {
        let err = load_file(Path::new("/nonexistent/corral.toml"), ConfigFormat::Toml).unwrap_err();
        assert_eq!(err.kind, Kind::Usage);
        assert!(
            err.render().contains("/nonexistent/corral.toml"),
            "{}",
            err.render()
        );
    }

    #[test]
    fn invalid_file_is_usage_error_naming_file_and_line() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "[[profile]]\nname = \"a\"\nbridge = \"way-too-long-bridge-name\"\nsubnet = \"10.9.0.0/24\"\nmode = \"none\"").unwrap();
        let err = load_file(f.path(), ConfigFormat::Toml).unwrap_err();
        assert_eq!(err.kind, Kind::Usage);
        let text = err.render();
        assert!(
            text.contains(&format!("{}:3", f.path().display())),
            "{text}"
        );
        assert!(text.contains("bridge"), "{text}");
    }

    #[test]
    fn formats_guessed_by_extension() {
        assert_eq!(
            guess_format(Path::new("/etc/x/networks.conf")),
            ConfigFormat::NetworksConf
        );
        assert_eq!(guess_format(Path::new("corral.toml")), ConfigFormat::Toml);
        assert_eq!(guess_format(Path::new("corral")), ConfigFormat::Toml);
    }

    #[test]
    fn explicit_source_wins_over_default() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "solo corral-solo 10.77.0.0/24 -").unwrap();
        let loaded = load(&ConfigSource {
            config: None,
            networks_conf: Some(f.path().to_owned()),
        })
        .unwrap();
        assert_eq!(loaded.config.profiles.names(), ["solo"]);
        assert_eq!(loaded.origin, Origin::File(f.path().to_owned()));
    }
}
