//! `shardcron worker --serve-jobs`: the worker runs the jobs of the namespace that need no code,
//! including jobs added later from the CLI or the console. Today that is script jobs (a config
//! with `props: script.command.line`), and only those whose program is on the worker's own
//! allow-list (`--allow-command PATH`): whoever can write to the registry must not be able to
//! run any program on every worker.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use shardcron::config::JobConfig;
use shardcron::job::Job;
use shardcron::runtime::{JobHandlers, Resolution};

use crate::error::CliError;

/// ElasticJob's property holding a script job's command line.
pub const SCRIPT_COMMAND_LINE: &str = "script.command.line";

/// The handlers of a worker serving the namespace's script jobs, for programs in `allowed`.
/// Every allowed path must name an existing file.
pub fn script_handlers(allowed: &[PathBuf]) -> Result<JobHandlers, CliError> {
    let mut programs = BTreeSet::new();
    for path in allowed {
        let real = path.canonicalize().map_err(|e| {
            CliError::InvalidInput(format!("--allow-command {}: {e}", path.display()))
        })?;
        if !real.is_file() {
            return Err(CliError::InvalidInput(format!(
                "--allow-command {}: not a file",
                path.display()
            )));
        }
        programs.insert(real);
    }
    Ok(JobHandlers::new().resolver(move |config| script_job(config, &programs)))
}

/// A script job for `config` when its program is allowed; `Ok(None)` when it is no script job.
fn script_job(config: &JobConfig, allowed: &BTreeSet<PathBuf>) -> Resolution {
    let Some(line) = config.props().get(SCRIPT_COMMAND_LINE) else { return Ok(None) };
    let mut words = split_command_line(line)?.into_iter();
    let program = words.next().ok_or_else(|| format!("{SCRIPT_COMMAND_LINE} is empty"))?;
    let real = Path::new(&program).canonicalize().ok();
    if !real.as_ref().is_some_and(|p| allowed.contains(p)) {
        return Err(format!(
            "{program:?} is not on this worker's --allow-command list; not running job {}",
            config.job_name()
        ));
    }
    Ok(Some(Job::script(program, words.collect())))
}

/// Splits a command line into words the way ElasticJob's command-line parser does for the
/// simple cases: on whitespace, with '...' or "..." keeping spaces inside one word. No shell
/// ever sees it, so nothing else is special.
pub fn split_command_line(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            None => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        return Err(format!("{SCRIPT_COMMAND_LINE}: unbalanced quote in {line:?}"));
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_split_on_spaces_outside_quotes() {
        assert_eq!(
            split_command_line("/bin/x a  'b c' \"d\"").unwrap(),
            ["/bin/x", "a", "b c", "d"]
        );
        assert_eq!(split_command_line(" /bin/x '' ").unwrap(), ["/bin/x", ""]);
        assert!(split_command_line("/bin/x 'a").is_err());
    }

    #[test]
    fn only_allowed_programs_become_jobs() {
        let allowed: BTreeSet<PathBuf> =
            [Path::new("/bin/sh").canonicalize().unwrap()].into_iter().collect();
        let config = JobConfig::builder("j").one_off().build().unwrap();
        assert!(matches!(script_job(&config, &allowed), Ok(None)), "not a script job");
        let with_command =
            |line: &str| config.to_builder().prop(SCRIPT_COMMAND_LINE, line).build().unwrap();
        assert!(matches!(script_job(&with_command("/bin/sh -c 'echo hi'"), &allowed), Ok(Some(_))));
        let refused = script_job(&with_command("/bin/rm -rf /tmp/x"), &allowed).unwrap_err();
        assert!(refused.contains("--allow-command"), "{refused}");
        assert!(
            script_job(&with_command("sh -c x"), &allowed).is_err(),
            "a bare name is not an allowed path"
        );
        assert!(script_handlers(&[PathBuf::from("/no/such/program")]).is_err());
    }
}
