//! The subcommands, one module each. To add one: write `commands/<name>.rs` with an `Args`
//! struct and a `run(&Args, &mut dyn Write) -> Result<(), CliError>`, then add a variant below.

pub mod cron;
pub mod demo;
pub mod events;
pub mod sharding;
pub mod worker;

use std::io::Write;

use clap::Subcommand;

use crate::error::CliError;

/// Every subcommand of `shardcron`.
#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(about = cron::ABOUT)]
    Cron(cron::Args),
    #[command(about = sharding::ABOUT, long_about = sharding::LONG_ABOUT)]
    Sharding(sharding::Args),
    #[command(about = worker::ABOUT, long_about = worker::LONG_ABOUT)]
    Worker(worker::Args),
    #[command(about = demo::ABOUT, long_about = demo::LONG_ABOUT)]
    Demo(demo::Args),
}

impl Command {
    /// Runs the command, writing its result to `out`.
    pub fn run(&self, out: &mut dyn Write) -> Result<(), CliError> {
        match self {
            Self::Cron(args) => cron::run(args, out),
            Self::Sharding(args) => sharding::run(args, out),
            Self::Worker(args) => worker::run(args, out),
            Self::Demo(args) => demo::run(args, out),
        }
    }
}
