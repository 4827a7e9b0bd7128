//! Sandboxes as tables and JSON (schemas in docs/json-schema.md).

use corral_sandbox_core::sandbox::{SandboxInfo, SandboxState};
use serde::Serialize;

use crate::output::{Output, Style, Table};

/// The state, coloured.
pub fn state(out: &Output, s: SandboxState) -> String {
    match s {
        SandboxState::Running => out.paint(Style::Good, "running"),
        SandboxState::Stopped => s.to_string(),
        SandboxState::Error | SandboxState::Unknown => out.paint(Style::Bad, &s.to_string()),
        _ => out.paint(Style::Warn, &s.to_string()),
    }
}

/// One row per sandbox.
pub fn table(out: &Output, infos: &[SandboxInfo]) -> Table {
    let mut t = Table::new(["name", "state", "profile", "type", "addresses", "image"]);
    for i in infos {
        t.row([
            i.name.to_string(),
            state(out, i.state),
            i.profile
                .as_ref()
                .map_or_else(|| "(no network)".to_owned(), ToString::to_string),
            match i.instance_type {
                corral_sandbox_core::sandbox::InstanceType::Container => "container".to_owned(),
                corral_sandbox_core::sandbox::InstanceType::Vm => "vm".to_owned(),
            },
            if i.addresses.is_empty() {
                "-".to_owned()
            } else {
                i.addresses
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            },
            i.image.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    t
}

/// The outcome of a verb on one of several sandboxes.
#[derive(Debug, Serialize)]
pub struct ActionResult {
    /// The sandbox.
    pub name: String,
    /// It worked.
    pub ok: bool,
    /// Its state afterwards, when known.
    pub state: Option<SandboxState>,
    /// The error (with causes) when it did not.
    pub error: Option<String>,
}

/// `corral start|stop|restart|rm --json`.
#[derive(Debug, Serialize)]
pub struct ActionJson<'a> {
    /// `corral.sandbox-action.v1`.
    pub schema: &'static str,
    /// `start`, `stop`, `restart` or `rm`.
    pub action: &'a str,
    /// One result per sandbox.
    pub results: &'a [ActionResult],
}

/// The error and every cause on one line.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}
