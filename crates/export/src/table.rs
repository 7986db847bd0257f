//! A plain-text table with aligned columns, for terminal output.

/// Column alignment.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// A table built row by row, rendered with two spaces between columns.
pub struct Table {
    header: Vec<String>,
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[(&str, Align)]) -> Self {
        Table {
            header: header.iter().map(|h| h.0.to_string()).collect(),
            align: header.iter().map(|h| h.1).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    pub fn render(&self) -> String {
        let n = self.header.len();
        let width = |i: usize| {
            self.rows
                .iter()
                .filter_map(|r| r.get(i))
                .chain(std::iter::once(&self.header[i]))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        };
        let widths: Vec<usize> = (0..n).map(width).collect();
        let mut out = String::new();
        let mut line = |cells: &[String]| {
            let mut parts = Vec::with_capacity(n);
            for (i, (&width, &align)) in widths.iter().zip(&self.align).enumerate() {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = width.saturating_sub(c.chars().count());
                parts.push(match align {
                    Align::Left if i + 1 == n => c.to_string(),
                    Align::Left => format!("{c}{}", " ".repeat(pad)),
                    Align::Right => format!("{}{c}", " ".repeat(pad)),
                });
            }
            out.push_str(parts.join("  ").trim_end());
            out.push('\n');
        };
        line(&self.header);
        for r in &self.rows {
            line(r);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligns() {
        let mut t = Table::new(&[("name", Align::Left), ("n", Align::Right)]);
        t.row(vec!["a".into(), "10".into()]);
        t.row(vec!["long".into(), "2".into()]);
        assert_eq!(t.render(), "name   n\na     10\nlong   2\n");
    }
}
