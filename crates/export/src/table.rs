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

    /// Adds a row. A cell may hold outside text (a point's label from a
    /// spec, a server's name): each is kept to one line with its control
    /// characters shown as escapes, so no cell breaks the table or carries
    /// an escape sequence.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(
            cells
                .into_iter()
                .map(|c| infer_bench_results::outside::terminal(&c).into_owned())
                .collect(),
        );
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Every column, plain.
    pub fn render(&self) -> String {
        let all: Vec<usize> = (0..self.header.len()).collect();
        self.render_columns(&all, false)
    }

    /// The table as `look` says: narrow (see [`Table::fit`]) unless wide,
    /// coloured cells when colour is on. Returns the text and the columns
    /// left out to fit.
    pub fn render_look(&self, look: crate::term::Look, drop: &[&str]) -> (String, Vec<String>) {
        let (columns, hidden) = if look.wide {
            ((0..self.header.len()).collect(), Vec::new())
        } else {
            self.fit(crate::term::WIDTH, drop)
        };
        (self.render_columns(&columns, look.color), hidden)
    }

    /// The columns to show in `width` columns: the ones named in `drop`
    /// go first, those that hold nothing ("-" in every row) silently, then
    /// one at a time in `drop`'s order until the table fits. Other columns
    /// always stay. Returns the kept columns' indices and the names of the
    /// columns with something in them that were left out.
    pub fn fit(&self, width: usize, drop: &[&str]) -> (Vec<usize>, Vec<String>) {
        let index = |name: &str| self.header.iter().position(|h| h == name);
        let empty = |i: usize| {
            self.rows
                .iter()
                .all(|r| r.get(i).is_none_or(|c| c.is_empty() || c == "-"))
        };
        let mut keep: Vec<bool> = vec![true; self.header.len()];
        for i in drop.iter().filter_map(|d| index(d)) {
            if empty(i) {
                keep[i] = false;
            }
        }
        let mut hidden = Vec::new();
        for i in drop.iter().filter_map(|d| index(d)) {
            let kept: Vec<usize> = (0..keep.len()).filter(|&j| keep[j]).collect();
            if self.width_of(&kept) <= width {
                break;
            }
            if keep[i] {
                keep[i] = false;
                hidden.push(self.header[i].clone());
            }
        }
        ((0..keep.len()).filter(|&j| keep[j]).collect(), hidden)
    }

    fn widths(&self) -> Vec<usize> {
        (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(i))
                    .chain(std::iter::once(&self.header[i]))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// The width of the widest line with these columns (lines are
    /// trimmed, so at most every column's widest cell and the gaps).
    fn width_of(&self, columns: &[usize]) -> usize {
        let widths = self.widths();
        columns.iter().map(|&i| widths[i]).sum::<usize>() + 2 * columns.len().saturating_sub(1)
    }

    fn render_columns(&self, columns: &[usize], color: bool) -> String {
        let widths = self.widths();
        let mut out = String::new();
        let mut line = |cells: &[String], header: bool| {
            let mut parts = Vec::with_capacity(columns.len());
            for (k, &i) in columns.iter().enumerate() {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = " ".repeat(widths[i].saturating_sub(c.chars().count()));
                let shown = match crate::term::tone(c).filter(|_| color && !header) {
                    Some(tone) => crate::term::paint(c, tone),
                    None => c.to_string(),
                };
                parts.push(match self.align[i] {
                    Align::Left if k + 1 == columns.len() => shown,
                    Align::Left => format!("{shown}{pad}"),
                    Align::Right => format!("{pad}{shown}"),
                });
            }
            out.push_str(parts.join("  ").trim_end());
            out.push('\n');
        };
        line(&self.header, true);
        for r in &self.rows {
            line(r, false);
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

    #[test]
    fn fits_by_leaving_out_columns_in_order() {
        let mut t = Table::new(&[
            ("name", Align::Left),
            ("a", Align::Right),
            ("cost", Align::Right),
            ("wide column", Align::Right),
            ("v", Align::Left),
        ]);
        t.row(vec![
            "x".into(),
            "1".into(),
            "-".into(),
            "123456789".into(),
            "INVALID".into(),
        ]);
        // Wide enough: only the empty column goes, and says nothing.
        let (cols, hidden) = t.fit(80, &["cost", "wide column"]);
        assert_eq!(cols, [0, 1, 3, 4]);
        assert!(hidden.is_empty());
        let (text, _) = t.render_look(crate::term::Look::default(), &["cost", "wide column"]);
        assert_eq!(
            text,
            "name  a  wide column  v\nx     1    123456789  INVALID\n"
        );
        assert_eq!(t.width_of(&cols), "x     1    123456789  INVALID".len());
        // Narrow: the named column goes, and is named.
        let (cols, hidden) = t.fit(16, &["cost", "wide column"]);
        assert_eq!(cols, [0, 1, 4]);
        assert_eq!(hidden, ["wide column"]);
        // Wide keeps everything; colour paints the verdict, not the header.
        let look = crate::term::Look {
            color: true,
            wide: true,
        };
        let (text, hidden) = t.render_look(look, &["cost"]);
        assert!(hidden.is_empty());
        assert!(
            text.starts_with("name  a  cost  wide column  v\n"),
            "{text}"
        );
        assert!(text.ends_with("\x1b[33mINVALID\x1b[0m\n"), "{text:?}");
    }
}
