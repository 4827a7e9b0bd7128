//! Running a command in an instance: Incus records stdout and stderr
//! server-side (no websockets), corral fetches and then deletes the logs.
//! A command run for its exit status alone (readiness) records nothing.
//!
//! Recorded-output exec takes no standard input, so stdin is pushed to a
//! private file in the guest (owned by the exec user, mode 0600), and the
//! command is started through a fixed `sh` wrapper that redirects it: the
//! shell replaces itself with the program, whose argv arrives intact.
//!
//! The caller's environment never goes to Incus as exec environment: Incus
//! passes that on the command line of its `forkexec` helper, which every
//! local user can read with `ps`. It is pushed the same way, as a 0600
//! file of `export KEY='value'` lines that the wrapper sources and deletes
//! before it runs the program.
//!
//! Incus cannot cancel such an exec, so a timeout is enforced by tagging the
//! command's environment with a one-off marker and, when time runs out,
//! killing every process in the guest that carries it (via `/proc`, with the
//! guest's `sh`, `tr`, `grep` and `kill`).

use std::time::Duration;

use corral_sandbox_core::sandbox::{ExecOutput, ExecRequest, ProviderError};
use http::Method;
use serde_json::Value;

use crate::api;
use crate::client::ClientError;
use crate::sandbox::IncusSandbox;

/// The environment variable carrying the kill marker.
pub const MARKER_VAR: &str = "CORRAL_EXEC_ID";

const KILL_SCRIPT: &str = r#"for p in /proc/[0-9]*; do
  if tr '\0' '\n' < "$p/environ" 2>/dev/null | grep -qx "$1"; then kill -9 "${p#/proc/}" 2>/dev/null; fi
done"#;

/// Run `request` in `sandbox` (already checked: owned and running).
pub async fn run(
    sandbox: &IncusSandbox,
    request: &ExecRequest,
) -> Result<ExecOutput, ProviderError> {
    if request.argv.is_empty() {
        return Err(ProviderError::InvalidSpec {
            field: "argv",
            reason: "empty; expected a program and its arguments".into(),
        });
    }
    if request.tty.is_some() {
        return Err(ProviderError::InvalidSpec {
            field: "tty",
            reason: "a terminal needs the streamed exec; leave it out here".into(),
        });
    }
    let owner = request.user.map_or((0, 0), |u| (u.uid, u.gid));
    let env_text = env_file_text(&request.env)?;
    let mut pushed: Vec<String> = Vec::new();
    let mut env_file = None;
    let mut stdin_file = None;
    let mut inputs = Ok(());
    for (kind, bytes, slot) in [
        ("env", env_text.map(String::into_bytes), &mut env_file),
        ("stdin", request.stdin.clone(), &mut stdin_file),
    ] {
        let Some(bytes) = bytes else { continue };
        let id = crate::stamp::Stamp::new(None, None, kind)?.id;
        let path = format!("/tmp/.corral-{kind}-{id}");
        pushed.push(path.clone());
        if let Err(e) = crate::files::push_owned(sandbox, &path, &bytes, 0o600, owner).await {
            inputs = Err(e);
            break;
        }
        *slot = Some(path);
    }
    let result = match inputs {
        Ok(()) => run_inner(sandbox, request, env_file.as_deref(), stdin_file.as_deref()).await,
        Err(e) => Err(e),
    };
    for path in &pushed {
        // The wrapper already deleted the env file; a missing file is fine.
        if let Err(e) = crate::files::remove(sandbox, path).await {
            tracing::debug!(error = %e, path, "could not remove an exec input file");
        }
    }
    result
}

/// The environment as a file the wrapper sources: `export KEY='value'`
/// lines (values quoted for a POSIX shell by `shlex`); `None` when empty.
pub fn env_file_text(
    env: &std::collections::BTreeMap<String, String>,
) -> Result<Option<String>, ProviderError> {
    if env.is_empty() {
        return Ok(None);
    }
    let mut text = String::new();
    for (key, value) in env {
        let ok = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok || key == MARKER_VAR {
            return Err(ProviderError::InvalidSpec {
                field: "env",
                reason: format!(
                    "variable name `{}` is invalid; expected [A-Za-z_][A-Za-z0-9_]*, not {MARKER_VAR}",
                    corral_sandbox_core::text::Shown(key)
                ),
            });
        }
        if value.contains('\0') {
            return Err(ProviderError::InvalidSpec {
                field: "env",
                reason: format!("the value of `{key}` holds a NUL byte"),
            });
        }
        let quoted = shlex::try_quote(value).map_err(|_| ProviderError::InvalidSpec {
            field: "env",
            reason: format!("the value of `{key}` cannot be quoted for a shell"),
        })?;
        text.push_str(&format!("export {key}={quoted}\n"));
    }
    Ok(Some(text))
}

/// `argv`, with the environment sourced from `env_file` and standard input
/// read from `stdin_file` when there are such files.
pub fn wrapped_argv(
    argv: &[String],
    env_file: Option<&str>,
    stdin_file: Option<&str>,
) -> Vec<String> {
    if env_file.is_none() && stdin_file.is_none() {
        return argv.to_vec();
    }
    [
        "/bin/sh",
        "-c",
        WRAPPER,
        "corral-exec",
        env_file.unwrap_or(""),
        stdin_file.unwrap_or(""),
    ]
    .into_iter()
    .map(str::to_owned)
    .chain(argv.iter().cloned())
    .collect()
}

/// Sources and deletes the env file (`$1`), then runs the program with
/// standard input from `$2` when given.
const WRAPPER: &str = r#"e=$1; i=$2; shift 2
if [ -n "$e" ]; then . "$e" && rm -f "$e" || exit 127; fi
if [ -n "$i" ]; then exec "$@" < "$i"; fi
exec "$@""#;

async fn run_inner(
    sandbox: &IncusSandbox,
    request: &ExecRequest,
    env_file: Option<&str>,
    stdin_file: Option<&str>,
) -> Result<ExecOutput, ProviderError> {
    let client = sandbox.provider.client();
    // Only corral's own marker travels as Incus exec environment.
    let mut env = std::collections::BTreeMap::new();
    let marker = match request.timeout {
        Some(_) => {
            let id = crate::stamp::Stamp::new(None, None, "exec")?.id;
            env.insert(MARKER_VAR.to_owned(), id.clone());
            Some(format!("{MARKER_VAR}={id}"))
        }
        None => None,
    };
    let body = api::exec_body(
        &wrapped_argv(&request.argv, env_file, stdin_file),
        &env,
        request.user.map(|u| (u.uid, u.gid)),
        request.cwd.as_deref(),
    );
    let what = format!("exec in {}", sandbox.name);
    let (id, _) = client
        .start_operation(Method::POST, &sandbox.path("/exec"), Some(&body))
        .await
        .map_err(|e| sandbox.provider.err(e))?;
    let wait = request
        .timeout
        .unwrap_or(sandbox.provider.config().operation_timeout);
    let op = match client.wait(&what, &id, wait).await {
        Ok(op) => op,
        Err(ClientError::Timeout { .. }) => {
            if let Some(marker) = &marker {
                kill_marked(sandbox, marker).await;
            }
            // The killed command's operation ends; its logs go with it.
            let _ = client.wait(&what, &id, Duration::from_secs(10)).await;
            delete_logs(sandbox, &id).await;
            return Err(ProviderError::Timeout {
                operation: format!("{what}: {:?}", request.argv),
                after: wait,
            });
        }
        Err(e) => {
            delete_logs(sandbox, &id).await;
            return Err(command_error(sandbox, &request.argv, e));
        }
    };
    let cap = sandbox.provider.config().max_exec_output;
    let meta = op.metadata.unwrap_or(Value::Null);
    let fetched = async {
        let exit_code = exit_code(sandbox, &what, Some(&meta))?;
        let (stdout, out_cut) = fetch_log(sandbox, &meta, "1", cap).await?;
        let (stderr, err_cut) = fetch_log(sandbox, &meta, "2", cap).await?;
        Ok(ExecOutput {
            exit_code,
            stdout,
            stderr,
            truncated: out_cut || err_cut,
        })
    }
    .await;
    delete_logs(sandbox, &id).await;
    fetched
}

/// Run `request` in `sandbox` (already checked: owned and running) for
/// its exit status alone: Incus records no output, so there are no logs to
/// fetch and delete, and the exit code comes from the operation's
/// metadata. A request with environment or standard input takes the full
/// path ([`run`]), which pushes them as files.
pub async fn status(sandbox: &IncusSandbox, request: &ExecRequest) -> Result<i32, ProviderError> {
    if !request.env.is_empty() || request.stdin.is_some() || request.tty.is_some() {
        return Ok(run(sandbox, request).await?.exit_code);
    }
    if request.argv.is_empty() {
        return Err(ProviderError::InvalidSpec {
            field: "argv",
            reason: "empty; expected a program and its arguments".into(),
        });
    }
    let client = sandbox.provider.client();
    let mut env = std::collections::BTreeMap::new();
    let marker = match request.timeout {
        Some(_) => {
            let id = crate::stamp::Stamp::new(None, None, "exec")?.id;
            env.insert(MARKER_VAR.to_owned(), id.clone());
            Some(format!("{MARKER_VAR}={id}"))
        }
        None => None,
    };
    let mut body = api::exec_body(
        &request.argv,
        &env,
        request.user.map(|u| (u.uid, u.gid)),
        request.cwd.as_deref(),
    );
    body["record-output"] = Value::Bool(false);
    let what = format!("exec in {}", sandbox.name);
    let (id, _) = client
        .start_operation(Method::POST, &sandbox.path("/exec"), Some(&body))
        .await
        .map_err(|e| sandbox.provider.err(e))?;
    let wait = request
        .timeout
        .unwrap_or(sandbox.provider.config().operation_timeout);
    let op = match client.wait(&what, &id, wait).await {
        Ok(op) => op,
        Err(ClientError::Timeout { .. }) => {
            if let Some(marker) = &marker {
                kill_marked(sandbox, marker).await;
            }
            return Err(ProviderError::Timeout {
                operation: format!("{what}: {:?}", request.argv),
                after: wait,
            });
        }
        Err(e) => return Err(command_error(sandbox, &request.argv, e)),
    };
    exit_code(sandbox, &what, op.metadata.as_ref())
}

/// The exit code in a finished exec operation's metadata.
fn exit_code(
    sandbox: &IncusSandbox,
    what: &str,
    meta: Option<&Value>,
) -> Result<i32, ProviderError> {
    let meta = meta.unwrap_or(&Value::Null);
    meta.get("return")
        .and_then(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok())
        .ok_or_else(|| ProviderError::Malformed {
            kind: sandbox.provider.inner.kind,
            operation: what.to_owned(),
            detail: format!("no exit code in {meta}"),
        })
}

/// The error of a failed exec operation: Incus fails the operation with
/// "Command not found" when the program does not exist in the guest, which
/// is the caller's mistake (`InvalidSpec` on `argv`), not a backend fault.
/// (A command started through the env/stdin wrapper reports exit code 127
/// from the guest's shell instead.)
pub(crate) fn command_error(
    sandbox: &IncusSandbox,
    argv: &[String],
    e: ClientError,
) -> ProviderError {
    let message = match &e {
        ClientError::Operation { message, .. } | ClientError::Api { message, .. } => message,
        _ => return sandbox.provider.err(e),
    };
    if message.trim().eq_ignore_ascii_case("command not found") {
        let program = argv.first().map(String::as_str).unwrap_or_default();
        return ProviderError::InvalidSpec {
            field: "argv",
            reason: format!(
                "command not found in sandbox `{}`: `{}` (Incus: {message}); give a path that exists in the guest, or a program on its PATH",
                sandbox.name,
                corral_sandbox_core::text::Shown(program)
            ),
        };
    }
    sandbox.provider.err(e)
}

/// Read one recorded stream, keeping at most `cap` bytes (true: cut).
async fn fetch_log(
    sandbox: &IncusSandbox,
    meta: &Value,
    fd: &str,
    cap: u64,
) -> Result<(Vec<u8>, bool), ProviderError> {
    let Some(url) = meta
        .get("output")
        .and_then(|o| o.get(fd))
        .and_then(Value::as_str)
    else {
        return Ok((Vec::new(), false));
    };
    let (_, bytes, truncated) = sandbox
        .provider
        .client()
        .get_capped(url, cap)
        .await
        .map_err(|e| sandbox.provider.err(e))?;
    Ok((bytes.to_vec(), truncated))
}

/// Delete both recorded streams of exec operation `id` (they live under
/// Incus's instance directory until deleted), whatever happened to the
/// command; a log already gone is fine.
async fn delete_logs(sandbox: &IncusSandbox, id: &str) {
    let client = sandbox.provider.client();
    for stream in ["stdout", "stderr"] {
        let url = sandbox.path(&format!("/logs/exec-output/exec_{id}.{stream}"));
        if let Err(e) = client.call(Method::DELETE, &url, None).await
            && !e.is_not_found()
        {
            tracing::debug!(error = %e, url, "could not delete an exec log");
        }
    }
}

/// Kill every guest process whose environment holds `marker`.
pub(crate) async fn kill_marked(sandbox: &IncusSandbox, marker: &str) {
    let argv: Vec<String> = ["/bin/sh", "-c", KILL_SCRIPT, "corral-kill", marker]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let body = api::exec_body(&argv, &Default::default(), None, None);
    let client = sandbox.provider.client();
    let started = client
        .start_operation(Method::POST, &sandbox.path("/exec"), Some(&body))
        .await;
    match started {
        Ok((id, _)) => {
            if let Err(e) = client
                .wait("kill timed-out exec", &id, Duration::from_secs(10))
                .await
            {
                tracing::warn!(error = %e, sandbox = %sandbox.name, "could not kill a timed-out command");
            }
            delete_logs(sandbox, &id).await;
        }
        Err(e) => {
            tracing::warn!(error = %e, sandbox = %sandbox.name, "could not kill a timed-out command")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_argv_as_separate_arguments() {
        let argv = vec![
            "grep".to_owned(),
            "-c".to_owned(),
            "a b; rm -rf /".to_owned(),
        ];
        assert_eq!(wrapped_argv(&argv, None, None), argv);
        let wrapped = wrapped_argv(&argv, None, Some("/tmp/.corral-stdin-ab"));
        assert_eq!(
            wrapped[..6],
            [
                "/bin/sh",
                "-c",
                WRAPPER,
                "corral-exec",
                "",
                "/tmp/.corral-stdin-ab"
            ]
        );
        assert_eq!(wrapped[6..], argv[..]);
    }

    #[test]
    fn the_env_file_round_trips_through_a_real_shell() {
        let env = std::collections::BTreeMap::from([
            ("A".to_owned(), "it's $(x) `y`\nz\\".to_owned()),
            ("B_2".to_owned(), String::new()),
        ]);
        let text = env_file_text(&env).unwrap().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("env");
        std::fs::write(&file, &text).unwrap();
        let argv = wrapped_argv(
            &[
                "sh".into(),
                "-c".into(),
                r#"printf '%s|%s|' "$A" "$B_2"; [ -e "$0" ] || echo gone"#.into(),
                file.display().to_string(),
            ],
            Some(&file.display().to_string()),
            None,
        );
        let out = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!("{}||gone\n", env["A"])
        );
        for bad in ["1A", "A-B", "", MARKER_VAR] {
            let env = std::collections::BTreeMap::from([(bad.to_owned(), "v".to_owned())]);
            assert!(env_file_text(&env).is_err(), "{bad}");
        }
    }
}
