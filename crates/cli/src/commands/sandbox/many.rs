//! Verbs that take several sandboxes (`NAME…` or `--all`): each is acted on
//! in turn; one failure does not stop the others, and the command fails
//! (exit 1) when any did. With one name its error is the command's error,
//! with `--json` too: corrald's error body, as corrald answers the same
//! action on that sandbox (docs/cli.md says why).

use std::future::Future;

use corral_sandbox_core::sandbox::{SandboxInfo, SandboxState};
use corral_service::{SandboxService, ServiceError};

use corral_service::shapes::{ActionReport, ActionResult};

use super::context::fail;
use crate::args::PowerArgs;
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

/// The sandboxes a verb acts on, and how they were asked for.
#[derive(Debug, Clone)]
pub struct Asked {
    /// Their names, in order.
    pub names: Vec<String>,
    /// By `--all`: the caller did not name them, so even one is a result
    /// row rather than the command's error.
    pub all: bool,
}

impl Asked {
    /// The sandboxes named on the command line.
    pub fn named(names: &[String]) -> Self {
        Self {
            names: names.to_vec(),
            all: false,
        }
    }

    /// One sandbox, named: its failure is the command's.
    fn one(&self) -> bool {
        self.names.len() == 1 && !self.all
    }
}

/// The names a verb acts on: those given, or with `--all` every sandbox
/// of this state directory (and, for a caller who is not root, their own)
/// whose state `wanted` accepts.
pub fn names(
    svc: &SandboxService,
    rt: &tokio::runtime::Runtime,
    args: &PowerArgs,
    wanted: fn(SandboxState) -> bool,
) -> Result<Asked, crate::error::CliError> {
    if !args.all {
        return Ok(Asked::named(&args.names));
    }
    // `--all` is this state directory's sandboxes (those its store made),
    // not every corral instance the backend holds: another state directory
    // (another operator, a test, a lab) may have stopped one on purpose.
    // A caller who is not root gets only their own.
    let (_, store) = super::context::store(&args.ctx)?;
    let records = store.sandboxes().map_err(|e| {
        crate::error::CliError::failure(anyhow::Error::new(e).context("cannot read corral's store"))
    })?;
    let uid = corral_state_files::effective_uid();
    let ours: std::collections::BTreeSet<String> = records
        .into_iter()
        .filter(|r| uid == 0 || r.owner == Some(uid))
        .map(|r| r.name)
        .collect();
    let mut all: Vec<SandboxInfo> = rt.block_on(svc.list()).map_err(fail)?;
    all.sort_by(|a, b| a.name.cmp(&b.name));
    let names = all
        .into_iter()
        .filter(|i| wanted(i.state) && ours.contains(i.name.as_str()))
        .map(|i| i.name.to_string())
        .collect();
    Ok(Asked { names, all: true })
}

/// Run `verb` on every name and report.
pub fn each<F, Fut>(
    out: &Output,
    rt: &tokio::runtime::Runtime,
    action: &str,
    done: &str,
    asked: &Asked,
    json: bool,
    mut verb: F,
) -> CmdResult
where
    F: FnMut(String) -> Fut,
    Fut: Future<Output = Result<Option<SandboxState>, ServiceError>>,
{
    let names = &asked.names;
    if names.is_empty() {
        if json {
            print_json(&ActionReport::new(action, Vec::new()))?;
        } else {
            out.info(&format!("no sandbox to {action}"));
        }
        return Ok(Outcome::Ok);
    }
    let single = asked.one();
    let mut results = Vec::new();
    for name in names {
        let progress = out.progress(&format!("{action} {name}"));
        let r = rt.block_on(verb(name.clone()));
        drop(progress);
        match r {
            Ok(state) => {
                if !json {
                    out.data(&format!("{} {name}", out.paint(Style::Good, done)));
                }
                results.push(ActionResult::done(name, state));
            }
            Err(e) if single => return Err(fail(e)),
            Err(e) => {
                let row = ActionResult::failed(name, &e);
                if !json && let Some(error) = &row.error {
                    eprintln!("error: {name}: {}", error.message);
                }
                results.push(row);
            }
        }
    }
    let all_ok = results.iter().all(|r| r.ok);
    if json {
        print_json(&ActionReport::new(action, results))?;
    }
    Ok(if all_ok { Outcome::Ok } else { Outcome::Failed })
}
