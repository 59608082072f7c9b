//! Plain-text tables: columns padded to their widest cell, two spaces apart, a header line in
//! capitals. Empty values show as `-` so that every row has the same number of words.

/// A table being built.
#[derive(Debug)]
pub struct Table {
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Table { rows: vec![headers.iter().map(|h| h.to_string()).collect()] }
    }

    pub fn row(&mut self, cells: Vec<String>) -> &mut Self {
        self.rows
            .push(cells.into_iter().map(|c| if c.is_empty() { "-".into() } else { c }).collect());
        self
    }

    /// The table as text, one line per row.
    pub fn render(&self) -> String {
        let columns = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..columns)
            .map(|c| {
                self.rows
                    .iter()
                    .filter_map(|r| r.get(c))
                    .map(|s| s.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in &self.rows {
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate() {
                if c + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    let pad = widths[c] - cell.chars().count() + 2;
                    line.push_str(cell);
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// `key  value` lines, keys padded.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    pairs
        .iter()
        .map(|(k, v)| {
            let v = if v.is_empty() { "-" } else { v.as_str() };
            format!("{k:width$}  {v}\n")
        })
        .collect()
}

/// A serde enum's name (`SHARDING_FLAG`) as text.
pub fn name(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_empty_cells_show_a_dash() {
        let mut t = Table::new(&["JOB", "STATUS", "CRON"]);
        t.row(vec!["orders".into(), "OK".into(), "0/5 * * * * ?".into()]);
        t.row(vec!["x".into(), "SHARDING_FLAG".into(), String::new()]);
        assert_eq!(
            t.render(),
            "JOB     STATUS         CRON\n\
             orders  OK             0/5 * * * * ?\n\
             x       SHARDING_FLAG  -\n"
        );
    }
}
