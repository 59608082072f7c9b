//! How the CLI fails: a typed error, one line on stderr, a documented exit code.
//!
//! Scripts parse our output, so every failure is a single `error: ...` line on stderr, never a
//! usage dump, and the exit code tells invalid input (2) from a failure at run time (1: output
//! cannot be written, the registry cannot be reached, a cluster did not behave).

use std::fmt;
use std::io;
use std::process::ExitCode;

/// Exit code for input the command cannot accept (also what clap uses for usage errors).
pub const EXIT_INVALID_INPUT: u8 = 2;
/// Exit code when writing the result failed, or the command failed at run time.
pub const EXIT_IO: u8 = 1;

/// Why a command failed.
#[derive(Debug)]
pub enum CliError {
    /// An argument is invalid; the message names it and says what is accepted.
    InvalidInput(String),
    /// Writing to stdout failed.
    Io(io::Error),
    /// The input was fine but running the command failed (an unreachable registry, a signal
    /// handler that cannot be installed, a demo that did not show what it should).
    Failed(String),
}

impl CliError {
    /// Prints the one-line reason and returns the exit code.
    pub fn report(&self) -> ExitCode {
        match self {
            // The reader went away (`| head`): nothing left to tell anyone.
            Self::Io(err) if err.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Self::Io(_) | Self::Failed(_) => {
                eprintln!("error: {self}");
                ExitCode::from(EXIT_IO)
            }
            Self::InvalidInput(_) => {
                eprintln!("error: {self}");
                ExitCode::from(EXIT_INVALID_INPUT)
            }
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidInput(reason) | Self::Failed(reason) => f.write_str(reason),
            Self::Io(err) => write!(f, "cannot write output: {err}"),
        }
    }
}

impl From<io::Error> for CliError {
    fn from(err: io::Error) -> Self {
        Self::Io(err)
    }
}

/// Handles a clap parse failure: help and version go to stdout with status 0; usage errors become
/// one `error: ...` line (clap's message without its usage block) with status 2.
pub fn report_clap(err: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(err.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        // Nothing useful to do if printing help fails; the exit status still says "ok".
        let _ = err.print();
        return ExitCode::SUCCESS;
    }
    eprintln!("{}", one_line(&err.render().to_string()));
    ExitCode::from(EXIT_INVALID_INPUT)
}

/// Joins the paragraphs of a clap message into one line, dropping the usage and "for more
/// information" paragraphs.
fn one_line(message: &str) -> String {
    let paragraphs: Vec<String> = message
        .split("\n\n")
        .map(|paragraph| paragraph.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|p| !p.is_empty() && !p.starts_with("Usage:") && !p.starts_with("For more"))
        .collect();
    let line = paragraphs.join("; ");
    if line.starts_with("error:") {
        line
    } else {
        format!("error: {line}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_messages_become_one_line() {
        let message = "error: the following required arguments were not provided:\n  \
                       --job <JOB>\n  --total <N>\n\nUsage: shardcron sharding --job <JOB>\n\n\
                       For more information, try '--help'.\n";
        assert_eq!(
            one_line(message),
            "error: the following required arguments were not provided: --job <JOB> --total <N>"
        );
        let message = "error: unexpected argument '--totl' found\n\n  tip: a similar argument \
                       exists: '--total'\n\nUsage: x\n";
        assert_eq!(
            one_line(message),
            "error: unexpected argument '--totl' found; tip: a similar argument exists: '--total'"
        );
    }
}
