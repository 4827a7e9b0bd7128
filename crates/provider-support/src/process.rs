//! The real runner: commands as local child processes, each in its own
//! process group so a timeout (or a forced stop) takes its children too.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;

use crate::runner::{Invocation, LocalRunner, RunError, RunOutput, Runner, check_argv};

/// Runs commands as local child processes.
#[derive(Debug, Clone, Default)]
pub struct ProcessRunner {
    search_path: Option<OsString>,
}

impl ProcessRunner {
    /// A runner that finds programs on this process's `PATH`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A runner whose children get `path` as `PATH`; programs are looked up
    /// there too (tests put a fake binary first on it).
    pub fn with_search_path(path: impl Into<OsString>) -> Self {
        Self {
            search_path: Some(path.into()),
        }
    }
}

#[async_trait]
impl Runner for ProcessRunner {
    async fn run(&self, invocation: &Invocation) -> Result<RunOutput, RunError> {
        check_argv(&invocation.argv)?;
        let program = invocation.program().to_owned();
        let mut command = tokio::process::Command::new(&program);
        command
            .args(&invocation.argv[1..])
            .stdin(if invocation.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Own process group, so a timeout kills the tool's children too.
            .process_group(0);
        if let Some(path) = &self.search_path {
            command.env("PATH", path);
        }
        let mut child = command.spawn().map_err(|source| RunError::Spawn {
            program: program.clone(),
            source,
        })?;
        let pid = child.id();
        let stdin = child.stdin.take();
        let input = invocation.stdin.clone();
        let work = async move {
            let feed = async move {
                if let (Some(mut pipe), Some(data)) = (stdin, input) {
                    // A tool that exits without reading its input is not an error.
                    match pipe.write_all(&data).await {
                        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => return Err(e),
                        _ => {}
                    }
                }
                Ok(())
            };
            let (fed, output) = tokio::join!(feed, child.wait_with_output());
            fed?;
            output
        };
        match tokio::time::timeout(invocation.timeout, work).await {
            Ok(Ok(output)) => Ok(RunOutput {
                exit_code: exit_code(output.status),
                stdout: output.stdout,
                stderr: output.stderr,
            }),
            Ok(Err(source)) => Err(RunError::Io { program, source }),
            Err(_) => {
                if let Some(pid) = pid {
                    kill_group(pid);
                }
                Err(RunError::Timeout {
                    program,
                    after: invocation.timeout,
                })
            }
        }
    }

    fn location(&self) -> String {
        "local".to_owned()
    }
}

#[async_trait]
impl LocalRunner for ProcessRunner {
    async fn spawn_detached(&self, argv: &[String], log: &Path) -> Result<u32, RunError> {
        check_argv(argv)?;
        let program = argv[0].clone();
        let log_err = |source| RunError::Io {
            program: program.clone(),
            source,
        };
        use std::os::unix::fs::OpenOptionsExt;
        let out = File::options()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(log)
            .map_err(log_err)?;
        let err = out.try_clone().map_err(log_err)?;
        use std::os::unix::process::CommandExt;
        let mut command = std::process::Command::new(&program);
        command
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        if let Some(path) = &self.search_path {
            command.env("PATH", path);
        }
        let child = command.spawn().map_err(|source| RunError::Spawn {
            program: program.clone(),
            source,
        })?;
        let pid = child.id();
        // Reap it whenever it exits, so a finished process leaves no zombie
        // behind that would still look alive to a pid probe.
        std::thread::spawn(move || {
            let mut child = child;
            let _ = child.wait();
        });
        Ok(pid)
    }

    fn find_program(&self, program: &str) -> Option<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        let path = match &self.search_path {
            Some(p) => p.clone(),
            None => std::env::var_os("PATH")?,
        };
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|candidate| {
                std::fs::metadata(candidate)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

/// True while a process with `pid` exists (the runner reaps the processes
/// it spawns, so an exited one disappears).
pub fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Kill the process group led by `pid` (the runner spawns every child as
/// the leader of its own group).
pub fn kill_group(pid: u32) {
    let Ok(pgid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; a
    // negative pid addresses the group this runner created for the child.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn sh(script: &str, timeout: Duration) -> Invocation {
        Invocation::new(vec!["/bin/sh".into(), "-c".into(), script.into()], timeout)
    }

    #[tokio::test]
    async fn captures_output_and_exit_code() {
        let out = ProcessRunner::new()
            .run(&sh(
                "echo out; echo err >&2; exit 3",
                Duration::from_secs(10),
            ))
            .await
            .unwrap();
        assert_eq!(out.exit_code, 3);
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.message(), "err");
    }

    #[tokio::test]
    async fn a_signal_reports_128_plus_its_number() {
        let out = ProcessRunner::new()
            .run(&sh("kill -TERM $$", Duration::from_secs(10)))
            .await
            .unwrap();
        assert_eq!(out.exit_code, 128 + libc::SIGTERM);
    }

    #[tokio::test]
    async fn feeds_stdin() {
        let inv = sh("cat", Duration::from_secs(10)).with_stdin(b"hello\n".to_vec());
        let out = ProcessRunner::new().run(&inv).await.unwrap();
        assert_eq!(out.stdout, b"hello\n");
    }

    #[tokio::test]
    async fn times_out_and_kills_the_group() {
        let started = std::time::Instant::now();
        let err = ProcessRunner::new()
            .run(&sh("sleep 30; echo late", Duration::from_millis(200)))
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Timeout { .. }), "{err}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn missing_program_is_a_spawn_error() {
        let err = ProcessRunner::with_search_path("/nonexistent-corral-dir")
            .run(&Invocation::new(
                vec!["some-tool".into()],
                Duration::from_secs(1),
            ))
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Spawn { .. }), "{err}");
        assert!(err.to_string().contains("on PATH"));
    }

    #[tokio::test]
    async fn refuses_nul_and_empty() {
        let runner = ProcessRunner::new();
        let err = runner
            .run(&Invocation::new(vec![], Duration::from_secs(1)))
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Empty));
        let err = runner
            .run(&Invocation::new(
                vec!["echo".into(), "a\0b".into()],
                Duration::from_secs(1),
            ))
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::NulByte { index: 1, .. }));
        let err = runner
            .spawn_detached(&[], Path::new("/nonexistent-corral-dir/log"))
            .await
            .unwrap_err();
        assert!(matches!(err, RunError::Empty));
    }

    #[test]
    fn local_location() {
        assert_eq!(ProcessRunner::new().location(), "local");
    }

    #[test]
    fn finds_programs_on_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("softnet");
        std::fs::write(&exe, "#!/bin/sh\n").unwrap();
        let runner = ProcessRunner::with_search_path(dir.path().as_os_str().to_owned());
        assert_eq!(runner.find_program("softnet"), None, "not executable yet");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(runner.find_program("softnet"), Some(exe));
        assert_eq!(runner.find_program("tart"), None);
    }

    #[tokio::test]
    async fn spawns_detached_and_logs() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("run.log");
        let argv: Vec<String> = vec![
            "/bin/sh".into(),
            "-c".into(),
            "echo started; exec sleep 30".into(),
        ];
        let pid = ProcessRunner::new()
            .spawn_detached(&argv, &log)
            .await
            .unwrap();
        assert!(process_exists(pid));
        let mut waited = 0;
        while std::fs::read_to_string(&log).unwrap_or_default() != "started\n" && waited < 50 {
            std::thread::sleep(Duration::from_millis(100));
            waited += 1;
        }
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "started\n");
        kill_group(pid);
        let mut waited = 0;
        while process_exists(pid) && waited < 50 {
            std::thread::sleep(Duration::from_millis(100));
            waited += 1;
        }
        assert!(!process_exists(pid), "the killed, reaped child is gone");
    }
}
