//! Colour: ANSI styles applied only when the output is a terminal that wants them.

use std::io::IsTerminal;

use crate::args::ColorChoice;

/// A style for one piece of text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// A good outcome (pass, ok, present).
    Good,
    /// A bad outcome (fail, drift, missing).
    Bad,
    /// Something to look at but not a failure (not run, skipped).
    Warn,
    /// Headers and labels.
    Bold,
}

impl Style {
    fn code(self) -> &'static str {
        match self {
            Style::Good => "32",
            Style::Bad => "31",
            Style::Warn => "33",
            Style::Bold => "1",
        }
    }
}

/// Decide whether to colour stdout: `auto` means a terminal, `NO_COLOR`
/// unset and `TERM` not `dumb` (the conventions users set to opt out).
pub fn use_color(choice: ColorChoice) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                && std::env::var("TERM").map_or(true, |t| t != "dumb")
        }
    }
}

/// Wrap `text` in the style's escape codes when `color` is on.
pub fn paint(color: bool, style: Style, text: &str) -> String {
    if color {
        format!("\x1b[{}m{text}\x1b[0m", style.code())
    } else {
        text.to_owned()
    }
}

/// The number of terminal columns `text` takes, ignoring ANSI escapes.
pub fn visible_width(text: &str) -> usize {
    let mut width = 0;
    let mut in_escape = false;
    for c in text.chars() {
        match (in_escape, c) {
            (false, '\x1b') => in_escape = true,
            (true, 'm') => in_escape = false,
            (true, _) => {}
            (false, _) => width += 1,
        }
    }
    width
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paint_is_plain_without_color() {
        assert_eq!(paint(false, Style::Bad, "fail"), "fail");
        assert_eq!(paint(true, Style::Bad, "fail"), "\x1b[31mfail\x1b[0m");
    }

    #[test]
    fn width_ignores_escapes() {
        assert_eq!(visible_width(&paint(true, Style::Good, "pass")), 4);
        assert_eq!(visible_width("héllo"), 5);
    }

    #[test]
    fn explicit_choices_win() {
        assert!(use_color(ColorChoice::Always));
        assert!(!use_color(ColorChoice::Never));
    }
}
