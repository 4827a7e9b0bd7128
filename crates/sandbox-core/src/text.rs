//! Refused values are shown to people: on an operator's terminal, in logs.
//! A value may come from anyone (a configuration author, an API caller, a
//! sandbox), so before it is embedded in a message every character that a
//! terminal would act on rather than print is written as an escape: C0 and
//! C1 controls (line breaks, ESC and so every ANSI sequence), DEL, and the
//! invisible format characters that reorder or hide text (bidirectional
//! overrides and isolates, zero-width characters, the BOM). A forged
//! "ok … valid" line cannot survive that.

use std::borrow::Cow;
use std::fmt;

/// True for a character a terminal acts on or hides rather than prints.
pub fn is_unsafe_to_show(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}'
        )
}

/// `s` with every character [`is_unsafe_to_show`] written as an escape
/// (`\n`, `\r`, `\t`, `\u{1b}`…); borrowed when there is none.
pub fn escape_controls(s: &str) -> Cow<'_, str> {
    escape_except(s, &[])
}

/// Like [`escape_controls`], keeping the characters in `keep` (a message
/// made of several lines keeps its own `\n`).
pub fn escape_except<'a>(s: &'a str, keep: &[char]) -> Cow<'a, str> {
    if !s
        .chars()
        .any(|c| is_unsafe_to_show(c) && !keep.contains(&c))
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if is_unsafe_to_show(c) && !keep.contains(&c) {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A value shown escaped, for `format!` and `#[error]` strings.
#[derive(Debug, Clone, Copy)]
pub struct Shown<'a>(pub &'a str);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escape_controls(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_format_characters_are_escaped() {
        assert_eq!(escape_controls("plain ünï"), "plain ünï");
        assert!(matches!(escape_controls("plain"), Cow::Borrowed(_)));
        assert_eq!(
            escape_controls("a\nok x: valid\u{1b}[2K\r\u{202e}"),
            "a\\nok x: valid\\u{1b}[2K\\r\\u{202e}"
        );
        assert_eq!(escape_except("a\nb\u{1b}", &['\n']), "a\nb\\u{1b}");
        assert_eq!(Shown("x\u{7f}").to_string(), "x\\u{7f}");
    }

    proptest::proptest! {
        #[test]
        fn nothing_unsafe_survives(s in "\\PC*|[\\x00-\\x1f\\x7f-\\u{9f}a]*") {
            proptest::prop_assert!(!escape_controls(&s).chars().any(is_unsafe_to_show));
        }
    }
}
