//! Sysctls, written through `/proc/sys` only (never the `sysctl` binary).
//!
//! `/proc/sys/net` shows the values of the network namespace of the thread
//! that opens the file, so run these inside [`crate::netns::Netns::run`] to
//! act on another namespace.
//!
//! `net.bridge.bridge-nf-call-iptables` / `-ip6tables` exist only while the
//! `br_netfilter` module is loaded. When the file is absent the kernel does
//! not pass bridged frames to the inet hooks at all, which is the value `0`
//! in effect: [`apply`] records that as [`SysctlOutcome::Absent`] instead of
//! failing, because corral's bridge-family table and port isolation do not
//! depend on it. Every other key must exist.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::plan::SysctlPlan;

/// Keys whose absence means "effectively 0" rather than an error.
const OPTIONAL_PREFIX: &str = "net.bridge.";

/// A sysctl could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SysctlError {
    /// Writing needs privileges the process lacks.
    #[error("cannot write {key}: permission denied; CAP_NET_ADMIN is missing, run as root")]
    Privilege {
        /// Dotted key.
        key: String,
    },
    /// The key does not exist on this kernel.
    #[error(
        "{key} does not exist ({path}); the kernel lacks the feature or the module is not loaded"
    )]
    Missing {
        /// Dotted key.
        key: String,
        /// File under /proc/sys.
        path: PathBuf,
    },
    /// Any other I/O failure.
    #[error("cannot access {key} ({path}): {source}")]
    Io {
        /// Dotted key.
        key: String,
        /// File under /proc/sys.
        path: PathBuf,
        /// Cause.
        #[source]
        source: io::Error,
    },
    /// A key that would escape /proc/sys.
    #[error("`{0}` is not a sysctl key; use dotted names like net.ipv4.ip_forward")]
    BadKey(String),
}

/// What happened to one planned sysctl.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum SysctlOutcome {
    /// Already had the planned value.
    Unchanged,
    /// Was changed from `previous`.
    Written {
        /// Value before the write.
        previous: String,
    },
    /// The key does not exist (optional keys only): effectively `0`.
    Absent,
}

/// One applied sysctl, for reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysctlReport {
    /// Dotted key.
    pub key: String,
    /// Planned value.
    pub value: String,
    /// What happened.
    #[serde(flatten)]
    pub outcome: SysctlOutcome,
}

/// Reads and writes sysctls under a root directory (`/proc/sys` normally; a
/// temp dir in unit tests).
#[derive(Debug, Clone)]
pub struct Sysctls {
    root: PathBuf,
}

impl Default for Sysctls {
    fn default() -> Self {
        Self {
            root: PathBuf::from("/proc/sys"),
        }
    }
}

impl Sysctls {
    /// Sysctls under another root (tests).
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The file for a dotted key. As in sysctl(8), a `/` inside a
    /// component stands for a `.` of that component (an interface named
    /// `br.x` is `net.ipv4.conf.br/x.rp_filter`).
    pub fn path(&self, key: &str) -> Result<PathBuf, SysctlError> {
        let parts: Vec<String> = key.split('.').map(|p| p.replace('/', ".")).collect();
        if key.is_empty()
            || parts
                .iter()
                .any(|part| part.is_empty() || part == "." || part == "..")
        {
            return Err(SysctlError::BadKey(key.to_owned()));
        }
        Ok(parts.iter().fold(self.root.clone(), |p, part| p.join(part)))
    }

    /// Reads a key (trimmed); `None` when it does not exist.
    pub fn read(&self, key: &str) -> Result<Option<String>, SysctlError> {
        let path = self.path(key)?;
        match std::fs::read_to_string(&path) {
            Ok(v) => Ok(Some(v.trim().to_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(key, &path, e)),
        }
    }

    /// Writes one planned sysctl unless it already has the value.
    pub fn apply_one(&self, plan: &SysctlPlan) -> Result<SysctlReport, SysctlError> {
        let path = self.path(&plan.key)?;
        let report = |outcome| SysctlReport {
            key: plan.key.clone(),
            value: plan.value.clone(),
            outcome,
        };
        let previous = match self.read(&plan.key)? {
            Some(v) => v,
            None if plan.key.starts_with(OPTIONAL_PREFIX) => {
                return Ok(report(SysctlOutcome::Absent));
            }
            None => {
                return Err(SysctlError::Missing {
                    key: plan.key.clone(),
                    path,
                });
            }
        };
        if previous == plan.value {
            return Ok(report(SysctlOutcome::Unchanged));
        }
        write_existing(&path, &plan.value).map_err(|e| io_error(&plan.key, &path, e))?;
        Ok(report(SysctlOutcome::Written { previous }))
    }

    /// Applies sysctls in order, stopping at the first failure.
    pub fn apply(&self, plans: &[SysctlPlan]) -> Result<Vec<SysctlReport>, SysctlError> {
        plans.iter().map(|p| self.apply_one(p)).collect()
    }

    /// Planned sysctls whose live value differs: `(key, planned, live)`,
    /// `live` being `None` for an absent key. An absent optional
    /// (`net.bridge.*`) key is not drift: [`Sysctls::apply_one`] reports it
    /// as [`SysctlOutcome::Absent`] and nothing can make it match short of
    /// loading a module.
    pub fn diff(&self, plans: &[SysctlPlan]) -> Result<Vec<SysctlDrift>, SysctlError> {
        let mut out = Vec::new();
        for p in plans {
            let live = self.read(&p.key)?;
            let absent_optional = live.is_none() && p.key.starts_with(OPTIONAL_PREFIX);
            if !absent_optional && live.as_deref() != Some(p.value.as_str()) {
                out.push(SysctlDrift {
                    key: p.key.clone(),
                    planned: p.value.clone(),
                    live,
                });
            }
        }
        Ok(out)
    }
}

/// A sysctl whose live value is not the planned one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SysctlDrift {
    /// Dotted key.
    pub key: String,
    /// Planned value.
    pub planned: String,
    /// Live value; `None` when the key does not exist.
    pub live: Option<String>,
}

/// Writes without creating: a sysctl file that vanished must not become a
/// regular file (matters for the temp-dir root only; /proc refuses anyway).
fn write_existing(path: &Path, value: &str) -> io::Result<()> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    f.write_all(value.as_bytes())
}

fn io_error(key: &str, path: &Path, e: io::Error) -> SysctlError {
    match e.kind() {
        io::ErrorKind::PermissionDenied => SysctlError::Privilege {
            key: key.to_owned(),
        },
        io::ErrorKind::NotFound => SysctlError::Missing {
            key: key.to_owned(),
            path: path.to_owned(),
        },
        _ => SysctlError::Io {
            key: key.to_owned(),
            path: path.to_owned(),
            source: e,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(key: &str, value: &str) -> SysctlPlan {
        SysctlPlan {
            key: key.into(),
            value: value.into(),
            reason: "test".into(),
        }
    }

    fn root_with(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (key, value) in files {
            let p = Sysctls::with_root(dir.path()).path(key).unwrap();
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{value}\n")).unwrap();
        }
        dir
    }

    #[test]
    fn writes_changes_and_skips_equal_values() {
        let dir = root_with(&[
            ("net.ipv4.ip_forward", "0"),
            ("net.ipv6.conf.all.forwarding", "1"),
        ]);
        let s = Sysctls::with_root(dir.path());
        let r = s
            .apply(&[
                plan("net.ipv4.ip_forward", "1"),
                plan("net.ipv6.conf.all.forwarding", "1"),
            ])
            .unwrap();
        assert_eq!(
            r[0].outcome,
            SysctlOutcome::Written {
                previous: "0".into()
            }
        );
        assert_eq!(r[1].outcome, SysctlOutcome::Unchanged);
        assert_eq!(s.read("net.ipv4.ip_forward").unwrap().as_deref(), Some("1"));
        assert!(
            s.diff(&[plan("net.ipv4.ip_forward", "1")])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn absent_bridge_keys_are_recorded_not_fatal() {
        let dir = root_with(&[]);
        let s = Sysctls::with_root(dir.path());
        let r = s
            .apply_one(&plan("net.bridge.bridge-nf-call-iptables", "1"))
            .unwrap();
        assert_eq!(r.outcome, SysctlOutcome::Absent);
        // Nothing was created in its place.
        assert_eq!(s.read("net.bridge.bridge-nf-call-iptables").unwrap(), None);
    }

    #[test]
    fn absent_required_keys_fail() {
        let dir = root_with(&[]);
        let s = Sysctls::with_root(dir.path());
        let err = s.apply_one(&plan("net.ipv4.ip_forward", "1")).unwrap_err();
        assert!(matches!(err, SysctlError::Missing { .. }), "{err}");
        assert_eq!(
            s.diff(&[plan("net.ipv4.ip_forward", "1")]).unwrap().len(),
            1
        );
    }

    #[test]
    fn keys_cannot_escape_the_root() {
        let s = Sysctls::default();
        for bad in ["", "net..x", "..", "net.ipv4..", "net./", "net.//.x"] {
            assert!(s.path(bad).is_err(), "{bad}");
        }
        assert_eq!(
            s.path("net.ipv4.conf.br/x.rp_filter").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/conf/br.x/rp_filter")
        );
        assert_eq!(
            s.path("net.ipv4.ip_forward").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/ip_forward")
        );
    }

    #[test]
    fn writes_in_a_namespace_do_not_touch_the_host() {
        if !corral_test_support::gate::netns() {
            return;
        }
        let host_before = Sysctls::default().read("net.ipv4.ip_forward").unwrap();
        let ns = crate::netns::Netns::new().unwrap();
        let inside = ns
            .run(|| {
                let s = Sysctls::default();
                s.apply_one(&plan("net.ipv4.ip_forward", "1")).unwrap();
                s.read("net.ipv4.ip_forward").unwrap()
            })
            .unwrap();
        assert_eq!(inside.as_deref(), Some("1"));
        assert_eq!(
            Sysctls::default().read("net.ipv4.ip_forward").unwrap(),
            host_before
        );
    }
}
