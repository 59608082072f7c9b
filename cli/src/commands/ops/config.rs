//! `config get`, `config set` and `add`: a job's config as ElasticJob's YAML.

use shardcron::registry::CoordinatorRegistry;

use serde_json::json as object;

use super::{failed, json, operations, read_file, CliError, Output, Printed, Target};

pub const CONFIG_ABOUT: &str = "Print or replace a job's config (ElasticJob's YAML)";
pub const ADD_ABOUT: &str = "Register a new job from a YAML config; workers that know it run it";

/// What replacing a config means for instances that publish theirs.
pub const OVERWRITE_HELP: &str = "\
The new config is validated first (an invalid one changes nothing, exit status 2) and applies \
to the running instances at once: a cron change reschedules them, a count change reshards. \
Instances publish their own config when they start; one that publishes with `overwrite: true` \
replaces the stored config then, and with it this edit: `config set` says so when the config it \
replaced was published that way.";

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the job's config: YAML (table output) or a JSON object.
    Get {
        /// The job's name.
        job: String,
        #[command(flatten)]
        target: Target,
    },
    /// Replace the job's config with FILE's (YAML or JSON; `-` reads standard input).
    #[command(after_help = OVERWRITE_HELP)]
    Set {
        /// The job's name.
        job: String,
        /// The new config; a missing jobName means JOB.
        file: String,
        #[command(flatten)]
        target: Target,
    },
}

#[derive(Debug, clap::Args)]
pub struct AddArgs {
    /// The new job's name.
    pub job: String,
    /// Its config (YAML or JSON; `-` reads standard input); a missing jobName means JOB.
    pub file: String,
    #[command(flatten)]
    pub target: Target,
}

pub async fn config(args: &ConfigArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    match &args.command {
        ConfigCommand::Get { job, target } => {
            let output = target.output;
            let config = operations(registry).config(job).await.map_err(failed)?;
            let yaml = config.to_yaml().map_err(|e| CliError::Failed(e.to_string()))?;
            match output {
                Output::Table => Ok(yaml.into_bytes()),
                Output::Json => {
                    let value: serde_json::Value = serde_norway::from_str(&yaml)
                        .map_err(|e| CliError::Failed(format!("cannot convert to JSON: {e}")))?;
                    json(&value)
                }
            }
        }
        ConfigCommand::Set { job, file, target } => {
            let text = read_file(file)?;
            let output = target.output;
            {
                let update =
                    operations(registry).set_config_yaml(job, &text).await.map_err(failed)?;
                match output {
                    Output::Json => json(&object!({"jobName": job, "update": update})),
                    Output::Table => {
                        let mut line = format!("job {job}: config replaced\n");
                        if update.kept_extra_configurations {
                            line.push_str("kept the stored jobExtraConfigurations\n");
                        }
                        if update.replaced_on_restart {
                            line.push_str(
                                "note: the replaced config was published with overwrite: true; \
                                 an instance starting with it will replace this edit\n",
                            );
                        }
                        Ok(line.into_bytes())
                    }
                }
            }
        }
    }
}

pub async fn add(args: &AddArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    let text = read_file(&args.file)?;
    let output = args.target.output;
    {
        let config = operations(registry).add_job_yaml(&args.job, &text).await.map_err(failed)?;
        let total = config.sharding_total_count();
        match output {
            Output::Json => json(&object!({"jobName": args.job, "shardingTotalCount": total})),
            Output::Table => {
                Ok(format!("job {}: added with {total} item(s)\n", args.job).into_bytes())
            }
        }
    }
}
