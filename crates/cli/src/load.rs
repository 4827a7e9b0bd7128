//! Reading the configuration the user pointed at (or the built-in one).
//! Parsing and validation are the library's; this module only picks the
//! file, reads it, and classifies failures (a bad or missing file the user
//! named is a usage error, exit 2).

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use corral_sandbox_core::config::{
    self as core_config, Config, ConfigChoice, DEFAULT_CONFIG_PATH, choose_config,
};

use crate::args::{ConfigFormat, ConfigSource};
use crate::error::CliError;

/// Where a loaded configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file.
    File(PathBuf),
    /// No file: the built-in profiles.
    Builtin,
}

impl Origin {
    /// For messages and JSON: the path, or `built-in defaults`.
    pub fn describe(&self) -> String {
        match self {
            Origin::File(p) => p.display().to_string(),
            Origin::Builtin => "built-in defaults".to_owned(),
        }
    }
}

/// A validated configuration and where it came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The configuration.
    pub config: Config,
    /// Its origin.
    pub origin: Origin,
}

/// Load what `source` names; which file (or the built-in profiles) is the
/// library's rule, `choose_config`.
pub fn load(source: &ConfigSource) -> Result<Loaded, CliError> {
    let default_exists = match std::fs::metadata(DEFAULT_CONFIG_PATH) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            return Err(CliError::failure(
                anyhow::Error::new(e).context(format!("cannot inspect {DEFAULT_CONFIG_PATH}")),
            ));
        }
    };
    match choose_config(
        source.networks_conf.as_deref(),
        source.config.as_deref(),
        default_exists,
    ) {
        ConfigChoice::File { path, format } => load_file(path, format.into()),
        ConfigChoice::Builtin => {
            tracing::info!("{DEFAULT_CONFIG_PATH} does not exist; using the built-in profiles");
            Ok(Loaded {
                config: Config::builtin_default(),
                origin: Origin::Builtin,
            })
        }
    }
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
    let text = read(path)?;
    let name = path.display().to_string();
    let parsed = Config::parse(&text, &name, format.into());
    let config = parsed.map_err(CliError::usage)?;
    Ok(Loaded {
        config,
        origin: Origin::File(path.to_owned()),
    })
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
