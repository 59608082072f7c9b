//! The operations commands (`jobs`, `job show`, `servers`, `instances`, `trigger`, `disable`,
//! `enable`, `shutdown`, `config get|set`, `add`, `remove`, `dump`): one call of
//! [`JobOperations`] each, on any registry URL, printed as a table or as JSON.
//!
//! Every command validates its input and refuses, changing nothing, when the request cannot
//! apply (an unknown job, server, instance or item, an invalid config): exit status 2 with a
//! one-line reason, like a registry that cannot be reached. A registry failing in the middle of
//! a command exits with status 1.

pub mod actions;
pub mod config;
pub mod render;
pub mod views;

#[cfg(test)]
mod tests;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use shardcron::api::JobOperations;
use shardcron::registry::CoordinatorRegistry;

use super::Command;
use crate::error::CliError;

/// How results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Aligned columns for people.
    Table,
    /// JSON with the field names of ElasticJob's console API, for scripts.
    Json,
}

/// The registry and the output format, shared by every operations command.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// Registry: mem:[/namespace], zk://host:port[,host:port]/namespace[?session_timeout_ms=N]
    /// or etcd://host:port[,host:port]/namespace
    #[arg(long, value_name = "URL")]
    pub registry: String,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
}

/// What a command prints, or why it failed.
pub type Printed = Result<Vec<u8>, CliError>;

/// The registry and output options of an operations command; `None` for other commands.
pub fn target(command: &Command) -> Option<&Target> {
    Some(match command {
        Command::Jobs(a) => &a.target,
        Command::Job(a) => {
            let views::JobCommand::Show { target, .. } = &a.command;
            target
        }
        Command::Servers(a) => &a.target,
        Command::Instances(a) => &a.target,
        Command::Trigger(a) => &a.target,
        Command::Disable(a) | Command::Enable(a) => &a.target,
        Command::Shutdown(a) => &a.target,
        Command::Config(a) => match &a.command {
            config::ConfigCommand::Get { target, .. }
            | config::ConfigCommand::Set { target, .. } => target,
        },
        Command::Add(a) => &a.target,
        Command::Remove(a) => &a.target,
        Command::Dump(a) => &a.target,
        _ => return None,
    })
}

/// Runs an operations command on `registry`, returning what it prints; `None` for a command
/// that is not one of them.
pub async fn exec(command: &Command, registry: &dyn CoordinatorRegistry) -> Option<Printed> {
    Some(match command {
        Command::Jobs(a) => views::jobs(a, registry).await,
        Command::Job(a) => views::job(a, registry).await,
        Command::Servers(a) => views::servers(a, registry).await,
        Command::Instances(a) => views::instances(a, registry).await,
        Command::Dump(a) => views::dump(a, registry).await,
        Command::Trigger(a) => actions::trigger(a, registry).await,
        Command::Disable(a) => actions::toggle(a, true, registry).await,
        Command::Enable(a) => actions::toggle(a, false, registry).await,
        Command::Shutdown(a) => actions::shutdown(a, registry).await,
        Command::Remove(a) => actions::remove(a, registry).await,
        Command::Config(a) => config::config(a, registry).await,
        Command::Add(a) => config::add(a, registry).await,
        _ => return None,
    })
}

/// Connects to the command's registry, runs it, closes the registry and prints the result.
/// `None` for a command that is not an operations command.
pub fn run(command: &Command, out: &mut dyn Write) -> Option<Result<(), CliError>> {
    let target = target(command)?;
    Some(run_on_target(command, target, out))
}

fn run_on_target(command: &Command, target: &Target, out: &mut dyn Write) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the async runtime: {e}")))?;
    let printed = runtime.block_on(async {
        let registry = connect(&target.registry).await?;
        let result = exec(command, &*registry).await;
        // The result is what counts; a failing close after it is not worth an error.
        let _ = registry.close().await;
        result.unwrap_or_else(|| Err(CliError::Failed("not an operations command".into())))
    });
    // A closed client may leave a background task behind: do not wait for it long.
    runtime.shutdown_timeout(Duration::from_secs(1));
    out.write_all(&printed?)?;
    Ok(())
}

/// Opens the registry. A URL that is malformed or names a registry that cannot be reached is
/// the caller's mistake to fix: exit status 2.
pub async fn connect(url: &str) -> Result<Arc<dyn CoordinatorRegistry>, CliError> {
    shardcron::connect(url)
        .await
        .map_err(|e| CliError::InvalidInput(format!("--registry {url}: {e}")))
}

/// Operations with the built-in types; custom strategies are accepted by name in stored
/// configs only when a scheduler that knows them validates (see `KnownTypes`).
pub fn operations(registry: &dyn CoordinatorRegistry) -> JobOperations<'_> {
    JobOperations::new(registry)
}

/// Maps an operations error to the CLI's: a bad request exits with 2, a registry failure with 1.
pub fn failed(e: shardcron::Error) -> CliError {
    let line = one_line(&e.to_string());
    if e.is_bad_request() {
        CliError::InvalidInput(line)
    } else {
        CliError::Failed(line)
    }
}

/// Joins a multi-line message (a YAML parser's, with a source excerpt) into one line.
pub fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Serializes `value` as pretty JSON plus a newline.
pub fn json(value: &impl serde::Serialize) -> Result<Vec<u8>, CliError> {
    let mut text = serde_json::to_vec_pretty(value)
        .map_err(|e| CliError::Failed(format!("cannot encode the result as JSON: {e}")))?;
    text.push(b'\n');
    Ok(text)
}

/// Reads a config file, `-` meaning standard input.
pub fn read_file(path: &str) -> Result<String, CliError> {
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    };
    text.map_err(|e| CliError::InvalidInput(format!("cannot read {path}: {e}")))
}
