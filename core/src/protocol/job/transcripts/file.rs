//! The transcript file format: cases of blocks, each block some command lines, a `----` line,
//! and the expected output up to the next blank line. Everything else (comments, blank lines)
//! is kept as it is when the expected output is rewritten.

/// One block: commands, and where its expected output sits in the file.
#[derive(Debug)]
pub struct Block {
    /// The command lines with their 1-based line numbers (comments left out).
    pub commands: Vec<(usize, String)>,
    pub expected: Vec<String>,
    /// The 0-based line range of the expected output.
    output: std::ops::Range<usize>,
}

/// One transcript: a fresh protocol and registry, then its blocks in order.
#[derive(Debug)]
pub struct Case {
    pub name: String,
    pub line: usize,
    pub blocks: Vec<Block>,
}

#[derive(Debug)]
pub struct TranscriptFile {
    lines: Vec<String>,
    pub cases: Vec<Case>,
}

impl TranscriptFile {
    pub fn parse(text: &str) -> Result<Self, String> {
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        let mut cases: Vec<Case> = Vec::new();
        let mut i = 0;
        while i < lines.len() {
            let line = lines[i].trim_end();
            if line.is_empty() || line.starts_with('#') {
                i += 1;
                continue;
            }
            if let Some(name) = line.strip_prefix("case ") {
                cases.push(Case { name: name.trim().to_owned(), line: i + 1, blocks: Vec::new() });
                i += 1;
                continue;
            }
            let Some(case) = cases.last_mut() else {
                return Err(format!("line {}: a command before the first `case` line", i + 1));
            };
            let mut commands = Vec::new();
            while i < lines.len() && lines[i].trim_end() != "----" {
                let command = lines[i].trim();
                if command.starts_with("case ") {
                    return Err(format!("line {}: `case` inside a block (missing `----`?)", i + 1));
                }
                if !command.is_empty() && !command.starts_with('#') {
                    commands.push((i + 1, command.to_owned()));
                }
                i += 1;
            }
            if i == lines.len() {
                return Err(format!("line {}: a block without its `----` line", i));
            }
            i += 1;
            let start = i;
            while i < lines.len() && !lines[i].trim().is_empty() {
                i += 1;
            }
            let expected = lines[start..i].to_vec();
            case.blocks.push(Block { commands, expected, output: start..i });
        }
        Ok(TranscriptFile { lines, cases })
    }

    /// The file with each block's expected output replaced by `actual` (one entry per block,
    /// in file order; `None` keeps a block as it is).
    pub fn rewritten(&self, actual: &[Option<Vec<String>>]) -> String {
        let blocks = self.cases.iter().flat_map(|c| &c.blocks);
        let mut out = Vec::with_capacity(self.lines.len());
        let mut at = 0;
        for (block, actual) in blocks.zip(actual) {
            out.extend_from_slice(&self.lines[at..block.output.start]);
            match actual {
                Some(lines) => out.extend(lines.iter().cloned()),
                None => out.extend_from_slice(&self.lines[block.output.clone()]),
            }
            at = block.output.end;
        }
        out.extend_from_slice(&self.lines[at..]);
        let mut text = out.join("\n");
        text.push('\n');
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cases_and_rewrites_only_outputs() {
        let text = "# about\n\ncase one\nme A@-@1\n# note\nstart\n----\nold\nlines\n\n# between\nfire\n----\n\ncase two\nstart\n----\nx\n";
        let file = TranscriptFile::parse(text).unwrap();
        assert_eq!(file.cases.len(), 2);
        assert_eq!(
            file.cases[0].blocks[0].commands,
            vec![(4, "me A@-@1".into()), (6, "start".into())]
        );
        assert_eq!(file.cases[0].blocks[0].expected, vec!["old", "lines"]);
        assert!(file.cases[0].blocks[1].expected.is_empty());
        let actual = vec![Some(vec!["new".to_owned()]), Some(vec!["added".to_owned()]), None];
        assert_eq!(
            file.rewritten(&actual),
            "# about\n\ncase one\nme A@-@1\n# note\nstart\n----\nnew\n\n# between\nfire\n----\nadded\n\ncase two\nstart\n----\nx\n"
        );
        assert!(TranscriptFile::parse("start\n----\n").is_err());
        assert!(TranscriptFile::parse("case a\nstart\n").is_err());
    }
}
