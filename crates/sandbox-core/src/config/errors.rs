//! Configuration errors: each names the file, the line (and column), the
//! section, the field, what was wrong and the fix. Loading collects every
//! error and returns them together.

use std::fmt;

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as the caller named it (for messages only).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column (in characters), when known.
    pub column: Option<usize>,
    /// The section: `profile "dev"`, `host`, `host.verification`, `phases`.
    pub context: Option<String>,
    /// The key (or networks.conf column) at fault.
    pub field: Option<String>,
    /// What is wrong and how to fix it.
    pub problem: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        f.write_str(": ")?;
        if let Some(ctx) = &self.context {
            write!(f, "{ctx}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.problem)
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in one file; nothing was loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The individual errors.
    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    /// Number of errors.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when there are none (never the case for a returned error).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            all => {
                write!(f, "{} problems; nothing was loaded:", all.len())?;
                for e in all {
                    write!(f, "\n  {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConfigErrors {}

/// Byte offset → line and column, for turning parser spans into positions.
#[derive(Debug)]
pub(crate) struct LineIndex<'a> {
    text: &'a str,
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub(crate) fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self { text, starts }
    }

    /// 1-based (line, column) of byte `offset`; columns count characters.
    pub(crate) fn position(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.starts.partition_point(|&s| s <= offset).max(1);
        let start = self.starts[line - 1];
        let col = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count());
        (line, col + 1)
    }
}

/// A problem quotes what was written, which may hold anything: escape it
/// once here, so every configuration error is safe to print.
fn shown(problem: String) -> String {
    crate::text::escape_controls(&problem).into_owned()
}

/// Collects errors for one file, filling in the file name and positions.
#[derive(Debug)]
pub(crate) struct Collector<'a> {
    file: String,
    index: LineIndex<'a>,
    pub(crate) errors: Vec<ConfigError>,
}

impl<'a> Collector<'a> {
    pub(crate) fn new(file: &str, text: &'a str) -> Self {
        Self {
            file: file.to_owned(),
            index: LineIndex::new(text),
            errors: Vec::new(),
        }
    }

    /// Record a problem at byte `offset` (or nowhere in particular).
    pub(crate) fn at(
        &mut self,
        offset: Option<usize>,
        context: Option<&str>,
        field: Option<&str>,
        problem: impl Into<String>,
    ) {
        let (line, column) = match offset {
            Some(o) => {
                let (l, c) = self.index.position(o);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line,
            column,
            context: context.map(|c| shown(c.to_owned())),
            field: field.map(str::to_owned),
            problem: shown(problem.into()),
        });
    }

    /// Record a problem at a 1-based line and column.
    pub(crate) fn at_line(
        &mut self,
        line: usize,
        column: Option<usize>,
        context: Option<&str>,
        field: Option<&str>,
        problem: impl Into<String>,
    ) {
        self.errors.push(ConfigError {
            file: self.file.clone(),
            line: Some(line),
            column,
            context: context.map(|c| shown(c.to_owned())),
            field: field.map(str::to_owned),
            problem: shown(problem.into()),
        });
    }

    /// Every recorded error (the caller has decided loading failed).
    pub(crate) fn into_errors(mut self) -> ConfigErrors {
        // Sections are checked in key order, not file order: report in file
        // order (stable, so one line's problems keep their check order).
        self.errors
            .sort_by_key(|e| (e.line.unwrap_or(usize::MAX), e.column.unwrap_or(0)));
        ConfigErrors(self.errors)
    }

    /// `Ok(value)` when nothing was recorded, else every error.
    pub(crate) fn finish<T>(self, value: impl FnOnce() -> T) -> Result<T, ConfigErrors> {
        if self.errors.is_empty() {
            Ok(value())
        } else {
            Err(self.into_errors())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions() {
        let idx = LineIndex::new("ab\ncdé\n\nx");
        assert_eq!(idx.position(0), (1, 1));
        assert_eq!(idx.position(1), (1, 2));
        assert_eq!(idx.position(3), (2, 1));
        assert_eq!(idx.position(5), (2, 3));
        // "é" is two bytes: the offset after it is column 4.
        assert_eq!(idx.position(7), (2, 4));
        assert_eq!(idx.position(9), (4, 1));
        assert_eq!(idx.position(999), (4, 2));
    }

    #[test]
    fn display_forms() {
        let e = ConfigError {
            file: "corral.toml".into(),
            line: Some(12),
            column: None,
            context: Some("profile \"dev\"".into()),
            field: Some("bridge".into()),
            problem: "too long".into(),
        };
        assert_eq!(
            e.to_string(),
            "corral.toml:12: profile \"dev\": bridge: too long"
        );
        let all = ConfigErrors(vec![e.clone(), e]);
        assert!(
            all.to_string()
                .starts_with("2 problems; nothing was loaded:\n  corral.toml:12")
        );
    }
}
