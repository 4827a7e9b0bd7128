//! Copies of sandboxes: clones (`corral new --from`), backup files
//! (`export`) and sandboxes made from them (`import`).
//!
//! A clone is a fresh sandbox as far as corral is concerned: the source
//! (corral's, checked) is copied by the provider with a fresh identity —
//! a new stamp, no MAC address or host-side interface name of the
//! source's, an emptied machine-id — and then passes the same start gate,
//! readiness wait and canary as a created one. It keeps the source's
//! profile (its NIC goes on that profile's bridge) but never its port
//! binding: a clone or an import on a local corral bridge gets a port of
//! its own (MAC, address, port name, reservation and rules, as a create's)
//! before it ever runs.
//!
//! An export holds the sandbox's whole disk, so whatever the agent left
//! inside (tokens it was given, keys it made) is in the file; the front-ends
//! say so loudly. An import checks the file against the provider's
//! allowlist before anything is uploaded, re-stamps the copy with a fresh
//! identity, puts its NIC on its profile's bridge as this host configures
//! it (refusing a profile this host does not have), and leaves it stopped:
//! its first start passes the start gate and the canary.

use std::path::{Path, PathBuf};

use corral_sandbox_core::sandbox::{ProviderError, SandboxInfo};
use serde::Serialize;

use super::{CreateOptions, HandedOut, SandboxService, sandbox_name};
use crate::error::ServiceError;
use crate::hooks::Event;

/// A written backup file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Exported {
    /// The sandbox.
    pub sandbox: String,
    /// The file.
    pub file: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
}

/// What every export says: the file may hold credentials.
pub const EXPORT_WARNING: &str = "the backup holds the sandbox's whole disk: any credential the agent left inside (a token it was given, a key it made, a login it stored) is in the file; keep it as you would keep that credential";

/// `SRC` or `SRC/SNAP`, split.
pub fn split_from(from: &str) -> Result<(&str, Option<&str>), ProviderError> {
    match from.split_once('/') {
        None => Ok((from, None)),
        Some((src, snap)) if !src.is_empty() && !snap.is_empty() && !snap.contains('/') => {
            Ok((src, Some(snap)))
        }
        Some(_) => Err(ProviderError::InvalidSpec {
            field: "from",
            reason: format!(
                "{}; expected a sandbox name, or NAME/SNAPSHOT",
                corral_sandbox_core::text::Shown(from)
            ),
        }),
    }
}

/// The sandbox name a backup file gives when none is asked for: its file
/// name without `.tar.gz`, `.tgz` or `.tar`.
pub fn name_from_file(file: &Path) -> Result<String, ProviderError> {
    let base = file
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem = [".tar.gz", ".tgz", ".tar"]
        .iter()
        .find_map(|ext| base.strip_suffix(ext))
        .unwrap_or(&base);
    sandbox_name(stem)
        .map(|n| n.to_string())
        .map_err(|_| ProviderError::InvalidSpec {
            field: "name",
            reason: format!(
                "none given, and the file name {} is not a sandbox name; give the name to import it as",
                corral_sandbox_core::text::Shown(&base)
            ),
        })
}

impl SandboxService {
    /// The private directory (`transfers/` in the state directory, 0700,
    /// checked like the state directory) that backups pass through on their
    /// way to or from a front-end that cannot hand the provider a path of
    /// the caller's: corrald's downloads and uploads.
    pub fn transfer_dir(&self) -> Result<PathBuf, ServiceError> {
        let dir = corral_state_files::StateDir::open(&self.settings.state_dir)
            .and_then(|d| d.subdir("transfers"))
            .map_err(|e| ProviderError::Io {
                context: format!(
                    "cannot use {}/transfers for a backup on its way through",
                    self.settings.state_dir.display()
                ),
                source: std::io::Error::other(crate::error::chain(&e)),
            })?;
        Ok(dir.path().to_owned())
    }

    /// Clone `from` (`SRC` or `SRC/SNAP`) to a new sandbox `name` (see the
    /// module docs); with `options.start`, start it and hand it out like
    /// a created one.
    pub async fn clone_sandbox(
        &self,
        name: &str,
        from: &str,
        options: CreateOptions,
    ) -> Result<HandedOut, ServiceError> {
        let asked = std::time::Instant::now();
        let target = sandbox_name(name)?;
        let (source, snapshot) = split_from(from)?;
        self.refuse_taken(name).await?;
        let source = self.open(source).await?;
        let info = source.info().await?;
        let profile = info.profile.clone();
        let mut gate = self.gate_or_record(name, profile.as_ref(), None).await?;
        let sandbox = source.clone_to(&target, snapshot).await?;
        // Incus picks the copy's member: it runs only where profiled work
        // may go.
        if options.start
            && let Err(e) = match sandbox.info().await {
                Ok(copy) => self.refuse_unattested_member(name, &copy).await,
                Err(e) => Err(e.into()),
            }
        {
            self.discard(sandbox, None).await;
            return Err(e);
        }
        // The copy never carries its source's binding: it gets a port of
        // its own before it ever runs.
        let binding = match (&profile, self.backend.binds_ports()) {
            (Some(p), true) => match self.bind_copy(sandbox.as_ref(), p).await {
                Ok(b) => Some(b),
                Err(e) => {
                    self.discard(sandbox, None).await;
                    return Err(e);
                }
            },
            _ => None,
        };
        if let Some(g) = gate.as_mut() {
            g.binding.clone_from(&binding);
        }
        let created = Event::Created {
            name: name.to_owned(),
            kind: Some(sandbox.kind()),
            profile: profile.as_ref().map(ToString::to_string),
            owner: options.owner,
            template: None,
            from: Some(from.to_owned()),
            ttl_secs: None,
            idle_stop_secs: None,
        };
        self.hand_out(
            sandbox,
            super::create::Fresh {
                created: &created,
                started: None,
                create_ms: Some(u64::try_from(asked.elapsed().as_millis()).unwrap_or(u64::MAX)),
            },
            profile.as_ref(),
            gate,
            None,
            Some(from.to_owned()),
            options,
        )
        .await
    }

    /// Write sandbox `name` (with its snapshots) to the backup file `dest`,
    /// which must not exist (see [`EXPORT_WARNING`]).
    pub async fn export(&self, name: &str, dest: &Path) -> Result<Exported, ServiceError> {
        let sandbox = self.open(name).await?;
        sandbox.export(dest).await?;
        let bytes =
            std::fs::metadata(dest)
                .map(|m| m.len())
                .map_err(|source| ProviderError::Io {
                    context: format!("cannot read the backup {} just written", dest.display()),
                    source,
                })?;
        self.hooks
            .record(&Event::Exported {
                name: name.to_owned(),
                file: dest.display().to_string(),
                bytes,
            })
            .await;
        Ok(Exported {
            sandbox: name.to_owned(),
            file: dest.to_owned(),
            bytes,
        })
    }

    /// Make sandbox `name` (default: from the file's name) from the backup
    /// file `source`; it is left stopped, recorded as `owner`'s.
    pub async fn import(
        &self,
        source: &Path,
        name: Option<&str>,
        owner: Option<u32>,
    ) -> Result<SandboxInfo, ServiceError> {
        let name = match name {
            Some(n) => sandbox_name(n)?,
            None => sandbox_name(&name_from_file(source)?)?,
        };
        self.refuse_taken(name.as_str()).await?;
        let provider = self.backend.provider().await?;
        let sandbox = provider.import(source, &name).await?;
        let imported = sandbox.info().await?;
        // The backup's binding was its sandbox's port: the import gets a
        // port of its own before its first start.
        if let (Some(p), true) = (&imported.profile, self.backend.binds_ports())
            && let Err(e) = self.bind_copy(sandbox.as_ref(), p).await
        {
            self.discard(sandbox, None).await;
            return Err(e);
        }
        let info = sandbox.info().await?;
        self.hooks
            .record(&Event::Created {
                name: name.to_string(),
                kind: Some(sandbox.kind()),
                profile: info.profile.as_ref().map(ToString::to_string),
                owner,
                template: None,
                from: Some(format!("file {}", source.display())),
                ttl_secs: None,
                idle_stop_secs: None,
            })
            .await;
        Ok(info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_is_a_sandbox_or_a_snapshot_of_one() {
        assert_eq!(split_from("a").unwrap(), ("a", None));
        assert_eq!(split_from("a/s1").unwrap(), ("a", Some("s1")));
        for bad in ["a/", "/s", "a/b/c"] {
            assert!(split_from(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_import_is_named_after_its_file() {
        assert_eq!(
            name_from_file(Path::new("/tmp/demo.tar.gz")).unwrap(),
            "demo"
        );
        assert_eq!(name_from_file(Path::new("b1.tgz")).unwrap(), "b1");
        let e = name_from_file(Path::new("/tmp/Not A Name.tar.gz")).unwrap_err();
        assert!(e.to_string().contains("give the name"), "{e}");
    }
}
