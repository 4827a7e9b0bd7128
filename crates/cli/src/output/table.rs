//! Plain-text tables: left-aligned columns separated by two spaces, a bold
//! header, widths measured without colour escapes.

use super::style::{Style, paint, visible_width};

/// A table being built row by row.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new<I, S>(header: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Append a row; cells may already carry colour.
    pub fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.rows.push(cells.into_iter().map(Into::into).collect());
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Render with a trailing newline after each line.
    pub fn render(&self, color: bool) -> String {
        let columns = self
            .rows
            .iter()
            .map(Vec::len)
            .chain([self.header.len()])
            .max()
            .unwrap_or(0);
        let mut widths = vec![0; columns];
        for row in self.rows.iter().chain([&self.header]) {
            for (i, cell) in row.iter().enumerate() {
                widths[i] = widths[i].max(visible_width(cell));
            }
        }
        let mut out = String::new();
        let header: Vec<String> = self
            .header
            .iter()
            .map(|h| paint(color, Style::Bold, h))
            .collect();
        push_line(&mut out, &header, &widths);
        for row in &self.rows {
            push_line(&mut out, row, &widths);
        }
        out
    }
}

fn push_line(out: &mut String, cells: &[String], widths: &[usize]) {
    let mut line = String::new();
    for (i, cell) in cells.iter().enumerate() {
        if i > 0 {
            line.push_str("  ");
        }
        line.push_str(cell);
        if i + 1 < cells.len() {
            let pad = widths[i].saturating_sub(visible_width(cell));
            line.extend(std::iter::repeat_n(' ', pad));
        }
    }
    out.push_str(line.trim_end());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(["probe", "verdict"]);
        t.row(["tcp 203.0.113.10:443", "pass"]);
        t.row(["x", "fail"]);
        let expected = format!(
            "probe{}verdict\ntcp 203.0.113.10:443  pass\nx{}fail\n",
            " ".repeat(17),
            " ".repeat(21)
        );
        assert_eq!(t.render(false), expected);
    }

    #[test]
    fn colour_does_not_shift_columns() {
        let mut t = Table::new(["a", "b"]);
        t.row([paint(true, Style::Good, "pass"), "x".to_owned()]);
        t.row(["longer".to_owned(), "y".to_owned()]);
        let plain: Vec<String> = t
            .render(true)
            .lines()
            .map(|l| {
                l.replace("\x1b[32m", "")
                    .replace("\x1b[1m", "")
                    .replace("\x1b[0m", "")
            })
            .collect();
        assert_eq!(plain, ["a       b", "pass    x", "longer  y"]);
    }

    proptest! {
        /// Every rendered line starts each column at the same offset.
        #[test]
        fn second_column_is_aligned(rows in proptest::collection::vec(("[a-z]{0,12}", "[a-z]{1,5}"), 1..8)) {
            let mut t = Table::new(["first", "second"]);
            for (a, b) in &rows {
                t.row([a.clone(), b.clone()]);
            }
            let text = t.render(false);
            let width = rows.iter().map(|(a, _)| a.len()).max().unwrap_or(0).max(5);
            for (line, (_, b)) in text.lines().skip(1).zip(&rows) {
                prop_assert_eq!(&line[width + 2..], b.as_str());
            }
        }
    }
}
