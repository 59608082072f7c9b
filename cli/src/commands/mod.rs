//! The subcommands, one module each. To add one: write `commands/<name>.rs` with an `Args`
//! struct and a `run(&Args, &mut dyn Write) -> Result<(), CliError>`, then add a variant below.

pub mod console;
pub mod cron;
pub mod demo;
pub mod events;
pub mod ops;
pub mod serve_jobs;
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
    #[command(about = ops::views::JOBS_ABOUT, after_help = ops::views::STATUS_HELP)]
    Jobs(ops::views::JobsArgs),
    #[command(about = ops::views::JOB_ABOUT)]
    Job(ops::views::JobArgs),
    #[command(about = ops::views::SERVERS_ABOUT)]
    Servers(ops::views::ServersArgs),
    #[command(about = ops::views::INSTANCES_ABOUT)]
    Instances(ops::views::InstancesArgs),
    #[command(about = ops::actions::TRIGGER_ABOUT)]
    Trigger(ops::actions::TriggerArgs),
    #[command(about = ops::actions::DISABLE_ABOUT)]
    Disable(ops::actions::ToggleArgs),
    #[command(about = ops::actions::ENABLE_ABOUT)]
    Enable(ops::actions::ToggleArgs),
    #[command(about = ops::actions::SHUTDOWN_ABOUT)]
    Shutdown(ops::actions::ShutdownArgs),
    #[command(about = ops::config::CONFIG_ABOUT)]
    Config(ops::config::ConfigArgs),
    #[command(about = ops::config::ADD_ABOUT)]
    Add(ops::config::AddArgs),
    #[command(about = ops::actions::REMOVE_ABOUT)]
    Remove(ops::actions::RemoveArgs),
    #[command(about = ops::views::DUMP_ABOUT)]
    Dump(ops::views::DumpArgs),
    #[command(about = console::ABOUT, long_about = console::LONG_ABOUT)]
    Console(console::Args),
}

impl Command {
    /// Runs the command, writing its result to `out`.
    pub fn run(&self, out: &mut dyn Write) -> Result<(), CliError> {
        match self {
            Self::Cron(args) => cron::run(args, out),
            Self::Sharding(args) => sharding::run(args, out),
            Self::Worker(args) => worker::run(args, out),
            Self::Demo(args) => demo::run(args, out),
            Self::Console(args) => console::run(args, out),
            ops_command => match ops::run(ops_command, out) {
                Some(result) => result,
                None => Err(CliError::Failed("unknown command".into())),
            },
        }
    }
}
