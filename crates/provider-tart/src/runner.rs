//! Running a command-line tool: an argv (never a shell string), optional
//! standard input, a time bound, and the captured result.
//!
//! [`Runner`] is the seam the provider talks through, so tests can swap the
//! real process runner for a recording fake. Besides run-to-completion it
//! starts long-lived processes detached (`tart run` stays in the
//! foreground for the VM's whole life).
//!
//! (The same shape as the Multipass provider's runner; providers may not
//! depend on each other, so it is repeated here rather than shared.)

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncWriteExt;

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// Program and arguments, passed to the OS as a vector.
    pub argv: Vec<String>,
    /// Bytes written to the command's standard input (closed when `None`).
    pub stdin: Option<Vec<u8>>,
    /// Kill the command and report a timeout after this long.
    pub timeout: Duration,
}

impl Invocation {
    /// An invocation of `argv` with no input.
    pub fn new(argv: Vec<String>, timeout: Duration) -> Self {
        Self {
            argv,
            stdin: None,
            timeout,
        }
    }

    /// Feed `data` to the command's standard input.
    pub fn with_stdin(mut self, data: Vec<u8>) -> Self {
        self.stdin = Some(data);
        self
    }

    /// The program name, for messages.
    pub fn program(&self) -> &str {
        self.argv.first().map_or("", String::as_str)
    }
}

/// What a finished command produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RunOutput {
    /// Exit status; a command killed by a signal reports 128 + the signal.
    pub exit_code: i32,
    /// Captured standard output.
    pub stdout: Vec<u8>,
    /// Captured standard error.
    pub stderr: Vec<u8>,
}

impl RunOutput {
    /// True when the command exited 0.
    pub fn success(&self) -> bool {
        self.exit_code == 0
    }

    /// Standard error (or, when that is empty, standard output) as trimmed
    /// text, bounded so a chatty tool cannot flood an error message.
    pub fn message(&self) -> String {
        const MAX: usize = 2000;
        let raw = if self.stderr.iter().all(u8::is_ascii_whitespace) {
            &self.stdout
        } else {
            &self.stderr
        };
        let text = String::from_utf8_lossy(raw);
        let text = text.trim();
        match text.char_indices().nth(MAX) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text.to_owned(),
        }
    }
}

/// Why a command could not be run to completion.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The argv was empty.
    #[error("refusing to run an empty command line")]
    Empty,
    /// An argument cannot be handed to a process at all.
    #[error("argument {index} of `{program}` contains a NUL byte, which no process can receive")]
    NulByte {
        /// The program.
        program: String,
        /// Position of the bad argument in argv.
        index: usize,
    },
    /// The program could not be started.
    #[error("cannot start `{program}`: {source}; check that it is installed and on PATH")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The program ran past its time bound and was killed.
    #[error("`{program}` did not finish within {after:?} and was killed")]
    Timeout {
        /// The program.
        program: String,
        /// The bound.
        after: Duration,
    },
    /// Talking to the running program failed.
    #[error("lost contact with `{program}` while it ran: {source}")]
    Io {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Something that runs argvs: the local OS, SSH to an executor, or a fake.
#[async_trait]
pub trait Runner: Send + Sync + fmt::Debug {
    /// Run `invocation` to completion (or to its timeout).
    async fn run(&self, invocation: &Invocation) -> Result<RunOutput, RunError>;

    /// Start `argv` in the background, detached from corral (own process
    /// group, no standard input, output appended to `log`), and return its
    /// process id without waiting for it.
    async fn spawn_detached(&self, argv: &[String], log: &Path) -> Result<u32, RunError>;

    /// Where `program` would be found on the `PATH` commands run with.
    fn find_program(&self, program: &str) -> Option<PathBuf>;
}

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

/// Refuse argvs the OS cannot carry, before spawning anything.
pub(crate) fn check_argv(argv: &[String]) -> Result<(), RunError> {
    let program = argv.first().ok_or(RunError::Empty)?;
    if let Some(index) = argv.iter().position(|a| a.contains('\0')) {
        return Err(RunError::NulByte {
            program: program.clone(),
            index,
        });
    }
    Ok(())
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
        // Reap it whenever it exits, so a finished VM leaves no zombie
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

/// True while a process with `pid` exists (corral reaps the processes it
/// spawns, so an exited one disappears).
pub(crate) fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Kill the process group led by `pid` (the child was spawned as its leader).
pub(crate) fn kill_group(pid: u32) {
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
                vec!["multipass".into()],
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
        let alive = |pid: u32| std::path::Path::new(&format!("/proc/{pid}")).exists();
        assert!(alive(pid));
        let mut waited = 0;
        while std::fs::read_to_string(&log).unwrap_or_default() != "started\n" && waited < 50 {
            std::thread::sleep(Duration::from_millis(100));
            waited += 1;
        }
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "started\n");
        kill_group(pid);
        let mut waited = 0;
        while alive(pid) && waited < 50 {
            std::thread::sleep(Duration::from_millis(100));
            waited += 1;
        }
        assert!(!alive(pid), "the killed, reaped child is gone");
    }

    #[test]
    fn message_prefers_stderr_and_is_bounded() {
        let out = RunOutput {
            exit_code: 1,
            stdout: b"from stdout".to_vec(),
            stderr: b"  \n".to_vec(),
        };
        assert_eq!(out.message(), "from stdout");
        let long = RunOutput {
            exit_code: 1,
            stdout: vec![],
            stderr: vec![b'x'; 5000],
        };
        assert_eq!(long.message().chars().count(), 2001);
    }
}
