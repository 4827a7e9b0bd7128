//! One template file: TOML, parsed and checked field by field. Every
//! problem is reported with the file, the line and the field, and a file
//! with any problem loads nothing.
//!
//! ```toml
//! description = "one line for listings"
//! image = "debian/12"             # an image alias the backend knows
//! user = "agent"                  # the unprivileged user the agent works as
//! size = "medium"                 # small | medium | large, or:
//! # [resources]  cpus = 2, memory = "4GiB", disk = "20GiB"
//! packages = ["git", "nodejs"]    # installed at first boot
//! install = ["npm install --global @anthropic-ai/claude-code"]  # run once, as root
//!
//! [context]
//! path = "/home/agent/AGENTS.md"  # where the agent-context file goes
//! text = "what this template adds to corral's own words"
//! ```

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use corral_sandbox_core::sandbox::Resources;
use corral_sandbox_core::{ConfigError, ConfigErrors};
use serde::Deserialize;
use toml::Spanned;

use super::{ContextFile, Template, TemplateError, TemplateSource, secrets};
use crate::sandboxes::{ByteSize, Size};

/// The largest template file read.
const MAX_FILE: u64 = 64 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    description: Spanned<String>,
    image: Spanned<String>,
    user: Spanned<String>,
    #[serde(default)]
    size: Option<Spanned<String>>,
    #[serde(default)]
    resources: Option<Spanned<RawResources>>,
    #[serde(default)]
    packages: Vec<Spanned<String>>,
    #[serde(default)]
    install: Vec<Spanned<String>>,
    #[serde(default)]
    ttl: Option<Spanned<String>>,
    #[serde(default)]
    idle_stop: Option<Spanned<String>>,
    context: RawContext,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResources {
    #[serde(default)]
    cpus: Option<u32>,
    #[serde(default)]
    memory: Option<String>,
    #[serde(default)]
    disk: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContext {
    path: Spanned<String>,
    #[serde(default)]
    text: Option<Spanned<String>>,
}

/// Collects problems for one file.
struct Problems<'a> {
    file: &'a str,
    text: &'a str,
    found: Vec<ConfigError>,
}

impl Problems<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text
            .get(..offset.min(self.text.len()))
            .map_or(1, |t| t.matches('\n').count() + 1)
    }

    fn at(&mut self, offset: Option<usize>, field: &str, problem: String) {
        self.found.push(ConfigError {
            file: self.file.to_owned(),
            line: offset.map(|o| self.line(o)),
            column: None,
            context: None,
            field: Some(field.to_owned()),
            problem,
        });
    }

    /// Refuse a value that looks like a credential.
    fn no_secret(&mut self, value: &Spanned<String>, field: &str) {
        for finding in secrets::findings(value.get_ref()) {
            self.at(
                Some(value.span().start),
                field,
                format!(
                    "{finding}: corral stores and injects no credentials, ever; remove it (the agent logs in inside the sandbox itself)"
                ),
            );
        }
    }
}

/// A user name cloud-init and `useradd` accept, and not root.
fn valid_user(u: &str) -> bool {
    let mut chars = u.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && u.len() <= 32
        && u != "root"
}

/// A Debian-style package name (`name` or `name=version`).
fn valid_package(p: &str) -> bool {
    let name = p.split_once('=').map_or(p, |(n, _)| n);
    name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
        && !p.contains(char::is_whitespace)
}

/// A template name: what a file stem may be.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.starts_with(|c: char| c.is_ascii_lowercase())
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Parse and check template `name` from `text` (`file` names it in
/// messages).
pub fn parse(name: &str, file: &str, text: &str) -> Result<Template, TemplateError> {
    let mut p = Problems {
        file,
        text,
        found: Vec::new(),
    };
    if !valid_name(name) {
        p.at(
            None,
            "name",
            format!(
                "`{}` is not a template name; name the file with lower-case letters, digits and `-` (e.g. claude.toml)",
                corral_sandbox_core::text::Shown(name)
            ),
        );
    }
    let raw: Raw = match toml::from_str(text) {
        Ok(r) => r,
        Err(e) => {
            let offset = e.span().map(|s| s.start);
            p.at(offset, "toml", e.message().to_owned());
            return Err(ConfigErrors(p.found).into());
        }
    };
    let strings: Vec<(&Spanned<String>, String)> = [
        (&raw.description, "description".to_owned()),
        (&raw.image, "image".to_owned()),
        (&raw.user, "user".to_owned()),
        (&raw.context.path, "context.path".to_owned()),
    ]
    .into_iter()
    .chain(
        raw.context
            .text
            .iter()
            .map(|t| (t, "context.text".to_owned())),
    )
    .chain(
        raw.packages
            .iter()
            .enumerate()
            .map(|(i, s)| (s, format!("packages[{i}]"))),
    )
    .chain(
        raw.install
            .iter()
            .enumerate()
            .map(|(i, s)| (s, format!("install[{i}]"))),
    )
    .collect();
    for (value, field) in &strings {
        p.no_secret(value, field);
        if value.get_ref().contains('\0') {
            p.at(
                Some(value.span().start),
                field,
                "contains a NUL byte".to_owned(),
            );
        }
    }
    let start = |s: &Spanned<String>| Some(s.span().start);
    if raw.description.get_ref().trim().is_empty() || raw.description.get_ref().contains('\n') {
        p.at(
            start(&raw.description),
            "description",
            "expected one non-empty line".to_owned(),
        );
    }
    if raw.image.get_ref().trim().is_empty() {
        p.at(
            start(&raw.image),
            "image",
            "empty; expected an image alias the backend knows (e.g. debian/12)".to_owned(),
        );
    }
    if !valid_user(raw.user.get_ref()) {
        p.at(
            start(&raw.user),
            "user",
            format!(
                "`{}` is not a user name; expected lower-case letters, digits, `_` and `-`, at most 32, starting with a letter, and not root",
                corral_sandbox_core::text::Shown(raw.user.get_ref())
            ),
        );
    }
    for (i, pkg) in raw.packages.iter().enumerate() {
        if !valid_package(pkg.get_ref()) {
            p.at(
                start(pkg),
                &format!("packages[{i}]"),
                format!(
                    "`{}` is not a package name; expected e.g. git or nodejs=18.19.0",
                    corral_sandbox_core::text::Shown(pkg.get_ref())
                ),
            );
        }
    }
    for (i, cmd) in raw.install.iter().enumerate() {
        if cmd.get_ref().trim().is_empty() {
            p.at(
                start(cmd),
                &format!("install[{i}]"),
                "empty; expected a shell command".to_owned(),
            );
        }
    }
    let path = raw.context.path.get_ref();
    if !path.starts_with('/')
        || path.ends_with('/')
        || path.split('/').any(|c| c == ".." || c == ".")
        || path.contains("//")
    {
        p.at(
            start(&raw.context.path),
            "context.path",
            format!(
                "`{}` is not an absolute file path without `.` or `..`",
                corral_sandbox_core::text::Shown(path)
            ),
        );
    }
    let size = match &raw.size {
        None => None,
        Some(s) => match s.get_ref().as_str() {
            "small" => Some(Size::Small),
            "medium" => Some(Size::Medium),
            "large" => Some(Size::Large),
            other => {
                p.at(
                    start(s),
                    "size",
                    format!(
                        "`{}` is not a size; expected small, medium or large",
                        corral_sandbox_core::text::Shown(other)
                    ),
                );
                None
            }
        },
    };
    let resources = match (&raw.size, &raw.resources) {
        (Some(s), Some(_)) => {
            p.at(
                start(s),
                "size",
                "give either `size` or a `[resources]` table, not both".to_owned(),
            );
            Resources::default()
        }
        (_, Some(r)) => {
            let at = Some(r.span().start);
            let r = r.get_ref();
            let mut bytes = |field: &str, v: &Option<String>| -> Option<ByteSize> {
                let v = v.as_deref()?;
                match v.parse::<ByteSize>() {
                    Ok(b) => Some(b),
                    Err(e) => {
                        p.at(at, field, e.to_string());
                        None
                    }
                }
            };
            let memory = bytes("resources.memory", &r.memory);
            let disk = bytes("resources.disk", &r.disk);
            if r.cpus == Some(0) {
                p.at(at, "resources.cpus", "0; give at least 1".to_owned());
            }
            Resources {
                cpus: r.cpus,
                memory_mib: memory.map(|b| b.mib),
                disk_gib: disk.map(ByteSize::gib_ceil),
            }
        }
        (_, None) => size.map(Size::resources).unwrap_or_default(),
    };
    let mut secs = |field: &str, v: &Option<Spanned<String>>| -> Option<u64> {
        let v = v.as_ref()?;
        match crate::lifetimes::parse_secs(v.get_ref()) {
            Ok(s) => Some(s),
            Err(e) => {
                p.at(start(v), field, e.to_string());
                None
            }
        }
    };
    let ttl_secs = secs("ttl", &raw.ttl);
    let idle_stop_secs = secs("idle_stop", &raw.idle_stop);
    if !p.found.is_empty() {
        return Err(ConfigErrors(p.found).into());
    }
    Ok(Template {
        name: name.to_owned(),
        description: raw.description.into_inner(),
        image: raw.image.into_inner(),
        user: raw.user.into_inner(),
        size,
        resources,
        packages: raw.packages.into_iter().map(Spanned::into_inner).collect(),
        install: raw.install.into_iter().map(Spanned::into_inner).collect(),
        context: ContextFile {
            path: raw.context.path.into_inner(),
            text: raw
                .context
                .text
                .map(Spanned::into_inner)
                .unwrap_or_default(),
        },
        ttl_secs,
        idle_stop_secs,
        source: TemplateSource::Builtin,
    })
}

/// Read and check the operator's template file at `path`: a regular file
/// (no symlink) that only its owner (root or this user) may write.
pub fn load(path: &Path) -> Result<Template, TemplateError> {
    let read = |source| TemplateError::Read {
        path: path.to_owned(),
        source,
    };
    let meta = std::fs::symlink_metadata(path).map_err(read)?;
    let shown = path.display().to_string();
    let refuse = |problem: String| {
        TemplateError::Invalid(ConfigErrors(vec![ConfigError {
            file: shown.clone(),
            line: None,
            column: None,
            context: None,
            field: None,
            problem,
        }]))
    };
    if !meta.file_type().is_file() {
        return Err(refuse(
            "not a regular file (symlinks are refused); copy the template here".to_owned(),
        ));
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.mode() & 0o022 != 0 || (meta.uid() != 0 && meta.uid() != me) {
        return Err(refuse(format!(
            "writable by others (mode {:o}, owner uid {}); a template decides what runs in new sandboxes: chown it to root and chmod go-w",
            meta.mode() & 0o7777,
            meta.uid()
        )));
    }
    if meta.len() > MAX_FILE {
        return Err(refuse(format!(
            "{} bytes, over the {MAX_FILE}-byte limit for a template",
            meta.len()
        )));
    }
    let text = std::fs::read_to_string(path).map_err(read)?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut t = parse(&name, &shown, &text)?;
    t.source = TemplateSource::File(path.to_owned());
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
description = "d"
image = "debian/12"
user = "agent"
packages = ["git", "nodejs=18.19.0"]
install = ["echo hi"]
[resources]
cpus = 2
memory = "2GiB"
[context]
path = "/home/agent/AGENTS.md"
"#;

    #[test]
    fn a_good_file_parses() {
        let t = parse("mine", "mine.toml", GOOD).unwrap();
        assert_eq!(t.resources.cpus, Some(2));
        assert_eq!(t.resources.memory_mib, Some(2048));
        assert_eq!(t.size, None);
        assert_eq!(t.context.text, "");
    }

    #[test]
    fn every_problem_is_reported_with_its_line() {
        let bad = GOOD
            .replace("\"agent\"", "\"root\"")
            .replace("\"git\"", "\"Git Hub\"")
            .replace("/home/agent/AGENTS.md", "relative/AGENTS.md")
            .replace("cpus = 2", "cpus = 0");
        let e = parse("mine", "mine.toml", &bad).unwrap_err().to_string();
        for want in [
            "mine.toml:4: user",
            "mine.toml:5: packages[0]",
            "mine.toml:11: context.path",
            "resources.cpus",
        ] {
            assert!(e.contains(want), "{want} in {e}");
        }
        let e = parse("mine", "mine.toml", &format!("{GOOD}\nsecrets = 1\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `secrets`"), "{e}");
        assert!(e.contains("mine.toml:13"), "{e}");
        let e = parse("Bad Name", "x.toml", GOOD).unwrap_err().to_string();
        assert!(e.contains("not a template name"), "{e}");
    }

    #[test]
    fn lifetimes_parse_as_durations_and_a_bad_one_names_its_line() {
        let with = |ttl: &str, idle: &str| {
            GOOD.replace(
                "user = \"agent\"",
                &format!("user = \"agent\"\nttl = \"{ttl}\"\nidle_stop = \"{idle}\""),
            )
        };
        let t = parse("m", "m.toml", &with("2h", "30m")).unwrap();
        assert_eq!((t.ttl_secs, t.idle_stop_secs), (Some(7200), Some(1800)));
        // Control: the file without them sets neither.
        let t = parse("m", "m.toml", GOOD).unwrap();
        assert_eq!((t.ttl_secs, t.idle_stop_secs), (None, None));
        let e = parse("m", "m.toml", &with("2 hours", "0s"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("m.toml:5: ttl"), "{e}");
        assert!(e.contains("m.toml:6: idle_stop"), "{e}");
        assert!(e.contains("90s, 30m, 2h, 1d"), "{e}");
    }

    #[test]
    fn size_and_resources_exclude_each_other() {
        let e = parse(
            "m",
            "m.toml",
            &GOOD.replace("user = \"agent\"", "user = \"agent\"\nsize = \"small\""),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("either `size` or"), "{e}");
    }

    #[test]
    fn files_others_may_write_are_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mine.toml");
        std::fs::write(&path, GOOD).unwrap();
        load(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains("writable by others"), "{e}");
        let link = dir.path().join("link.toml");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(load(&link).unwrap_err().to_string().contains("symlinks"));
    }
}
