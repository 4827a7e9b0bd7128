//! The scenario's steps, one function per concern, and the helpers they share.

use corral_sandbox_core::SandboxName;
use corral_sandbox_core::sandbox::{
    Capabilities, ExecRequest, Operation, ProviderError, Sandbox, SandboxProvider, SandboxState,
    SnapshotInfo, StopOptions,
};

use super::{Failure, Observed, Report, Scenario};

/// The file the scenario writes in the guest's default working directory
/// to tell a restored snapshot from the state after it.
const MARKER: &str = "corral-conformance-marker";

/// Arguments that a shell, a joined command line or a naive quoting layer
/// would change.
const HOSTILE_ARGS: [&str; 8] = [
    "a b",
    "it's",
    "$(echo expanded)",
    "`id`",
    "*",
    "semi;colon",
    "\"quoted\"",
    "back\\slash",
];

pub(super) fn fail<T>(msg: impl Into<String>) -> Result<T, Failure> {
    Err(Failure(msg.into()))
}

pub(super) fn ctx<T>(r: Result<T, ProviderError>, what: &str) -> Result<T, Failure> {
    r.map_err(|e| Failure(format!("{what}: {e}")))
}

pub(super) fn derived(base: &SandboxName, suffix: &str) -> Result<SandboxName, Failure> {
    SandboxName::new(format!("{base}-{suffix}"))
        .map_err(|e| Failure(format!("derived name `{base}-{suffix}`: {e}")))
}

pub(super) async fn expect_state(
    sb: &dyn Sandbox,
    want: SandboxState,
    when: &str,
) -> Result<(), Failure> {
    let info = ctx(sb.info().await, &format!("info {when}"))?;
    if info.state == want {
        Ok(())
    } else {
        fail(format!("state {when} is {}, expected {want}", info.state))
    }
}

pub(super) async fn ensure_running(sb: &dyn Sandbox) -> Result<(), Failure> {
    if ctx(sb.info().await, "info")?.state != SandboxState::Running {
        ctx(sb.start().await, "start")?;
    }
    Ok(())
}

pub(super) async fn ensure_stopped(sb: &dyn Sandbox) -> Result<(), Failure> {
    if ctx(sb.info().await, "info")?.state != SandboxState::Stopped {
        ctx(sb.stop(StopOptions::default()).await, "stop")?;
    }
    Ok(())
}

pub(super) fn expect_unsupported<T>(
    r: Result<T, ProviderError>,
    op: Operation,
    report: &mut Report,
) -> Result<(), Failure> {
    match r {
        Err(ProviderError::Unsupported { operation, .. }) if operation == op => {
            report.observed.insert(op, Observed::Unsupported);
            Ok(())
        }
        Err(e) => fail(format!(
            "{op} is not in capabilities(); expected Unsupported, got: {e}"
        )),
        Ok(_) => fail(format!("{op} is not in capabilities() but succeeded")),
    }
}

/// Runs `op` once; on `InvalidState` stops the sandbox, notes it, and
/// runs it again.
pub(super) async fn stopped_if_needed<T, F, Fut>(
    sb: &dyn Sandbox,
    what: &str,
    report: &mut Report,
    mut op: F,
) -> Result<T, Failure>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ProviderError>>,
{
    match op().await {
        Err(ProviderError::InvalidState { state, .. }) => {
            report
                .notes
                .push(format!("{what} refused while {state}; done stopped"));
            ensure_stopped(sb).await?;
            ctx(op().await, what)
        }
        other => ctx(other, what),
    }
}

pub(super) async fn exec_ok(
    sb: &dyn Sandbox,
    req: &ExecRequest,
    what: &str,
) -> Result<String, Failure> {
    let out = ctx(sb.exec(req).await, what)?;
    if !out.success() {
        return fail(format!(
            "{what}: exit {} ({})",
            out.exit_code,
            out.stderr_text().trim()
        ));
    }
    Ok(out.stdout_text())
}

pub(super) async fn check_exec(sb: &dyn Sandbox, scenario: &Scenario) -> Result<(), Failure> {
    let mut argv = vec!["printf", "%s\\n"];
    argv.extend(HOSTILE_ARGS);
    let out = exec_ok(sb, &ExecRequest::new(argv), "exec argv").await?;
    let want: String = HOSTILE_ARGS.iter().map(|a| format!("{a}\n")).collect();
    if out != want {
        return fail(format!(
            "argv not intact: printed {out:?}, expected {want:?}"
        ));
    }

    let mut req = ExecRequest::new(["sh", "-c", "printf %s \"$CORRAL_CONFORMANCE\""]);
    req.env
        .insert("CORRAL_CONFORMANCE".into(), "v a l'ue $x".into());
    let out = exec_ok(sb, &req, "exec env").await?;
    if out != "v a l'ue $x" {
        return fail(format!("env not passed intact: got {out:?}"));
    }

    let out = ctx(
        sb.exec(&ExecRequest::new([
            "sh",
            "-c",
            "echo out; echo err >&2; exit 3",
        ]))
        .await,
        "exec exit code",
    )?;
    if (
        out.exit_code,
        out.stdout_text().as_str(),
        out.stderr_text().as_str(),
    ) != (3, "out\n", "err\n")
    {
        return fail(format!(
            "exit code/stdout/stderr: got {} {:?} {:?}, expected 3 \"out\\n\" \"err\\n\"",
            out.exit_code,
            out.stdout_text(),
            out.stderr_text()
        ));
    }

    let mut req = ExecRequest::new(["pwd"]);
    req.cwd = Some(scenario.guest_dir.clone());
    match (sb.exec(&req).await, scenario.exec_cwd) {
        (Ok(out), true) if out.stdout_text().trim() == scenario.guest_dir => Ok(()),
        (Ok(out), true) => fail(format!(
            "cwd {} not honoured: pwd printed {:?}",
            scenario.guest_dir,
            out.stdout_text()
        )),
        (Err(ProviderError::InvalidSpec { field: "cwd", .. }), false) => Ok(()),
        (Err(e), true) => fail(format!("exec with cwd: {e}")),
        (other, false) => fail(format!(
            "the harness says cwd is not supported, so InvalidSpec(cwd) was expected; got {other:?}"
        )),
    }
}

pub(super) async fn write_marker(sb: &dyn Sandbox, value: &str) -> Result<(), Failure> {
    let script = format!("echo {value} > {MARKER}");
    exec_ok(sb, &ExecRequest::new(["sh", "-c", &script]), "write marker").await?;
    Ok(())
}

pub(super) async fn read_marker(sb: &dyn Sandbox) -> Result<String, Failure> {
    let out = exec_ok(sb, &ExecRequest::new(["cat", MARKER]), "read marker").await?;
    Ok(out.trim().to_owned())
}

pub(super) async fn check_snapshots(
    sb: &dyn Sandbox,
    caps: &Capabilities,
    report: &mut Report,
) -> Result<(), Failure> {
    const SNAP: &str = "conf1";
    if !caps.supports(Operation::Snapshot) {
        expect_unsupported(sb.snapshot(SNAP).await, Operation::Snapshot, report)?;
    }
    if !caps.supports(Operation::Restore) {
        expect_unsupported(sb.restore(SNAP).await, Operation::Restore, report)?;
    }
    if caps.supports(Operation::Snapshot) {
        write_marker(sb, "before").await?;
        stopped_if_needed(sb, "snapshot", report, || sb.snapshot(SNAP)).await?;
        report.observed.insert(Operation::Snapshot, Observed::Works);
        ensure_running(sb).await?;
        write_marker(sb, "after").await?;
        if caps.supports(Operation::Restore) {
            stopped_if_needed(sb, "restore", report, || sb.restore(SNAP)).await?;
            ensure_running(sb).await?;
            let marker = read_marker(sb).await?;
            if marker != "before" {
                return fail(format!(
                    "after restore the marker reads {marker:?}, expected \"before\""
                ));
            }
            report.observed.insert(Operation::Restore, Observed::Works);
        }
    }
    if caps.supports(Operation::ManageSnapshots) {
        let names = |l: Vec<SnapshotInfo>| l.into_iter().map(|s| s.name).collect::<Vec<_>>();
        let listed = names(ctx(sb.snapshots().await, "snapshots")?);
        if caps.supports(Operation::Snapshot) && !listed.iter().any(|n| n == SNAP) {
            return fail(format!(
                "snapshots() lists {listed:?}, expected `{SNAP}` among them"
            ));
        }
        if caps.supports(Operation::Snapshot) {
            ctx(sb.delete_snapshot(SNAP).await, "delete snapshot")?;
            let listed = names(ctx(sb.snapshots().await, "snapshots")?);
            if listed.iter().any(|n| n == SNAP) {
                return fail(format!("`{SNAP}` still listed after delete_snapshot"));
            }
        }
        report
            .observed
            .insert(Operation::ManageSnapshots, Observed::Works);
    } else {
        expect_unsupported(sb.snapshots().await, Operation::ManageSnapshots, report)?;
    }
    ensure_running(sb).await
}

pub(super) async fn check_files(
    sb: &dyn Sandbox,
    caps: &Capabilities,
    report: &mut Report,
) -> Result<(), Failure> {
    let path = "/tmp/corral-conformance-file";
    let body = b"\x00bytes\xffand text\n";
    if caps.supports(Operation::FilePush) {
        ctx(sb.push_file(path, body, 0o640).await, "push_file")?;
        report.observed.insert(Operation::FilePush, Observed::Works);
    } else {
        expect_unsupported(
            sb.push_file(path, body, 0o640).await,
            Operation::FilePush,
            report,
        )?;
    }
    if caps.supports(Operation::FilePull) {
        if caps.supports(Operation::FilePush) {
            let got = ctx(sb.pull_file(path).await, "pull_file")?;
            if got != body {
                return fail(format!("pull_file returned {got:?}, pushed {body:?}"));
            }
        } else {
            let script = format!("printf pulled > {path}");
            exec_ok(sb, &ExecRequest::new(["sh", "-c", &script]), "write a file").await?;
            let got = ctx(sb.pull_file(path).await, "pull_file")?;
            if got != b"pulled" {
                return fail(format!("pull_file returned {got:?}, expected \"pulled\""));
            }
        }
        report.observed.insert(Operation::FilePull, Observed::Works);
    } else {
        expect_unsupported(sb.pull_file(path).await, Operation::FilePull, report)?;
    }
    Ok(())
}

pub(super) async fn check_clone(
    provider: &dyn SandboxProvider,
    sb: &dyn Sandbox,
    caps: &Capabilities,
    report: &mut Report,
) -> Result<(), Failure> {
    let target = derived(sb.name(), "c")?;
    if !caps.supports(Operation::Clone) {
        return expect_unsupported(sb.clone_to(&target, None).await, Operation::Clone, report);
    }
    let copy = stopped_if_needed(sb, "clone", report, || sb.clone_to(&target, None)).await?;
    if copy.name() != &target {
        return fail(format!(
            "clone returned `{}`, expected `{target}`",
            copy.name()
        ));
    }
    let listed = ctx(provider.list().await, "list after clone")?;
    if !listed.iter().any(|i| i.name == target) {
        return fail(format!("list does not show the clone `{target}`"));
    }
    ctx(copy.delete().await, "delete clone")?;
    report.observed.insert(Operation::Clone, Observed::Works);
    ensure_running(sb).await
}

pub(super) async fn check_export_import(
    provider: &dyn SandboxProvider,
    sb: &dyn Sandbox,
    caps: &Capabilities,
    report: &mut Report,
) -> Result<(), Failure> {
    let dir = tempfile::tempdir().map_err(|e| Failure(format!("temporary directory: {e}")))?;
    let file = dir.path().join("backup.tar.gz");
    let target = derived(sb.name(), "i")?;
    if !caps.supports(Operation::Export) {
        expect_unsupported(sb.export(&file).await, Operation::Export, report)?;
    } else {
        stopped_if_needed(sb, "export", report, || sb.export(&file)).await?;
        if !file.exists() {
            return fail(format!(
                "export reported success but wrote no {}",
                file.display()
            ));
        }
        report.observed.insert(Operation::Export, Observed::Works);
    }
    if !caps.supports(Operation::Import) {
        expect_unsupported(
            provider.import(&file, &target).await,
            Operation::Import,
            report,
        )?;
    } else if caps.supports(Operation::Export) {
        let imported = ctx(provider.import(&file, &target).await, "import")?;
        ctx(imported.start().await, "start imported")?;
        // The copy carries the state at export: the restored marker.
        if caps.supports(Operation::Snapshot) && caps.supports(Operation::Restore) {
            let marker = read_marker(imported.as_ref()).await?;
            if marker != "before" {
                return fail(format!(
                    "the imported copy's marker reads {marker:?}, expected \"before\""
                ));
            }
        } else {
            exec_ok(
                imported.as_ref(),
                &ExecRequest::new(["true"]),
                "exec in the imported copy",
            )
            .await?;
        }
        ctx(imported.delete().await, "delete imported")?;
        report.observed.insert(Operation::Import, Observed::Works);
    } else {
        return fail("Import is listed but Export is not: nothing to import from");
    }
    ensure_running(sb).await
}

pub(super) async fn check_rename(
    provider: &dyn SandboxProvider,
    sb: Box<dyn Sandbox>,
    caps: &Capabilities,
    report: &mut Report,
) -> Result<Box<dyn Sandbox>, Failure> {
    let name = sb.name().clone();
    let target = derived(&name, "r")?;
    if !caps.supports(Operation::Rename) {
        // `rename` consumes the handle even when it refuses; open it again.
        expect_unsupported(sb.rename(&target).await, Operation::Rename, report)?;
        return ctx(provider.open(&name).await, "open after refused rename");
    }
    let renamed = ctx(sb.rename(&target).await, "rename (stopped)")?;
    if renamed.name() != &target {
        return fail(format!(
            "rename returned `{}`, expected `{target}`",
            renamed.name()
        ));
    }
    match provider.open(&name).await {
        Err(ProviderError::NotFound { .. }) => {}
        Err(e) => return fail(format!("open of the old name after rename: {e}")),
        Ok(_) => return fail(format!("the old name `{name}` still opens after rename")),
    }
    report.observed.insert(Operation::Rename, Observed::Works);
    Ok(renamed)
}
