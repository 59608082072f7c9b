//! # shardcron
//!
//! The shardcron command-line tool: "when does this cron fire?" (`shardcron cron next`) and
//! "which instance runs which item?" (`shardcron sharding`); `shardcron worker` runs one instance
//! of a demo job and prints its events as JSON lines; `shardcron demo` shows a whole cluster
//! sharding, crashing, failing over and stopping, in one process.
//!
//! # Layout
//! - `commands/`: one module per subcommand, each with its clap `Args` and a `run` function;
//!   `commands/mod.rs` lists them. Adding a command means adding a module and one enum variant.
//! - `error.rs`: [`CliError`] and the exit-code convention (0 ok, 1 failure at run time, 2
//!   invalid input, always with a one-line reason on stderr).

mod commands;
mod error;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;

use crate::commands::Command;
use crate::error::CliError;

/// Distributed, sharded cron jobs, ElasticJob-Lite compatible.
#[derive(Debug, Parser)]
#[command(name = "shardcron", version, color = clap::ColorChoice::Never)]
// A bare `shardcron` is a usage error with a one-line reason, not a help dump on stderr.
#[command(subcommand_required = true, arg_required_else_help = false)]
#[command(after_help = "Exit status: 0 on success, 2 on invalid input (one-line reason on \
                        stderr), 1 on a failure at run time (output cannot be written, registry \
                        unreachable).")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return error::report_clap(&err),
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let result = cli.command.run(&mut out).and_then(|()| out.flush().map_err(CliError::from));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => err.report(),
    }
}
