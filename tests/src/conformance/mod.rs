//! The provider conformance scenario: one script over `&dyn SandboxProvider`
//! that every backend must pass.
//!
//! create → open/list → start → exec (argv intact, env, exit code and
//! stderr, cwd) → snapshot → change → restore → snapshot management →
//! file push/pull → restart → clone → export/import → rename → stop →
//! delete. Each operation the provider's `capabilities()` lists must work;
//! each it does not list must return `ProviderError::Unsupported`. The
//! returned [`Report`] says, per operation, which of the two was observed,
//! so a caller can assert that capabilities and behaviour agree for every
//! [`Operation`].
//!
//! Backends differ in ways the trait allows: a backend that snapshots,
//! restores or clones stopped instances only answers `InvalidState`, and
//! the scenario then stops the sandbox and tries again (and records that it
//! had to). Everything the scenario creates is deleted before it returns,
//! on failure too (best effort).

mod checks;

use std::collections::{BTreeMap, BTreeSet};

use corral_sandbox_core::sandbox::{
    Operation, ProviderError, SandboxProvider, SandboxSpec, SandboxState, StopOptions,
};

use checks::{
    check_clone, check_exec, check_export_import, check_files, check_rename, check_snapshots, ctx,
    derived, ensure_running, expect_state, expect_unsupported, fail,
};

/// What the harness knows about the backend beyond `capabilities()`.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The sandbox to create (its name is the base of every derived name).
    pub spec: SandboxSpec,
    /// `ExecRequest::cwd` is honoured; when false the provider must refuse
    /// it with `InvalidSpec { field: "cwd" }` instead.
    pub exec_cwd: bool,
    /// A directory that exists in the guest, for the cwd check.
    pub guest_dir: String,
}

/// What happened to one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// It was exercised and did what it should.
    Works,
    /// It returned `ProviderError::Unsupported`.
    Unsupported,
}

/// The outcome of a successful run.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Per operation, what was observed.
    pub observed: BTreeMap<Operation, Observed>,
    /// Backend differences the scenario adapted to (e.g. "snapshot needed a stop").
    pub notes: Vec<String>,
}

impl Report {
    /// Operations whose observed behaviour contradicts `capabilities`, and
    /// operations the run never observed.
    pub fn disagreements(&self, capabilities: &BTreeSet<Operation>) -> Vec<String> {
        let mut out = Vec::new();
        for op in Operation::ALL {
            match (self.observed.get(&op), capabilities.contains(&op)) {
                (None, _) => out.push(format!("{op}: never observed")),
                (Some(Observed::Works), false) => {
                    out.push(format!("{op}: works but capabilities() does not list it"));
                }
                (Some(Observed::Unsupported), true) => {
                    out.push(format!("{op}: listed in capabilities() but Unsupported"));
                }
                _ => {}
            }
        }
        out
    }
}

/// A conformance failure: what was expected and what happened.
#[derive(Debug, thiserror::Error)]
#[error("conformance: {0}")]
pub struct Failure(pub String);

/// Runs the scenario against `provider`.
pub async fn run(provider: &dyn SandboxProvider, scenario: &Scenario) -> Result<Report, Failure> {
    let caps = provider.capabilities();
    for core in [
        Operation::Create,
        Operation::Start,
        Operation::Stop,
        Operation::Exec,
        Operation::Delete,
    ] {
        if !caps.supports(core) {
            return fail(format!("capabilities() lacks the core operation {core}"));
        }
    }
    let base = scenario.spec.name.clone();
    let cleanup = [
        base.clone(),
        derived(&base, "c")?,
        derived(&base, "i")?,
        derived(&base, "r")?,
    ];
    let mut report = Report::default();
    let result = steps(provider, scenario, &mut report).await;
    // Whatever happened, leave nothing behind.
    for name in &cleanup {
        if let Ok(sb) = provider.open(name).await {
            let _ = sb.delete().await;
        }
    }
    result.map(|()| report)
}

async fn steps(
    provider: &dyn SandboxProvider,
    scenario: &Scenario,
    report: &mut Report,
) -> Result<(), Failure> {
    let caps = provider.capabilities();
    let spec = &scenario.spec;
    let name = &spec.name;

    let created = ctx(provider.create(spec).await, "create")?;
    report.observed.insert(Operation::Create, Observed::Works);
    if created.name() != name || created.kind() != provider.kind() {
        return fail(format!(
            "create returned a handle on `{}` ({}), expected `{name}` ({})",
            created.name(),
            created.kind(),
            provider.kind()
        ));
    }
    expect_state(created.as_ref(), SandboxState::Stopped, "after create").await?;
    let listed = ctx(provider.list().await, "list")?;
    if !listed.iter().any(|i| &i.name == name) {
        return fail(format!("list does not show the new sandbox `{name}`"));
    }
    drop(created);
    let sb = ctx(provider.open(name).await, "open")?;
    let info = ctx(sb.info().await, "info")?;
    if let Some(net) = &spec.network
        && info.profile.as_ref() != Some(&net.profile)
    {
        return fail(format!(
            "info reports profile {:?}, the spec asked for `{}`",
            info.profile, net.profile
        ));
    }

    ctx(sb.start().await, "start")?;
    report.observed.insert(Operation::Start, Observed::Works);
    expect_state(sb.as_ref(), SandboxState::Running, "after start").await?;

    check_exec(sb.as_ref(), scenario).await?;
    report.observed.insert(Operation::Exec, Observed::Works);

    check_snapshots(sb.as_ref(), &caps, report).await?;
    check_files(sb.as_ref(), &caps, report).await?;

    if caps.supports(Operation::Restart) {
        ensure_running(sb.as_ref()).await?;
        ctx(sb.restart(StopOptions::default()).await, "restart")?;
        expect_state(sb.as_ref(), SandboxState::Running, "after restart").await?;
        report.observed.insert(Operation::Restart, Observed::Works);
    } else {
        expect_unsupported(
            sb.restart(StopOptions::default()).await,
            Operation::Restart,
            report,
        )?;
    }

    check_clone(provider, sb.as_ref(), &caps, report).await?;
    check_export_import(provider, sb.as_ref(), &caps, report).await?;

    ctx(sb.stop(StopOptions::default()).await, "stop")?;
    expect_state(sb.as_ref(), SandboxState::Stopped, "after stop").await?;
    report.observed.insert(Operation::Stop, Observed::Works);

    let sb = check_rename(provider, sb, &caps, report).await?;

    let final_name = sb.name().clone();
    ctx(sb.delete().await, "delete")?;
    report.observed.insert(Operation::Delete, Observed::Works);
    match provider.open(&final_name).await {
        Err(ProviderError::NotFound { .. }) => {}
        Err(e) => return fail(format!("open after delete: expected NotFound, got {e}")),
        Ok(_) => return fail(format!("`{final_name}` can still be opened after delete")),
    }
    let listed = ctx(provider.list().await, "list after delete")?;
    if listed.iter().any(|i| i.name == final_name) {
        return fail(format!("list still shows `{final_name}` after delete"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(works: &[Operation]) -> Report {
        let mut r = Report::default();
        for op in Operation::ALL {
            let seen = if works.contains(&op) {
                Observed::Works
            } else {
                Observed::Unsupported
            };
            r.observed.insert(op, seen);
        }
        r
    }

    #[test]
    fn agreement_is_exact_in_both_directions() {
        let works = [Operation::Create, Operation::Exec];
        let caps: BTreeSet<Operation> = works.iter().copied().collect();
        assert!(report(&works).disagreements(&caps).is_empty());

        let mut over = caps.clone();
        over.insert(Operation::Rename);
        let d = report(&works).disagreements(&over);
        assert_eq!(d, ["rename: listed in capabilities() but Unsupported"]);

        let d =
            report(&[Operation::Create, Operation::Exec, Operation::Clone]).disagreements(&caps);
        assert_eq!(d, ["clone: works but capabilities() does not list it"]);
    }

    #[test]
    fn an_unobserved_operation_is_a_disagreement() {
        let mut r = report(&[]);
        r.observed.remove(&Operation::Import);
        assert_eq!(
            r.disagreements(&BTreeSet::new()),
            ["import: never observed"]
        );
    }
}
