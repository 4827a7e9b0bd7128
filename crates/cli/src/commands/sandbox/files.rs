//! `corral push NAME LOCAL PATH` and `corral pull NAME PATH [LOCAL]`:
//! files in and out through the provider's file API (ownership checked,
//! bounded, recorded). Replacing a local file is destructive: pull asks on
//! a terminal and needs `--force` otherwise.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use corral_state_files::output::{Existing, is_already_exists, write_output};
use serde::Serialize;

use super::confirm::destructive;
use super::context::{fail, service};
use crate::args::{PullArgs, PushArgs};
use crate::error::{CliError, CmdResult, Outcome};
use crate::output::{Output, Style, print_json};

/// `corral push|pull --json`.
#[derive(Debug, Serialize)]
struct FileJson<'a> {
    schema: &'static str,
    sandbox: &'a str,
    path: &'a str,
    local: &'a Path,
    bytes: u64,
}

fn read_local(local: &Path) -> Result<Vec<u8>, CliError> {
    let limit = corral_service::sandboxes::files::MAX_PUSH_BYTES + 1;
    let mut bytes = Vec::new();
    let read = if local == Path::new("-") {
        std::io::stdin().lock().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(local).and_then(|f| f.take(limit).read_to_end(&mut bytes))
    };
    read.map_err(|e| {
        CliError::usage(anyhow::Error::new(e).context(format!("cannot read {}", local.display())))
    })?;
    Ok(bytes)
}

/// Push.
pub fn push(args: &PushArgs, out: Output) -> CmdResult {
    let mode = u32::from_str_radix(&args.mode, 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| {
            CliError::usage(anyhow::anyhow!(
                "--mode {}: expected octal permission bits such as 644 or 0755",
                args.mode
            ))
        })?;
    let contents = read_local(&args.local)?;
    let (svc, rt) = service(&args.ctx)?;
    let progress = out.progress(&format!("pushing to {}:{}", args.name, args.path));
    let result = rt.block_on(svc.push(&args.name, &args.path, &contents, mode));
    drop(progress);
    result.map_err(fail)?;
    if args.json {
        print_json(&FileJson {
            schema: "corral.sandbox-push.v1",
            sandbox: &args.name,
            path: &args.path,
            local: &args.local,
            bytes: contents.len() as u64,
        })?;
    } else {
        out.data(&format!(
            "{} {} to {}:{} ({} bytes, mode {mode:04o})",
            out.paint(Style::Good, "pushed"),
            args.local.display(),
            args.name,
            args.path,
            contents.len()
        ));
    }
    Ok(Outcome::Ok)
}

/// The mode of a pulled file: its content is the guest's, so it is the
/// caller's alone until they share it.
const PULLED_MODE: u32 = 0o600;

/// Pull.
pub fn pull(args: &PullArgs, out: Output) -> CmdResult {
    let local = match &args.local {
        Some(l) => l.clone(),
        None => {
            let base = args
                .path
                .rsplit('/')
                .next()
                .filter(|b| !b.is_empty() && *b != "." && *b != "..")
                .ok_or_else(|| {
                    CliError::usage(anyhow::anyhow!(
                        "{} names no file; give the local path to write",
                        args.path
                    ))
                })?;
            PathBuf::from(base)
        }
    };
    let to_stdout = local == Path::new("-");
    if to_stdout && args.json {
        return Err(CliError::usage(anyhow::anyhow!(
            "--json and LOCAL `-` both want standard output; give a file"
        )));
    }
    // `symlink_metadata`: a dangling symlink planted there exists too
    // (`exists()` follows it and says no).
    let occupied = !to_stdout && std::fs::symlink_metadata(&local).is_ok();
    if occupied
        && !destructive(
            args.force,
            &format!("replace {}", local.display()),
            &format!(
                "replace {} with {}:{}?",
                local.display(),
                args.name,
                args.path
            ),
        )?
    {
        out.info("nothing pulled");
        return Ok(Outcome::Failed);
    }
    let (svc, rt) = service(&args.ctx)?;
    let progress = out.progress(&format!("pulling {}:{}", args.name, args.path));
    let result = rt.block_on(svc.pull(&args.name, &args.path));
    drop(progress);
    let contents = result.map_err(fail)?;
    if to_stdout {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(&contents)
            .and_then(|()| stdout.flush())
            .map_err(|e| {
                CliError::failure(anyhow::Error::new(e).context("writing standard output"))
            })?;
        return Ok(Outcome::Ok);
    }
    // Never through a symlink, never over a file the operator did not
    // agree to replace (one may appear while the pull runs).
    let existing = if occupied {
        Existing::Replace
    } else {
        Existing::Refuse
    };
    write_output(&local, &contents, PULLED_MODE, existing).map_err(|e| {
        if is_already_exists(&e) {
            CliError::usage(anyhow::anyhow!(
                "{} appeared while pulling; nothing was written (pull again to be asked whether to replace it)",
                local.display()
            ))
        } else {
            CliError::failure(anyhow::Error::new(e))
        }
    })?;
    if args.json {
        print_json(&FileJson {
            schema: "corral.sandbox-pull.v1",
            sandbox: &args.name,
            path: &args.path,
            local: &local,
            bytes: contents.len() as u64,
        })?;
    } else {
        out.data(&format!(
            "{} {}:{} to {} ({} bytes)",
            out.paint(Style::Good, "pulled"),
            args.name,
            args.path,
            local.display(),
            contents.len()
        ));
    }
    Ok(Outcome::Ok)
}
