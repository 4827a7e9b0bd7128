//! Loading the configuration: which file (or the built-in profiles) is
//! sandbox-core's rule, [`choose_config`]; this module reads the file the
//! rule picked and says where the configuration came from. The CLI and
//! corrald both load through here, so they can never disagree on it.

use std::fmt;
use std::path::{Path, PathBuf};

use corral_sandbox_core::config::{
    Config, ConfigChoice, ConfigErrors, ConfigFormat, DEFAULT_CONFIG_PATH, choose_config,
};

/// Which configuration the caller asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigSource {
    /// A `corral.toml` named explicitly.
    pub config: Option<PathBuf>,
    /// A legacy `networks.conf` named explicitly (wins over `config`).
    pub networks_conf: Option<PathBuf>,
}

impl ConfigSource {
    /// True when the caller named a file (rather than relying on the default).
    pub fn is_explicit(&self) -> bool {
        self.config.is_some() || self.networks_conf.is_some()
    }
}

/// Where a loaded configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A file.
    File(PathBuf),
    /// No file: the built-in profiles.
    Builtin,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(p) => write!(f, "{}", p.display()),
            Origin::Builtin => f.write_str("built-in defaults"),
        }
    }
}

/// A validated configuration and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedConfig {
    /// The configuration.
    pub config: Config,
    /// Its origin.
    pub origin: Origin,
}

/// The configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// Whether the default file exists could not be found out.
    #[error("cannot inspect {path}")]
    Inspect {
        /// The default path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The chosen file could not be read.
    #[error("cannot read {}{}", path.display(), read_hint(source))]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but is not a valid configuration (every problem,
    /// with file and line).
    #[error(transparent)]
    Invalid(#[from] ConfigErrors),
}

fn read_hint(e: &std::io::Error) -> &'static str {
    match e.kind() {
        std::io::ErrorKind::NotFound => "; check the path",
        std::io::ErrorKind::PermissionDenied => "; run as a user who can read it",
        _ => "",
    }
}

impl LoadError {
    /// True when the fix is different input (a path or a file's content),
    /// which front-ends report as a usage error; false for a host failure.
    pub fn is_usage(&self) -> bool {
        !matches!(self, LoadError::Inspect { .. })
    }
}

/// Load what `source` names, by sandbox-core's rule.
pub fn load(source: &ConfigSource) -> Result<LoadedConfig, LoadError> {
    let default_exists = match std::fs::metadata(DEFAULT_CONFIG_PATH) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(source) => {
            return Err(LoadError::Inspect {
                path: PathBuf::from(DEFAULT_CONFIG_PATH),
                source,
            });
        }
    };
    match choose_config(
        source.networks_conf.as_deref(),
        source.config.as_deref(),
        default_exists,
    ) {
        ConfigChoice::File { path, format } => load_file(path, format),
        ConfigChoice::Builtin => {
            tracing::info!("{DEFAULT_CONFIG_PATH} does not exist; using the built-in profiles");
            Ok(LoadedConfig {
                config: Config::builtin_default(),
                origin: Origin::Builtin,
            })
        }
    }
}

/// Read and parse one file in a known format.
pub fn load_file(path: &Path, format: ConfigFormat) -> Result<LoadedConfig, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Read {
        path: path.to_owned(),
        source,
    })?;
    let config = Config::parse(&text, &path.display().to_string(), format)?;
    Ok(LoadedConfig {
        config,
        origin: Origin::File(path.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn a_named_file_wins_and_errors_name_the_file() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "solo corral-solo 10.77.0.0/24 -").unwrap();
        let loaded = load(&ConfigSource {
            config: None,
            networks_conf: Some(f.path().to_owned()),
        })
        .unwrap();
        assert_eq!(loaded.config.profiles.names(), ["solo"]);
        assert_eq!(loaded.origin, Origin::File(f.path().to_owned()));

        let e = load_file(Path::new("/nonexistent/corral.toml"), ConfigFormat::Toml).unwrap_err();
        assert!(e.is_usage());
        assert!(
            e.to_string()
                .contains("/nonexistent/corral.toml; check the path"),
            "{e}"
        );
        let mut bad = tempfile::NamedTempFile::new().unwrap();
        writeln!(bad, "a corral-a 10.80.0.0/24 - extra").unwrap();
        let e = load_file(bad.path(), ConfigFormat::NetworksConf).unwrap_err();
        assert!(matches!(e, LoadError::Invalid(_)), "{e}");
        assert!(
            e.to_string()
                .contains(&format!("{}:1", bad.path().display())),
            "{e}"
        );
    }
}
