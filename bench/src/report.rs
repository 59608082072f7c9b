//! BENCHMARKS.md: a header (how to regenerate, the machine, the targets at a glance) and one
//! block per section between markers, so that running one section replaces only its block and
//! keeps the others. Each block says when, how and on which commit it was measured, and carries
//! its target verdicts as a JSON comment from which the header's summary is rebuilt.

use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{proc, Error};

/// The sections, in report order: (id, title).
pub const SECTIONS: &[(&str, &str)] = &[
    ("precision", "1. Trigger precision at scale"),
    ("memory", "2. Memory and threads per job"),
    ("registry", "3. Registry load"),
    ("projection", "3b. Registry load of large clusters, in the simulator"),
    ("failover", "4. Failover latency"),
    ("sim", "5. Simulator throughput"),
    ("micro", "6. Cron and sharding micro-benchmarks"),
];

/// Whether a figure meets its target (`docs/targets.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Status {
    Met,
    Missed,
    NotMeasured,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Met => "met",
            Status::Missed => "**missed**",
            Status::NotMeasured => "not measured",
        }
    }
}

/// One target checked against one measured figure.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    pub target: String,
    pub figure: String,
    pub status: Status,
    /// Why it missed or could not be measured; empty when met.
    pub note: String,
}

impl Verdict {
    pub fn new(target: impl Into<String>, figure: impl Into<String>, met: bool) -> Self {
        Verdict {
            target: target.into(),
            figure: figure.into(),
            status: if met { Status::Met } else { Status::Missed },
            note: String::new(),
        }
    }
    pub fn not_measured(target: impl Into<String>, why: impl Into<String>) -> Self {
        Verdict {
            target: target.into(),
            figure: "-".into(),
            status: Status::NotMeasured,
            note: why.into(),
        }
    }
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }
}

/// A measured section: its markdown and its verdicts.
#[derive(Debug, Default)]
pub struct Section {
    pub body: String,
    pub verdicts: Vec<Verdict>,
}

/// When and how a section was measured.
#[derive(Debug, Clone)]
pub struct Provenance {
    pub date: String,
    pub command: String,
    pub commit: String,
    pub load_before: f64,
}

impl Provenance {
    pub fn now(command: &str) -> Self {
        let commit = proc::command_output("git", &["rev-parse", "--short", "HEAD"])
            .unwrap_or_else(|| "unknown".into());
        let dirty = proc::command_output("git", &["status", "--porcelain", "--untracked-files=no"])
            .is_some_and(|s| !s.is_empty());
        Provenance {
            date: utc_now(),
            command: command.to_owned(),
            commit: if dirty { format!("{commit} + local changes") } else { commit },
            load_before: proc::load_average(),
        }
    }
}

/// The current time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    chrono::DateTime::from_timestamp(secs, 0)
        .map_or_else(|| "unknown date".into(), |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
}

fn begin_marker(id: &str) -> String {
    format!("<!-- section:{id} -->")
}

fn end_marker(id: &str) -> String {
    format!("<!-- /section:{id} -->")
}

const VERDICTS: &str = "<!-- verdicts: ";

/// The block of one section, markers included.
fn render_section(id: &str, title: &str, section: &Section, provenance: &Provenance) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", begin_marker(id));
    let _ = writeln!(out, "## {title}\n");
    let _ = writeln!(
        out,
        "_Measured {} with `{}` on commit {}; load average {:.2} at the start._\n",
        provenance.date, provenance.command, provenance.commit, provenance.load_before
    );
    out.push_str(section.body.trim_end());
    out.push_str("\n\n");
    let json = serde_json::to_string(&section.verdicts).unwrap_or_else(|_| "[]".into());
    // `--` may not appear inside an HTML comment.
    let _ = writeln!(out, "{VERDICTS}{} -->", json.replace("--", "-\\u002d"));
    let _ = writeln!(out, "{}", end_marker(id));
    out
}

/// The blocks of an existing report, by section id.
fn existing_blocks(text: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    for (id, _) in SECTIONS {
        let (begin, end) = (begin_marker(id), end_marker(id));
        if let (Some(b), Some(e)) = (text.find(&begin), text.find(&end)) {
            if b < e {
                blocks.push(((*id).to_owned(), text[b..e + end.len()].to_owned() + "\n"));
            }
        }
    }
    blocks
}

fn verdicts_of(block: &str) -> Vec<Verdict> {
    block
        .lines()
        .find_map(|l| l.strip_prefix(VERDICTS)?.strip_suffix(" -->"))
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default()
}

fn header(command: &str, blocks: &[(String, String)]) -> String {
    let mut out = String::new();
    out.push_str("# shardcron benchmarks\n\n");
    out.push_str(
        "Generated by the `shardcron-bench` crate (`bench/`). To regenerate the whole report \
         (starts and stops a throw-away ZooKeeper and etcd on loopback, about 40 minutes):\n\n\
         ```sh\nscripts/bench.sh all            # or: scripts/bench.sh all --quick (about 8 minutes)\n\
         scripts/bench.sh precision      # one section: precision, memory, registry, failover, sim, micro\n```\n\n\
         `cargo run --release -p shardcron-bench -- <section>` does the same without starting the \
         servers (the ZooKeeper and etcd rows then read `SHARDCRON_ZK` / `SHARDCRON_ETCD` or say \
         they were not measured). Each section replaces only its own block of this file.\n\n\
         The machine is shared and noisy: compare figures side by side within a section (they \
         come from one run of one binary), not across sections or runs. Latencies are \
         percentiles of every sample; CPU is user + system time (getrusage) over the measured \
         window; memory is VmHWM / VmRSS from `/proc/self/status` of a child process that runs \
         one scheduler alone.\n\n",
    );
    let _ = writeln!(out, "Last written {} by `{command}`.  ", utc_now());
    let _ = writeln!(out, "Machine: {}.\n", proc::machine());
    out.push_str("## Targets (docs/targets.md) at a glance\n\n");
    out.push_str("| section | target | measured | verdict | why |\n|---|---|---|---|---|\n");
    for (id, title) in SECTIONS {
        let Some((_, block)) = blocks.iter().find(|(b, _)| b == id) else {
            let _ = writeln!(out, "| {title} | - | - | not run yet | |");
            continue;
        };
        for v in verdicts_of(block) {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                title.split_once(". ").map_or(*title, |t| t.1),
                v.target,
                v.figure,
                v.status.label(),
                v.note
            );
        }
    }
    out.push('\n');
    out
}

/// Writes `section` (id `id`) into the report at `path`, keeping the other sections' blocks.
pub fn write(
    path: &Path,
    id: &str,
    section: &Section,
    provenance: &Provenance,
) -> Result<(), Error> {
    let title = SECTIONS
        .iter()
        .find(|(s, _)| *s == id)
        .map(|(_, t)| *t)
        .ok_or_else(|| crate::err(format!("unknown section {id}")))?;
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let mut blocks = existing_blocks(&old);
    let block = render_section(id, title, section, provenance);
    match blocks.iter_mut().find(|(b, _)| b == id) {
        Some(slot) => slot.1 = block,
        None => blocks.push((id.to_owned(), block)),
    }
    let mut text = header(&provenance.command, &blocks);
    for (sid, _) in SECTIONS {
        if let Some((_, block)) = blocks.iter().find(|(b, _)| b == sid) {
            text.push_str(block);
            text.push('\n');
        }
    }
    std::fs::write(path, text.trim_end().to_owned() + "\n")
        .map_err(|e| crate::err(format!("write {}: {e}", path.display())))
}

/// Formats an integer with thousands separators (`12,345`).
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Microseconds as milliseconds with adaptive precision (`0.12 ms`, `3.4 ms`, `512 ms`).
pub fn ms(micros: u64) -> String {
    let ms = micros as f64 / 1000.0;
    if ms < 1.0 {
        format!("{ms:.2} ms")
    } else if ms < 10.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{} ms", thousands(ms.round() as u64))
    }
}

/// KiB as MiB with one decimal.
pub fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(ms(120), "0.12 ms");
        assert_eq!(ms(3_450), "3.5 ms");
        assert_eq!(ms(1_234_000), "1,234 ms");
    }

    #[test]
    fn a_section_replaces_only_its_block_and_keeps_its_verdicts() {
        let dir = std::env::temp_dir().join(format!("shardcron-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("B.md");
        let p = Provenance {
            date: "d".into(),
            command: "c".into(),
            commit: "x".into(),
            load_before: 1.0,
        };
        let one = |body: &str, met| Section {
            body: body.into(),
            verdicts: vec![Verdict::new("t -- x", "f", met)],
        };
        write(&path, "memory", &one("first memory", true), &p).expect("write");
        write(&path, "precision", &one("precision body", false), &p).expect("write");
        write(&path, "memory", &one("second memory", true), &p).expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains("second memory") && !text.contains("first memory"));
        assert!(text.find("precision body") < text.find("second memory"), "report order");
        assert!(text.contains("| Trigger precision at scale | t -- x | f | **missed** |"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
