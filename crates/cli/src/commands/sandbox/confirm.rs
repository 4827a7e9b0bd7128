//! Destructive verbs ask first: a `[y/N]` question on a terminal; without
//! one, `--force` is required, and its absence is a usage error (exit 2)
//! before anything is done.

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use crate::error::CliError;

/// May the destructive action go ahead? `refusal` names it for the
/// no-terminal error ("delete demo"); `question` is asked on a terminal.
/// `Ok(false)`: the user said no.
pub fn destructive(force: bool, refusal: &str, question: &str) -> Result<bool, CliError> {
    if force {
        return Ok(true);
    }
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(anyhow::anyhow!(
            "refusing to {refusal} without confirmation: standard input is not a terminal; pass --force to do it without asking"
        )));
    }
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{question} [y/N] ");
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return Ok(false);
    }
    Ok(matches!(
        line.trim().to_ascii_lowercase().as_str(),
        "y" | "yes"
    ))
}
