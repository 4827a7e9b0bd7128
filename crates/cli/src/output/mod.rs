//! Everything the CLI prints on stdout: human text and tables (coloured only
//! on a terminal), or JSON. Commands decide *what* to say; this module decides
//! how and whether (`--quiet`, `--json`).

mod progress;
mod style;
mod table;

use std::io::Write;

use serde::Serialize;

pub use progress::Progress;
pub use style::{Style, paint, use_color};
pub use table::Table;

/// How the current command prints.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    /// Colour human output.
    pub color: bool,
    /// Print only essential results.
    pub quiet: bool,
}

impl Output {
    /// Style `text` if colour is on.
    pub fn paint(&self, style: Style, text: &str) -> String {
        paint(self.color, style, text)
    }

    /// Context a human wants and a script does not (suppressed by `--quiet`).
    pub fn info(&self, text: &str) {
        if !self.quiet {
            write_stdout(&format!("{text}\n"));
        }
    }

    /// The result the user asked for (printed even with `--quiet`).
    pub fn data(&self, text: &str) {
        let mut text = text.to_owned();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        write_stdout(&text);
    }

    /// A line that belongs to the human report even with `--quiet`, unless
    /// stdout carries JSON.
    pub fn data_unless_json(&self, json_on_stdout: bool, text: &str) {
        if !json_on_stdout {
            self.data(text);
        }
    }

    /// A table; suppressed by `--quiet` unless `essential`.
    pub fn table(&self, table: &Table, essential: bool) {
        if essential || !self.quiet {
            write_stdout(&table.render(self.color));
        }
    }

    /// Start a progress indicator on stderr (only when stderr is a terminal
    /// and not quiet; it appears after one second).
    pub fn progress(&self, message: &str) -> Progress {
        Progress::start(message, !self.quiet)
    }
}

/// Pretty JSON with a trailing newline, on stdout.
pub fn print_json<T: Serialize>(value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    write_stdout(&format!("{text}\n"));
    Ok(())
}

/// Something went to stdout through this module (or was noted with
/// [`note_stdout`]): a failure then prints no error JSON after it, which
/// would make stdout two objects (`config check --json` prints its report,
/// then fails with exit 2).
static STDOUT_USED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Record that a command wrote to stdout on its own.
pub fn note_stdout() {
    STDOUT_USED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Has anything been printed on stdout?
pub fn stdout_used() -> bool {
    STDOUT_USED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Write to stdout, ignoring a closed pipe (`corral … | head` is normal use;
/// panicking on EPIPE, as `print!` does, is not).
fn write_stdout(text: &str) {
    note_stdout();
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}
