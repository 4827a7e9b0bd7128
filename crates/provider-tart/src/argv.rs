//! The exact `tart` argv of every operation, as pure functions, and the
//! name checks that keep argvs safe.

use corral_provider_support::{Program, env_argv};
use corral_sandbox_core::sandbox::{ExecRequest, ProviderError, Resources};

use crate::softnet::SoftnetPolicy;

/// Builds `tart` argvs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TartArgv {
    program: Program,
}

impl Default for TartArgv {
    fn default() -> Self {
        Self::new("tart")
    }
}

impl TartArgv {
    /// Argvs that start with `program` (normally `tart`).
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: Program::new(program),
        }
    }

    /// `tart clone SOURCE VM`.
    pub fn clone_vm(&self, source: &str, vm: &str) -> Vec<String> {
        self.program.argv(&["clone", source, vm])
    }

    /// `tart set VM [--cpu N] [--memory MiB] [--disk-size GiB]`, or `None`
    /// when there is nothing to set.
    pub fn set(&self, vm: &str, resources: &Resources) -> Option<Vec<String>> {
        let mut argv = self.program.argv(&["set", vm]);
        if let Some(cpus) = resources.cpus {
            argv.extend(["--cpu".to_owned(), cpus.to_string()]);
        }
        if let Some(mib) = resources.memory_mib {
            argv.extend(["--memory".to_owned(), mib.to_string()]);
        }
        if let Some(gib) = resources.disk_gib {
            argv.extend(["--disk-size".to_owned(), gib.to_string()]);
        }
        (argv.len() > 3).then_some(argv)
    }

    /// `tart run VM --no-graphics <softnet flags> <extra args>`; the
    /// extra arguments were validated by [`crate::softnet::check_extra_run_args`].
    pub fn run(&self, vm: &str, softnet: &SoftnetPolicy, extra: &[String]) -> Vec<String> {
        let mut argv = self.program.argv(&["run", vm, "--no-graphics"]);
        argv.extend(softnet.flags());
        argv.extend(extra.iter().cloned());
        argv
    }

    /// `tart stop VM [--timeout SECS]`.
    pub fn stop(&self, vm: &str, timeout_secs: Option<u64>) -> Vec<String> {
        let mut argv = self.program.argv(&["stop", vm]);
        if let Some(secs) = timeout_secs {
            argv.extend(["--timeout".to_owned(), secs.to_string()]);
        }
        argv
    }

    /// `tart rename VM NEW`.
    pub fn rename(&self, vm: &str, new: &str) -> Vec<String> {
        self.program.argv(&["rename", vm, new])
    }

    /// `tart delete VM`.
    pub fn delete(&self, vm: &str) -> Vec<String> {
        self.program.argv(&["delete", vm])
    }

    /// `tart list --source local --format json`.
    pub fn list(&self) -> Vec<String> {
        self.program
            .argv(&["list", "--source", "local", "--format", "json"])
    }

    /// `tart ip VM`.
    pub fn ip(&self, vm: &str) -> Vec<String> {
        self.program.argv(&["ip", vm])
    }

    /// `tart exec [-i] VM ARGV…` (needs the Tart guest agent in the image).
    pub fn exec(&self, vm: &str, request: &ExecRequest) -> Result<Vec<String>, ProviderError> {
        if request.cwd.is_some() {
            return Err(invalid(
                "cwd",
                "tart exec has no working-directory option; use `sh -c 'cd DIR && …'` in argv"
                    .to_owned(),
            ));
        }
        if request.user.is_some() {
            return Err(invalid(
                "user",
                "tart exec runs as the guest agent's user; switching users is not supported"
                    .to_owned(),
            ));
        }
        let words = env_argv(request)?;
        if let Some(program) = request.argv.first()
            && request.env.is_empty()
            && program.starts_with('-')
        {
            // Without `env` in front, tart would parse it as one of its options.
            return Err(invalid(
                "argv",
                format!("program `{program}` starts with `-`"),
            ));
        }
        let mut argv = self.program.argv(&["exec"]);
        if request.stdin.is_some() {
            argv.push("-i".to_owned());
        }
        argv.push(vm.to_owned());
        argv.extend(words);
        Ok(argv)
    }
}

fn invalid(field: &'static str, reason: String) -> ProviderError {
    ProviderError::InvalidSpec { field, reason }
}

/// The safe character set of a Tart VM name: 1 to 63 of `[A-Za-z0-9._-]`,
/// starting with a letter or digit.
pub fn check_vm_name(name: &str) -> Result<(), ProviderError> {
    let ok = (1..=63).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "name",
            format!(
                "`{name}` is not a safe Tart VM name; expected 1 to 63 of [A-Za-z0-9._-], starting with a letter or digit"
            ),
        ))
    }
}

/// A clone source: a local VM name or an OCI reference
/// (`ghcr.io/org/image:tag`, `…@sha256:…`), never an option.
pub fn check_source(source: &str) -> Result<(), ProviderError> {
    let ok = (1..=255).contains(&source.len())
        && source.starts_with(|c: char| c.is_ascii_alphanumeric())
        && source
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/:@".contains(c));
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "image",
            format!(
                "`{source}` is not a Tart VM name or OCI reference; expected [A-Za-z0-9._-/:@], starting with a letter or digit"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn tart() -> TartArgv {
        TartArgv::default()
    }

    #[test]
    fn golden_lifecycle() {
        let t = tart();
        assert_eq!(
            t.clone_vm("ghcr.io/cirruslabs/ubuntu:latest", "corral-a"),
            [
                "tart",
                "clone",
                "ghcr.io/cirruslabs/ubuntu:latest",
                "corral-a"
            ]
        );
        let res = Resources {
            cpus: Some(4),
            memory_mib: Some(8192),
            disk_gib: Some(50),
        };
        assert_eq!(
            t.set("corral-a", &res).unwrap(),
            [
                "tart",
                "set",
                "corral-a",
                "--cpu",
                "4",
                "--memory",
                "8192",
                "--disk-size",
                "50"
            ]
        );
        assert_eq!(t.set("corral-a", &Resources::default()), None);
        assert_eq!(t.stop("corral-a", None), ["tart", "stop", "corral-a"]);
        assert_eq!(
            t.stop("corral-a", Some(20)),
            ["tart", "stop", "corral-a", "--timeout", "20"]
        );
        assert_eq!(t.delete("corral-a"), ["tart", "delete", "corral-a"]);
        assert_eq!(
            t.rename("corral-a", "corral-b"),
            ["tart", "rename", "corral-a", "corral-b"]
        );
        assert_eq!(
            t.list(),
            ["tart", "list", "--source", "local", "--format", "json"]
        );
        assert_eq!(t.ip("corral-a"), ["tart", "ip", "corral-a"]);
    }

    #[test]
    fn golden_run() {
        let policy = SoftnetPolicy::from_parts(
            "192.168.64.1".parse().unwrap(),
            vec!["93.184.215.14".parse().unwrap()],
        );
        assert_eq!(
            tart().run(
                "corral-a",
                &policy,
                &["--root-disk-opts=sync=none".to_owned()]
            ),
            [
                "tart",
                "run",
                "corral-a",
                "--no-graphics",
                "--net-softnet",
                "--net-softnet-block=0.0.0.0/0",
                "--net-softnet-allow=192.168.64.1/32,93.184.215.14/32",
                "--root-disk-opts=sync=none"
            ]
        );
    }

    #[test]
    fn golden_exec() {
        let req = ExecRequest::new(["sh", "-c", "echo $1", "--", "a b;$(c)"]);
        assert_eq!(
            tart().exec("corral-a", &req).unwrap(),
            [
                "tart", "exec", "corral-a", "sh", "-c", "echo $1", "--", "a b;$(c)"
            ]
        );
        let mut req = ExecRequest::new(["make"]);
        req.env = BTreeMap::from([("A".to_owned(), "1".to_owned())]);
        req.stdin = Some(b"x".to_vec());
        assert_eq!(
            tart().exec("corral-a", &req).unwrap(),
            ["tart", "exec", "-i", "corral-a", "env", "--", "A=1", "make"]
        );
    }

    #[test]
    fn exec_refusals() {
        let mut req = ExecRequest::new(["true"]);
        req.cwd = Some("/w".into());
        assert!(matches!(
            tart().exec("v", &req),
            Err(ProviderError::InvalidSpec { field: "cwd", .. })
        ));
        assert!(tart().exec("v", &ExecRequest::new(["--help"])).is_err());
        assert!(
            tart()
                .exec("v", &ExecRequest::new(Vec::<String>::new()))
                .is_err()
        );
    }

    #[test]
    fn names() {
        for ok in ["corral-a", "A.b_c-1", "9lives"] {
            assert!(check_vm_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", ".x", "a b", "a/b", "a;b", "a$b", &"x".repeat(64)] {
            assert!(check_vm_name(bad).is_err(), "{bad:?}");
        }
        for ok in [
            "ghcr.io/cirruslabs/macos-sequoia-base:latest",
            "base",
            "r.io/a@sha256:ab12",
        ] {
            assert!(check_source(ok).is_ok(), "{ok}");
        }
        for bad in ["", "--net-bridged=en0", "a b", "a;b", "$(x)"] {
            assert!(check_source(bad).is_err(), "{bad:?}");
        }
    }
}
