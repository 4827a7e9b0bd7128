//! `corral export NAME [FILE]` and `corral import FILE [--name N]`. An
//! export says loudly, on standard error, that the file may hold
//! credentials the agent left inside — whatever the output options.

use std::path::PathBuf;

use corral_sandbox_core::sandbox::SandboxInfo;
use corral_service::sandboxes::copies::{EXPORT_WARNING, Exported};
use serde::Serialize;

use super::context::{fail, service};
use super::render;
use crate::args::{ExportArgs, ImportArgs};
use crate::error::{CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

/// `corral export --json`.
#[derive(Debug, Serialize)]
struct ExportJson<'a> {
    schema: &'static str,
    #[serde(flatten)]
    exported: &'a Exported,
    warning: &'static str,
}

/// `corral import --json`.
#[derive(Debug, Serialize)]
struct ImportJson<'a> {
    schema: &'static str,
    file: &'a std::path::Path,
    #[serde(flatten)]
    info: &'a SandboxInfo,
}

/// Export.
pub fn export(args: &ExportArgs, out: Output) -> CmdResult {
    let file = args
        .file
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{}.tar.gz", args.name)));
    let (svc, rt) = service(&args.ctx)?;
    let progress = out.progress(&format!("exporting {} to {}", args.name, file.display()));
    let result = rt.block_on(svc.export(&args.name, &file));
    drop(progress);
    let done = result.map_err(fail)?;
    // Loud, and on stderr so it reaches a person even when stdout is a pipe.
    eprintln!(
        "{} {EXPORT_WARNING}",
        render::loud(&format!(
            "WARNING: {} (sandbox {}) may hold credentials:",
            done.file.display(),
            done.sandbox
        )),
    );
    if args.json {
        print_json(&ExportJson {
            schema: "corral.sandbox-export.v1",
            exported: &done,
            warning: EXPORT_WARNING,
        })?;
    } else {
        out.data(&format!(
            "{} {} to {} ({} bytes, mode 0600)",
            out.paint(Style::Good, "exported"),
            done.sandbox,
            done.file.display(),
            done.bytes
        ));
    }
    Ok(Outcome::Ok)
}

/// Import.
pub fn import(args: &ImportArgs, out: Output) -> CmdResult {
    let (svc, rt) = service(&args.ctx)?;
    let progress = out.progress(&format!("importing {}", args.file.display()));
    let result = rt.block_on(svc.import(
        &args.file,
        args.name.as_deref(),
        Some(corral_service::callers::current_uid()),
    ));
    drop(progress);
    let info = result.map_err(fail)?;
    if args.json {
        print_json(&ImportJson {
            schema: "corral.sandbox-import.v1",
            file: &args.file,
            info: &info,
        })?;
    } else {
        out.data(&format!(
            "{} {} from {} on {}; it is {} (`corral start {}` passes the start gate and the canary)",
            out.paint(Style::Good, "imported"),
            info.name,
            args.file.display(),
            info.profile
                .as_ref()
                .map_or_else(|| "no network".to_owned(), |p| format!("profile {p}")),
            info.state,
            info.name
        ));
    }
    Ok(Outcome::Ok)
}
