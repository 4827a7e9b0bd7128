//! Running a command in an instance: Incus records stdout and stderr
//! server-side (no websockets), corral fetches and then deletes the logs.
//!
//! Recorded-output exec takes no standard input, so stdin is pushed to a
//! private file in the guest (owned by the exec user, mode 0600) and the
//! command is started as `sh -c 'exec "$@" < "$0"' <file> <argv…>`: the
//! shell replaces itself with the program, whose argv arrives intact.
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
    let owner = request.user.map_or((0, 0), |u| (u.uid, u.gid));
    let stdin_file = match &request.stdin {
        Some(bytes) => {
            let id = crate::stamp::Stamp::new(None, None, "stdin")?.id;
            let path = format!("/tmp/.corral-stdin-{id}");
            crate::files::push_owned(sandbox, &path, bytes, 0o600, owner).await?;
            Some(path)
        }
        None => None,
    };
    let result = run_inner(sandbox, request, stdin_file.as_deref()).await;
    if let Some(path) = &stdin_file
        && let Err(e) = crate::files::remove(sandbox, path).await
    {
        tracing::debug!(error = %e, path, "could not remove an exec stdin file");
    }
    result
}

/// `argv`, reading standard input from `stdin_file` when there is one.
pub fn wrapped_argv(argv: &[String], stdin_file: Option<&str>) -> Vec<String> {
    match stdin_file {
        None => argv.to_vec(),
        Some(file) => ["/bin/sh", "-c", STDIN_WRAPPER, file]
            .into_iter()
            .map(str::to_owned)
            .chain(argv.iter().cloned())
            .collect(),
    }
}

const STDIN_WRAPPER: &str = r#"exec "$@" < "$0""#;

async fn run_inner(
    sandbox: &IncusSandbox,
    request: &ExecRequest,
    stdin_file: Option<&str>,
) -> Result<ExecOutput, ProviderError> {
    let client = sandbox.provider.client();
    let mut env = request.env.clone();
    let marker = match request.timeout {
        Some(_) => {
            let id = crate::stamp::Stamp::new(None, None, "exec")?.id;
            env.insert(MARKER_VAR.to_owned(), id.clone());
            Some(format!("{MARKER_VAR}={id}"))
        }
        None => None,
    };
    let body = api::exec_body(
        &wrapped_argv(&request.argv, stdin_file),
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
            return Err(ProviderError::Timeout {
                operation: format!("{what}: {:?}", request.argv),
                after: wait,
            });
        }
        Err(e) => return Err(sandbox.provider.err(e)),
    };
    let meta = op.metadata.unwrap_or(Value::Null);
    let exit_code = meta
        .get("return")
        .and_then(Value::as_i64)
        .and_then(|c| i32::try_from(c).ok())
        .ok_or_else(|| ProviderError::Malformed {
            kind: sandbox.provider.inner.kind,
            operation: what.clone(),
            detail: format!("no exit code in {meta}"),
        })?;
    let stdout = fetch_log(sandbox, &meta, "1").await?;
    let stderr = fetch_log(sandbox, &meta, "2").await?;
    Ok(ExecOutput {
        exit_code,
        stdout,
        stderr,
    })
}

/// Read and delete one recorded stream.
async fn fetch_log(
    sandbox: &IncusSandbox,
    meta: &Value,
    fd: &str,
) -> Result<Vec<u8>, ProviderError> {
    let Some(url) = meta
        .get("output")
        .and_then(|o| o.get(fd))
        .and_then(Value::as_str)
    else {
        return Ok(Vec::new());
    };
    let client = sandbox.provider.client();
    let (_, bytes) = client
        .get_bytes(url)
        .await
        .map_err(|e| sandbox.provider.err(e))?;
    // Logs pile up in the instance's log directory otherwise; losing the
    // race with a concurrent cleanup is harmless.
    if let Err(e) = client.call(Method::DELETE, url, None).await {
        tracing::debug!(error = %e, url, "could not delete an exec log");
    }
    Ok(bytes.to_vec())
}

/// Kill every guest process whose environment holds `marker`.
async fn kill_marked(sandbox: &IncusSandbox, marker: &str) {
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
    fn stdin_wrapping_keeps_argv_as_separate_arguments() {
        let argv = vec![
            "grep".to_owned(),
            "-c".to_owned(),
            "a b; rm -rf /".to_owned(),
        ];
        assert_eq!(wrapped_argv(&argv, None), argv);
        let wrapped = wrapped_argv(&argv, Some("/tmp/.corral-stdin-ab"));
        assert_eq!(
            wrapped[..4],
            [
                "/bin/sh",
                "-c",
                r#"exec "$@" < "$0""#,
                "/tmp/.corral-stdin-ab"
            ]
        );
        assert_eq!(wrapped[4..], argv[..]);
    }
}
