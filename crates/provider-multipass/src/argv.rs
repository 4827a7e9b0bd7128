//! The exact `multipass` argv of every operation, as pure functions.
//!
//! Everything that reaches an argv here is either a validated name
//! (`SandboxName`, `BridgeName`), a number, or was checked by a function in
//! this module; the golden tests at the bottom pin each shape.

use std::path::Path;

use corral_provider_support::{Program, env_argv};
use corral_sandbox_core::sandbox::{ExecRequest, ProviderError, Resources};
use corral_sandbox_core::{BridgeName, MacAddr};

/// Where `multipass launch` reads its cloud-init user-data from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloudInitSource<'a> {
    /// A file on the machine that runs multipass (the 0700 staging dir).
    File(&'a Path),
    /// Standard input (`--cloud-init -`): used over SSH, where the local
    /// staging dir does not exist on the executor.
    Stdin,
}

/// Builds `multipass` argvs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultipassArgv {
    program: Program,
}

impl Default for MultipassArgv {
    fn default() -> Self {
        Self::new("multipass")
    }
}

fn owned(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| (*s).to_owned()).collect()
}

impl MultipassArgv {
    /// Argvs that start with `program` (normally `multipass`).
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: Program::new(program),
        }
    }

    /// `multipass launch --name VM [--cpus N] [--memory NM] [--disk NG]
    /// --cloud-init SRC [--network name=BRIDGE,mode=auto[,mac=MAC]] IMAGE`
    /// (`mac=` when the attachment carries a bound MAC: Multipass takes a
    /// NIC's MAC, not the name of its host side).
    pub fn launch(
        &self,
        vm: &str,
        image: &str,
        resources: &Resources,
        cloud_init: CloudInitSource<'_>,
        network: Option<(&BridgeName, Option<MacAddr>)>,
    ) -> Vec<String> {
        let mut argv = self.program.argv(&["launch", "--name", vm]);
        if let Some(cpus) = resources.cpus {
            argv.extend(["--cpus".to_owned(), cpus.to_string()]);
        }
        if let Some(mib) = resources.memory_mib {
            argv.extend(["--memory".to_owned(), format!("{mib}M")]);
        }
        if let Some(gib) = resources.disk_gib {
            argv.extend(["--disk".to_owned(), format!("{gib}G")]);
        }
        argv.push("--cloud-init".to_owned());
        argv.push(match cloud_init {
            CloudInitSource::File(path) => path.to_string_lossy().into_owned(),
            CloudInitSource::Stdin => "-".to_owned(),
        });
        if let Some((bridge, mac)) = network {
            let mut spec = format!("name={bridge},mode=auto");
            if let Some(mac) = mac {
                spec.push_str(&format!(",mac={mac}"));
            }
            argv.extend(["--network".to_owned(), spec]);
        }
        argv.push(image.to_owned());
        argv
    }

    /// `multipass info VM --format json`.
    pub fn info(&self, vm: &str) -> Vec<String> {
        self.program.argv(&["info", vm, "--format", "json"])
    }

    /// `multipass list --format json`.
    pub fn list(&self) -> Vec<String> {
        self.program.argv(&["list", "--format", "json"])
    }

    /// `multipass start VM`.
    pub fn start(&self, vm: &str) -> Vec<String> {
        self.program.argv(&["start", vm])
    }

    /// `multipass stop [--force] VM`.
    pub fn stop(&self, vm: &str, force: bool) -> Vec<String> {
        if force {
            self.program.argv(&["stop", "--force", vm])
        } else {
            self.program.argv(&["stop", vm])
        }
    }

    /// `multipass restart VM`.
    pub fn restart(&self, vm: &str) -> Vec<String> {
        self.program.argv(&["restart", vm])
    }

    /// `multipass snapshot --name SNAP VM`.
    pub fn snapshot(&self, vm: &str, snapshot: &str) -> Vec<String> {
        self.program.argv(&["snapshot", "--name", snapshot, vm])
    }

    /// `multipass restore --destructive VM.SNAP` (no prompt, no extra
    /// snapshot of the state being thrown away).
    pub fn restore(&self, vm: &str, snapshot: &str) -> Vec<String> {
        self.program
            .argv(&["restore", "--destructive", &format!("{vm}.{snapshot}")])
    }

    /// `multipass snapshots --format json`.
    pub fn snapshots(&self) -> Vec<String> {
        self.program.argv(&["snapshots", "--format", "json"])
    }

    /// `multipass delete --purge VM.SNAP`.
    pub fn delete_snapshot(&self, vm: &str, snapshot: &str) -> Vec<String> {
        self.program
            .argv(&["delete", "--purge", &format!("{vm}.{snapshot}")])
    }

    /// `multipass clone --name TARGET SOURCE`.
    pub fn clone_vm(&self, source: &str, target: &str) -> Vec<String> {
        self.program.argv(&["clone", "--name", target, source])
    }

    /// `multipass delete --purge VM`.
    pub fn delete(&self, vm: &str) -> Vec<String> {
        self.program.argv(&["delete", "--purge", vm])
    }

    /// `multipass exec VM [--working-directory DIR] -- [sudo …] [env …] ARGV…`,
    /// with the request's argv passed through intact.
    pub fn exec(&self, vm: &str, request: &ExecRequest) -> Result<Vec<String>, ProviderError> {
        let mut argv = self.program.argv(&["exec", vm]);
        if let Some(cwd) = &request.cwd {
            if !cwd.starts_with('/') {
                return Err(invalid("cwd", format!("`{cwd}` is not an absolute path")));
            }
            argv.extend(["--working-directory".to_owned(), cwd.clone()]);
        }
        argv.push("--".to_owned());
        argv.extend(guest_argv(request)?);
        Ok(argv)
    }
}

fn invalid(field: &'static str, reason: String) -> ProviderError {
    ProviderError::InvalidSpec { field, reason }
}

/// The command as the guest runs it: the request's argv, behind `sudo` for
/// another identity and `env` for extra variables, without any shell.
pub fn guest_argv(request: &ExecRequest) -> Result<Vec<String>, ProviderError> {
    let words = env_argv(request)?;
    let mut argv = Vec::new();
    if let Some(user) = request.user {
        // `#uid` is sudo's syntax for a numeric id; -n fails instead of prompting.
        argv.extend(owned(&["sudo", "-n", "-u"]));
        argv.push(format!("#{}", user.uid));
        argv.push("-g".to_owned());
        argv.push(format!("#{}", user.gid));
        argv.push("--".to_owned());
    }
    argv.extend(words);
    Ok(argv)
}

/// Check an image reference before it reaches an argv: a release name or
/// alias (`24.04`, `noble`), or a `file://`/`https://` URL.
pub fn check_image(image: &str) -> Result<(), ProviderError> {
    let reason = if image.is_empty() {
        Some("it is empty; give a release (e.g. `24.04`) or an image URL".to_owned())
    } else if image.starts_with('-') {
        Some(format!(
            "`{image}` starts with `-` and would be read as an option"
        ))
    } else {
        image
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "._:/@+-%=?&~".contains(*c)))
            .map(|c| format!("`{image}` contains {c:?}; expected [A-Za-z0-9._:/@+-%=?&~]"))
    };
    match reason {
        Some(reason) => Err(invalid("image", reason)),
        None => Ok(()),
    }
}

/// What a spec (an API caller's request) may make `multipass launch` read
/// on the host: a release or alias (`24.04`, `noble`, `daily:24.04`) or an
/// `https://` image, fetched by Multipass itself; a `file://` image only
/// when it resolves beneath one of the operator's `local_dirs` (never for
/// multipass-remote, whose files are not here to check). Anything else
/// that names a host resource is refused: `http://` (no integrity), other
/// schemes, and paths.
pub fn check_image_access(
    image: &str,
    local_dirs: &[std::path::PathBuf],
) -> Result<(), ProviderError> {
    let refuse = |why: String| Err(invalid("image", format!("`{image}` {why}")));
    let Some((scheme, rest)) = image.split_once("://") else {
        if image.starts_with('/') || image.starts_with('.') || image.starts_with('~') {
            return refuse(
                "is a host path; name a release (e.g. `24.04`) or an https:// image".to_owned(),
            );
        }
        return Ok(());
    };
    match scheme {
        "https" => Ok(()),
        "file" => {
            if local_dirs.is_empty() {
                return refuse(
                    "is a file on the host, and no local image directory is configured; \
                     name a release or an https:// image"
                        .to_owned(),
                );
            }
            if rest.contains('%') || rest.contains('?') || rest.contains('#') {
                return refuse("is a file URL with escapes, a query or a fragment".to_owned());
            }
            let path = std::path::Path::new(rest);
            let Ok(resolved) = std::fs::canonicalize(path) else {
                return refuse("names a file that does not exist".to_owned());
            };
            let inside = resolved.is_file()
                && local_dirs
                    .iter()
                    .any(|d| std::fs::canonicalize(d).is_ok_and(|d| resolved.starts_with(d)));
            if inside {
                Ok(())
            } else {
                refuse(format!(
                    "resolves to {}, which is not a file beneath the local image directories",
                    resolved.display()
                ))
            }
        }
        other => refuse(format!(
            "uses the `{other}://` scheme; only https:// images (and file:// beneath the local image directories) are accepted"
        )),
    }
}

/// Check a snapshot name: Multipass wants a letter, then letters, digits
/// and `-`; corral also keeps `.` out because `VM.SNAP` addresses snapshots.
pub fn check_snapshot_name(snapshot: &str) -> Result<(), ProviderError> {
    let ok = snapshot.len() <= 63
        && snapshot.starts_with(|c: char| c.is_ascii_alphabetic())
        && snapshot
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !snapshot.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(invalid(
            "snapshot",
            format!(
                "`{snapshot}` is not a valid snapshot name; expected 1 to 63 of [A-Za-z0-9-], starting with a letter, not ending with `-`"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use corral_sandbox_core::sandbox::ExecUser;

    use super::*;

    fn mp() -> MultipassArgv {
        MultipassArgv::default()
    }

    #[test]
    fn golden_launch_full() {
        let res = Resources {
            cpus: Some(2),
            memory_mib: Some(4096),
            disk_gib: Some(20),
        };
        let bridge = BridgeName::new("cb-dev").unwrap();
        let argv = mp().launch(
            "corral-a",
            "24.04",
            &res,
            CloudInitSource::File(Path::new("/s/corral-a/cloud-init.yaml")),
            Some((&bridge, None)),
        );
        assert_eq!(
            argv,
            [
                "multipass",
                "launch",
                "--name",
                "corral-a",
                "--cpus",
                "2",
                "--memory",
                "4096M",
                "--disk",
                "20G",
                "--cloud-init",
                "/s/corral-a/cloud-init.yaml",
                "--network",
                "name=cb-dev,mode=auto",
                "24.04"
            ]
        );
    }

    #[test]
    fn a_bound_mac_travels_in_the_network_spec() {
        let bridge = BridgeName::new("cb-dev").unwrap();
        let mac: MacAddr = "02:c0:0a:63:02:02".parse().unwrap();
        let argv = mp().launch(
            "corral-a",
            "noble",
            &Resources::default(),
            CloudInitSource::Stdin,
            Some((&bridge, Some(mac))),
        );
        let at = argv.iter().position(|a| a == "--network").unwrap();
        assert_eq!(argv[at + 1], "name=cb-dev,mode=auto,mac=02:c0:0a:63:02:02");
        assert_eq!(argv.last().map(String::as_str), Some("noble"));
    }

    #[test]
    fn golden_launch_minimal_over_stdin() {
        let argv = mp().launch(
            "corral-a",
            "noble",
            &Resources::default(),
            CloudInitSource::Stdin,
            None,
        );
        assert_eq!(
            argv,
            [
                "multipass",
                "launch",
                "--name",
                "corral-a",
                "--cloud-init",
                "-",
                "noble"
            ]
        );
    }

    #[test]
    fn golden_lifecycle() {
        let m = mp();
        assert_eq!(m.info("v"), ["multipass", "info", "v", "--format", "json"]);
        assert_eq!(m.list(), ["multipass", "list", "--format", "json"]);
        assert_eq!(m.start("v"), ["multipass", "start", "v"]);
        assert_eq!(m.stop("v", false), ["multipass", "stop", "v"]);
        assert_eq!(m.stop("v", true), ["multipass", "stop", "--force", "v"]);
        assert_eq!(m.restart("v"), ["multipass", "restart", "v"]);
        assert_eq!(
            m.snapshot("v", "s1"),
            ["multipass", "snapshot", "--name", "s1", "v"]
        );
        assert_eq!(
            m.restore("v", "s1"),
            ["multipass", "restore", "--destructive", "v.s1"]
        );
        assert_eq!(
            m.snapshots(),
            ["multipass", "snapshots", "--format", "json"]
        );
        assert_eq!(
            m.delete_snapshot("v", "s1"),
            ["multipass", "delete", "--purge", "v.s1"]
        );
        assert_eq!(
            m.clone_vm("v", "w"),
            ["multipass", "clone", "--name", "w", "v"]
        );
        assert_eq!(m.delete("v"), ["multipass", "delete", "--purge", "v"]);
        assert_eq!(
            MultipassArgv::new("/opt/mp").start("v"),
            ["/opt/mp", "start", "v"]
        );
    }

    #[test]
    fn golden_exec_keeps_argv_intact() {
        let req = ExecRequest::new(["sh", "-c", "echo \"$1\"; exit 3", "--", "a b;$(c)"]);
        assert_eq!(
            mp().exec("v", &req).unwrap(),
            [
                "multipass",
                "exec",
                "v",
                "--",
                "sh",
                "-c",
                "echo \"$1\"; exit 3",
                "--",
                "a b;$(c)"
            ]
        );
    }

    #[test]
    fn golden_exec_with_user_env_cwd() {
        let mut req = ExecRequest::new(["make", "test"]);
        req.user = Some(ExecUser {
            uid: 1000,
            gid: 1001,
        });
        req.env = BTreeMap::from([
            ("A".to_owned(), "1 2".to_owned()),
            ("B_2".to_owned(), String::new()),
        ]);
        req.cwd = Some("/work".to_owned());
        assert_eq!(
            mp().exec("v", &req).unwrap(),
            [
                "multipass",
                "exec",
                "v",
                "--working-directory",
                "/work",
                "--",
                "sudo",
                "-n",
                "-u",
                "#1000",
                "-g",
                "#1001",
                "--",
                "env",
                "--",
                "A=1 2",
                "B_2=",
                "make",
                "test"
            ]
        );
    }

    #[test]
    fn exec_refusals() {
        let empty = ExecRequest::new(Vec::<String>::new());
        assert!(matches!(
            mp().exec("v", &empty),
            Err(ProviderError::InvalidSpec { field: "argv", .. })
        ));
        let mut bad_env = ExecRequest::new(["true"]);
        bad_env.env.insert("A B".into(), "x".into());
        assert!(matches!(
            mp().exec("v", &bad_env),
            Err(ProviderError::InvalidSpec { field: "env", .. })
        ));
        let mut eq_prog = ExecRequest::new(["X=1"]);
        eq_prog.env.insert("A".into(), "x".into());
        assert!(mp().exec("v", &eq_prog).is_err());
        let mut rel = ExecRequest::new(["true"]);
        rel.cwd = Some("work".into());
        assert!(matches!(
            mp().exec("v", &rel),
            Err(ProviderError::InvalidSpec { field: "cwd", .. })
        ));
    }

    #[test]
    fn images_may_not_reach_host_files_unless_the_operator_says() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("x.img");
        std::fs::write(&img, b"img").unwrap();
        let dirs = vec![dir.path().to_owned()];
        for ok in ["24.04", "daily:noble", "https://example.invalid/x.img"] {
            assert!(check_image_access(ok, &[]).is_ok(), "{ok}");
        }
        let file = format!("file://{}", img.display());
        assert!(check_image_access(&file, &[]).is_err());
        assert!(check_image_access(&file, &dirs).is_ok());
        for bad in [
            "file:///etc/shadow".to_owned(),
            format!("file://{}/../../etc/shadow", dir.path().display()),
            format!("file://{}", dir.path().display()),
            format!("file://{}%2e", img.display()),
            "http://example.invalid/x.img".to_owned(),
            "ftp://example.invalid/x.img".to_owned(),
            "/var/img/x.img".to_owned(),
        ] {
            let err = check_image_access(&bad, &dirs);
            assert!(
                matches!(err, Err(ProviderError::InvalidSpec { field: "image", .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn images_and_snapshots() {
        for ok in [
            "24.04",
            "noble",
            "file:///var/img/x.img",
            "https://h/x.img?v=1",
        ] {
            assert!(check_image(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-x", "a b", "a;b", "$(x)", "a\nb"] {
            assert!(check_image(bad).is_err(), "{bad:?}");
        }
        for ok in ["s1", "before-upgrade", "S"] {
            assert!(check_snapshot_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "1s", "a.b", "a-", "a b", "-x"] {
            assert!(check_snapshot_name(bad).is_err(), "{bad:?}");
        }
    }
}
