//! Transcript tests of [`JobProtocol`](super::JobProtocol): text files under
//! `core/src/protocol/job/testdata/` of inputs and the actions the protocol answers them with,
//! run by the one test [`transcripts`] (raft-rs's `testdata/` style).
//!
//! ```sh
//! CARGO_BUILD_JOBS=1 cargo test -p shardcron-core --lib transcripts           # check
//! REWRITE=1 CARGO_BUILD_JOBS=1 cargo test -p shardcron-core --lib transcripts # re-bless
//! TRANSCRIPT=failover cargo test -p shardcron-core --lib transcripts          # one file or case
//! ```
//!
//! `REWRITE=1` replaces every expected output with what the protocol does now and leaves
//! everything else of the files (commands, comments) as it is: after a protocol change, rewrite,
//! then review `git diff core/src/protocol/job/testdata` as the change's effect.
//!
//! # Files
//!
//! A file holds cases; `case NAME` starts one with a fresh protocol, registry and view. A case
//! is blocks: command lines, a `----` line, then the expected output up to the next blank line.
//! Lines starting with `#` are comments (`# SUSPECT: ...` marks behaviour that looks wrong
//! against `GUARANTEES.md` or the docs; the transcript records it as it is).
//!
//! # The world
//!
//! The job is `j` (paths print relative to `/j/`); this instance is `A@-@1` on server `A` unless
//! `me` says otherwise. The registry is a model of the contract (versions, ephemeral owners,
//! all-or-nothing transactions, typed errors), so requests get the replies a server would give:
//! a write the view has not seen makes a versioned transaction fail as it would for real. This
//! process's ephemerals belong to its session `A@-@1#1` (`#2` after an expiry, ...).
//!
//! Requests are answered at once (auto mode) and their success is recorded in the view as the
//! runtime does; their watch events, and those of writes by others, are delivered after the
//! chain of replies settles (each batch: the view applies it, then the job hears one `Changed`
//! of the batch's nodes, as the runtime hands over the changes queued together), unless the
//! watch is held.
//!
//! # Commands
//!
//! Setup (before the first input; nothing is printed, the view is in sync):
//! - `me ID`; `job [cron=EXPR] [tz=ZONE] [count=N] [failover] [misfire=on|off]
//!   [monitor=on|off] [disabled] [reconcile=MIN] [max-diff=SEC] [strategy=NAME]` (defaults:
//!   `0/10 * * * * ?` in UTC, 2 items, ElasticJob's defaults; `cron=""` is a one-off job);
//!   `settings [sharding-timeout=MS] [shutdown-timeout=MS] [grace=MS] [catch-up=MS]
//!   [once-listeners]`;
//! - `node PATH [DATA] [v=N] [eph=OWNER]` (parents made; `eph=me` is this session),
//!   `peer ID [disabled]` (its server and instance nodes), `assign N=ID ...` (owner nodes),
//!   `leader ID|me`. A node ElasticJob keeps empty (`sharding/N/misfire`,
//!   `leader/sharding/necessary`, `leader/failover/items/N`) is written empty with DATA in its
//!   detail node under `shardcron/`, as shardcron writes it (by `node` and `write` alike).
//!
//! Inputs (each prints the actions, the requests with their replies, the watch deliveries):
//! - `time T` (no input), `start`, `fire [T]` (the armed fire by default; time moves to it),
//!   `wait-due` (time moves to the armed wait), `reconcile`, `clock-back` (the driver found
//!   the clock set back: use `time` to set it first), `stop [REASON]`,
//!   `done L [N=ok|failed|raised|cancelled ...]` (launch `L` returned; all ok by default),
//!   `session suspended|reconnected|lost|expired|connected|closed` (`expired` also removes the
//!   session's ephemerals), `resync` (the view becomes the registry; `Resynced`).
//! - Others: `join ID [hold]` (its server and instance nodes), `write PATH [DATA] [eph=OWNER] [v=N] [hold]`, `delete PATH [hold]` (with what is
//!   below it), `kill OWNER [hold]` (that session ends), `config-change OPTIONS... [hold]` (as
//!   `job`). `hold` stalls the watch at that write (the view lags) until `deliver [N]`
//!   delivers all (or N) batches; `hold on|off` holds every batch, own writes included.
//! - Replies: `inject KIND [op=I]` answers the next request with an error (`conn-loss`,
//!   `node-exists`, `no-node`, `bad-version`, `session-expired`, `timeout`; `op=I` makes it the
//!   failure of op `I` of a transaction); `limit N` stops a command after N inputs and
//!   prints so (a loop is otherwise a test failure; the reply it cut off waits for `reply`);
//!   `manual` leaves requests unanswered until
//!   `reply [N] [KIND [op=I]]` (the oldest waiting one by default), `auto` goes back; `skew MS` sets the registry clock's lead.
//! - `registry [PREFIX]` prints the registry's nodes (not `config` unless asked), with
//!   `[view: ...]` where the view differs.
//!
//! # Output
//!
//! `req#N` requests (a transaction's ops indented below: `check`, `create P|E`, `set`,
//! `delete`, with the version they are fenced on), `  -> ` their replies, `watch +created
//! ~changed vN -deleted`, `arm-fire|arm-wait|arm-reconcile T|none`, `launch#L KIND fire=T
//! items=[N tTOKEN, ...]`, `cancel launch#L`, `emit EVENT`, `run-once-listeners STAGE fire=T`,
//! `use-config ...`, `stopped`.

mod file;
mod harness;
mod print;
mod registry;

use std::path::{Path, PathBuf};

use file::TranscriptFile;
use harness::Harness;

/// Runs every transcript; with `REWRITE` set, rewrites their expected outputs instead of
/// comparing them.
#[test]
fn transcripts() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protocol/job/testdata");
    let rewrite = std::env::var_os("REWRITE").is_some();
    let only = std::env::var("TRANSCRIPT").ok();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    let mut failures = Vec::new();
    let mut count = 0;
    for path in &files {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let file = match TranscriptFile::parse(&text) {
            Ok(file) => file,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let mut actual = Vec::new();
        let mut broken = false;
        for case in &file.cases {
            let selected =
                only.as_deref().is_none_or(|o| name.contains(o) || case.name.contains(o));
            if !selected {
                actual.extend(case.blocks.iter().map(|_| None));
                continue;
            }
            count += 1;
            let mut harness = Harness::new();
            let mut failed = false;
            for block in &case.blocks {
                if failed {
                    actual.push(None);
                    continue;
                }
                let mut out = Vec::new();
                for (line, command) in &block.commands {
                    if let Err(e) = harness.run(command, &mut out) {
                        failures
                            .push(format!("{name}:{line}: case {}: `{command}`: {e}", case.name));
                        failed = true;
                        broken = true;
                        break;
                    }
                }
                if !failed && out != block.expected {
                    let line = block.commands.first().map_or(case.line, |c| c.0);
                    failures.push(format!(
                        "{name}:{line}: case {}: output differs\n--- expected\n{}\n--- actual\n{}",
                        case.name,
                        block.expected.join("\n"),
                        out.join("\n")
                    ));
                    // Later blocks follow from this one: rewriting goes on, checking stops.
                    failed = !rewrite;
                }
                actual.push((!failed).then_some(out));
            }
        }
        if rewrite && !broken {
            let new = file.rewritten(&actual);
            if new != text {
                std::fs::write(path, new).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
    }
    eprintln!("{count} transcripts in {} files under {}", files.len(), dir.display());
    if rewrite {
        failures.retain(|f| !f.contains(": output differs"));
    }
    assert!(
        failures.is_empty(),
        "{} transcript failures:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(count > 0 || only.is_some(), "no transcript found under {}", dir.display());
}
