//! Templates: what a new sandbox is made from, as data files — an image,
//! an unprivileged user, resources, packages, commands run once at first
//! boot, and the agent-context file telling the agent where it runs.
//!
//! The built-in templates (`blank`, `claude`, `codex`) are the files in the
//! repository's `templates/` directory, compiled in; an operator adds or
//! overrides templates with `NAME.toml` files in the `templates/`
//! directory next to the configuration file (`/etc/corral/templates` by
//! default). Every file is parsed and checked the same way ([`file`]), and a
//! template that carries a secret, a token, a key or an agent login is
//! refused ([`secrets`]): corral stores and injects no credentials, ever.
//!
//! How a template reaches a sandbox ([`render`], [`apply`]): the template
//! becomes cloud-init user-data (rendered with a YAML library) that the
//! provider hands to the image; an image with cloud-init creates the user,
//! installs the packages, runs the install commands and writes the context
//! file at first boot. An image without cloud-init (corral's busybox test
//! image) gets the context file through the provider's file API before the
//! sandbox is handed out; the user, packages and install commands are then
//! reported as not applied.

pub mod apply;
pub mod file;
pub mod render;
pub mod secrets;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use corral_sandbox_core::ConfigErrors;
use corral_sandbox_core::config::DEFAULT_CONFIG_PATH;
use corral_sandbox_core::sandbox::Resources;
use serde::Serialize;

pub use apply::{AppliedBy, TemplateApplied};
pub use render::Rendered;

use crate::config::Origin;
use crate::sandboxes::Size;

/// The template a sandbox gets when the caller names none.
pub const DEFAULT_TEMPLATE: &str = "blank";

/// The built-in templates: the repository's `templates/*.toml`.
pub const BUILTIN: &[(&str, &str)] = &[
    ("blank", include_str!("../../../../templates/blank.toml")),
    ("claude", include_str!("../../../../templates/claude.toml")),
    ("codex", include_str!("../../../../templates/codex.toml")),
];

/// Where a template came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "path")]
pub enum TemplateSource {
    /// Compiled into corral.
    Builtin,
    /// An operator's file.
    File(PathBuf),
}

/// The agent-context file of a template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextFile {
    /// Where it goes in the guest (absolute).
    pub path: String,
    /// What the template adds after corral's own text about the sandbox.
    pub text: String,
}

/// One validated template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Template {
    /// Its name (the file's stem).
    pub name: String,
    /// One line for listings.
    pub description: String,
    /// The image (an alias the backend knows).
    pub image: String,
    /// The unprivileged user the agent works as.
    pub user: String,
    /// The size preset, when the template names one.
    pub size: Option<Size>,
    /// Resource limits (from the preset or given one by one).
    pub resources: Resources,
    /// Packages installed at first boot.
    pub packages: Vec<String>,
    /// Shell commands run once, as root, at first boot after the packages.
    pub install: Vec<String>,
    /// The agent-context file.
    pub context: ContextFile,
    /// The time to live its sandboxes get unless the caller gives one,
    /// seconds.
    pub ttl_secs: Option<u64>,
    /// The idle limit its sandboxes get unless the caller gives one,
    /// seconds.
    pub idle_stop_secs: Option<u64>,
    /// Where it came from.
    pub source: TemplateSource,
}

/// A template could not be found or loaded.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// No template has this name.
    #[error("template `{}` does not exist; templates: {}", corral_sandbox_core::text::Shown(name), known.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
        /// The templates there are.
        known: Vec<String>,
    },
    /// A template file is invalid (every problem, with file and line).
    #[error(transparent)]
    Invalid(#[from] ConfigErrors),
    /// The operator's template directory could not be read.
    #[error("cannot read the template directory {}", path.display())]
    Read {
        /// The directory or file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Every template there is: the built-ins, then the operator's files (a
/// file with a built-in's name replaces it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    templates: BTreeMap<String, Template>,
}

impl Catalog {
    /// The built-in templates alone.
    pub fn builtin() -> Result<Self, TemplateError> {
        let mut templates = BTreeMap::new();
        for (name, text) in BUILTIN {
            let t = file::parse(name, &format!("templates/{name}.toml"), text)?;
            templates.insert((*name).to_owned(), t);
        }
        Ok(Self { templates })
    }

    /// The built-ins plus every `*.toml` in `dir` (a missing directory
    /// adds nothing).
    pub fn load(dir: &Path) -> Result<Self, TemplateError> {
        let mut catalog = Self::builtin()?;
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(catalog),
            Err(source) => {
                return Err(TemplateError::Read {
                    path: dir.to_owned(),
                    source,
                });
            }
        };
        let mut paths: Vec<PathBuf> = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| TemplateError::Read {
                path: dir.to_owned(),
                source,
            })?;
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "toml") {
                paths.push(path);
            }
        }
        paths.sort();
        let mut problems = Vec::new();
        for path in paths {
            match file::load(&path) {
                Ok(t) => {
                    catalog.templates.insert(t.name.clone(), t);
                }
                Err(TemplateError::Invalid(e)) => problems.extend(e.0),
                Err(other) => return Err(other),
            }
        }
        if problems.is_empty() {
            Ok(catalog)
        } else {
            Err(ConfigErrors(problems).into())
        }
    }

    /// The catalog for a configuration from `origin` (see [`dir_for`]).
    pub fn for_origin(origin: &Origin) -> Result<Self, TemplateError> {
        Self::load(&dir_for(origin))
    }

    /// The template `name`.
    pub fn get(&self, name: &str) -> Result<&Template, TemplateError> {
        self.templates
            .get(name)
            .ok_or_else(|| TemplateError::Unknown {
                name: name.to_owned(),
                known: self.templates.keys().cloned().collect(),
            })
    }

    /// Every template, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Template> {
        self.templates.values()
    }
}

/// The operator's template directory for a configuration from `origin`:
/// `templates/` beside the configuration file, or beside the default
/// configuration path when the built-in profiles are in use.
pub fn dir_for(origin: &Origin) -> PathBuf {
    let config = match origin {
        Origin::File(p) => p.as_path(),
        Origin::Builtin => Path::new(DEFAULT_CONFIG_PATH),
    };
    config
        .parent()
        .unwrap_or_else(|| Path::new("/"))
        .join("templates")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtins_load_and_are_the_three_named() {
        let c = Catalog::builtin().unwrap();
        let names: Vec<&str> = c.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["blank", "claude", "codex"]);
        let claude = c.get("claude").unwrap();
        assert_eq!(claude.user, "agent");
        assert!(claude.install.iter().any(|i| i.contains("claude-code")));
        assert_eq!(claude.context.path, "/home/agent/.claude/CLAUDE.md");
        assert_eq!(claude.source, TemplateSource::Builtin);
        let e = c.get("nope").unwrap_err();
        assert_eq!(
            e.to_string(),
            "template `nope` does not exist; templates: blank, claude, codex"
        );
    }

    #[test]
    fn an_operator_file_adds_or_replaces_and_a_bad_one_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("blank.toml"),
            BUILTIN[0].1.replace("small", "large"),
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a template").unwrap();
        let c = Catalog::load(dir.path()).unwrap();
        assert_eq!(c.get("blank").unwrap().size, Some(Size::Large));
        assert!(matches!(
            c.get("blank").unwrap().source,
            TemplateSource::File(_)
        ));
        std::fs::write(
            dir.path().join("leaky.toml"),
            BUILTIN[0].1.replace(
                "install = []",
                "install = [\"echo ANTHROPIC_API_KEY=x >> .env\"]",
            ),
        )
        .unwrap();
        let e = Catalog::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("leaky.toml:9"), "{e}");
        assert!(e.contains("install"), "{e}");
        assert!(e.contains("credential"), "{e}");
        assert_eq!(
            Catalog::load(&dir.path().join("absent")).unwrap(),
            Catalog::builtin().unwrap()
        );
    }

    #[test]
    fn the_directory_sits_beside_the_configuration() {
        assert_eq!(
            dir_for(&Origin::File("/srv/c/corral.toml".into())),
            Path::new("/srv/c/templates")
        );
        assert_eq!(
            dir_for(&Origin::Builtin),
            Path::new("/etc/corral/templates")
        );
    }
}
