//! Script jobs: an external program per item, given the context as a JSON argument.

use std::io;
use std::process::{ExitStatus, Stdio};

use async_trait::async_trait;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use super::RunItem;
use crate::handles::Handles;
use crate::job::{ItemOutcome, JobFailure, ShardingContext};

/// How much of a script's standard error a [`JobFailure::Script`] keeps (its end).
pub const SCRIPT_STDERR_TAIL_BYTES: usize = 4096;

/// How much of a script's standard output is kept for the debug log (its end).
pub const SCRIPT_STDOUT_TAIL_BYTES: usize = 4096;

pub(super) struct ScriptRunner {
    pub(super) program: String,
    pub(super) args: Vec<String>,
}

/// What a finished script left behind.
struct Finished {
    status: ExitStatus,
    stdout_tail: String,
    stderr_tail: String,
}

impl ScriptRunner {
    fn launch_failure(&self, error: impl ToString) -> ItemOutcome {
        ItemOutcome::Failed(JobFailure::ScriptLaunch {
            program: self.program.clone(),
            reason: error.to_string(),
        })
    }

    /// Runs the program to its end, or until `ctx` is cancelled (`Ok(None)`, process killed).
    async fn execute(&self, ctx: &ShardingContext, json: String) -> io::Result<Option<Finished>> {
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .arg(json)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Should the item's task be dropped (runtime shutdown), the process goes with it.
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        // Both pipes are drained while waiting: a script that fills a pipe buffer would
        // otherwise block forever.
        let run = async {
            let (status, stdout, stderr) = tokio::join!(
                child.wait(),
                read_tail(stdout, SCRIPT_STDOUT_TAIL_BYTES),
                read_tail(stderr, SCRIPT_STDERR_TAIL_BYTES),
            );
            Ok::<_, io::Error>(Finished {
                status: status?,
                stdout_tail: stdout?,
                stderr_tail: stderr?,
            })
        };
        let finished = tokio::select! {
            biased;
            () = ctx.cancellation.cancelled() => None,
            finished = run => Some(finished?),
        };
        if finished.is_none() {
            // Kills and reaps it, so no zombie is left behind.
            child.kill().await?;
        }
        Ok(finished)
    }
}

#[async_trait]
impl RunItem for ScriptRunner {
    async fn run(&self, ctx: ShardingContext, _handles: &Handles) -> ItemOutcome {
        if ctx.is_cancelled() {
            return ItemOutcome::Cancelled;
        }
        let json = match ctx.to_json() {
            Ok(json) => json,
            Err(error) => {
                return self.launch_failure(format!("cannot encode the context: {error}"))
            }
        };
        let finished = match self.execute(&ctx, json).await {
            Ok(Some(finished)) => finished,
            Ok(None) => {
                tracing::debug!(program = %self.program, "script killed after cancellation");
                return ItemOutcome::Cancelled;
            }
            Err(error) => return self.launch_failure(error),
        };
        tracing::debug!(
            program = %self.program,
            status = %finished.status,
            stdout = %finished.stdout_tail,
            stderr = %finished.stderr_tail,
            "script finished"
        );
        if finished.status.success() {
            return ItemOutcome::Completed;
        }
        ItemOutcome::Failed(JobFailure::Script {
            program: self.program.clone(),
            status: finished.status.code(),
            signal: exit_signal(&finished.status),
            stderr_tail: finished.stderr_tail,
        })
    }
}

/// Reads `reader` to its end, keeping only the last `keep` bytes, decoded lossily.
async fn read_tail(reader: Option<impl AsyncRead + Unpin>, keep: usize) -> io::Result<String> {
    let Some(mut reader) = reader else {
        return Ok(String::new());
    };
    let mut tail = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let read = reader.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        tail.extend_from_slice(&chunk[..read]);
        if tail.len() > keep.saturating_mul(2) {
            tail.drain(..tail.len() - keep);
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
    }
    Ok(String::from_utf8_lossy(&tail).into_owned())
}

#[cfg(unix)]
fn exit_signal(status: &ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn exit_signal(_status: &ExitStatus) -> Option<i32> {
    None
}
