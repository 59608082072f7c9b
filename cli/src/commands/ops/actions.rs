//! Commands that change the cluster: `trigger`, `disable`, `enable`, `shutdown`, `remove`.

use shardcron::registry::CoordinatorRegistry;

use serde_json::json as object;

use super::{failed, json, operations, CliError, Output, Printed, Target};

pub const TRIGGER_ABOUT: &str = "Run a job once now on every live instance";
pub const DISABLE_ABOUT: &str = "Disable a job, a server (for one job or all) or one item";
pub const ENABLE_ABOUT: &str = "Enable again what `disable` disabled";
pub const SHUTDOWN_ABOUT: &str =
    "Stop a job's instances, a server's or one instance's (they leave gracefully)";
pub const REMOVE_ABOUT: &str =
    "Remove a job from the registry (once no instance runs it), or a server from its jobs";

#[derive(Debug, clap::Args)]
pub struct TriggerArgs {
    /// The job's name.
    pub job: String,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").args(["job", "server"]).required(true).multiple(true)))]
pub struct ToggleArgs {
    /// The job. Alone: the whole job (every server of it, and its config's `disabled` flag).
    pub job: Option<String>,
    /// Only this server (IP): for JOB, or for every job it has when JOB is left out.
    #[arg(long, value_name = "IP", conflicts_with = "item")]
    pub server: Option<String>,
    /// Only this sharding item of JOB (0 to shardingTotalCount - 1).
    #[arg(long, value_name = "N", requires = "job")]
    pub item: Option<u32>,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").args(["job", "server", "instance"]).required(true).multiple(true)))]
pub struct ShutdownArgs {
    /// The job. Alone: every instance of it.
    pub job: Option<String>,
    /// Only the instances on this server (IP): of JOB, or of every job when JOB is left out.
    #[arg(long, value_name = "IP", conflicts_with = "instance")]
    pub server: Option<String>,
    /// Only this instance ({ip}@-@{pid}): for JOB, or for every job it runs.
    #[arg(long, value_name = "ID")]
    pub instance: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").args(["job", "server"]).required(true).multiple(true)))]
pub struct RemoveArgs {
    /// The job: its whole subtree goes. Refused while instances run it (shut them down first).
    pub job: Option<String>,
    /// Instead: remove this server (IP) from JOB, or from every job: its instances are shut
    /// down and its server node deleted.
    #[arg(long, value_name = "IP")]
    pub server: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

/// Prints an action's result: `line` for people, `value` for scripts.
fn report(output: Output, line: String, value: serde_json::Value) -> Result<Vec<u8>, CliError> {
    match output {
        Output::Json => json(&value),
        Output::Table => Ok(format!("{line}\n").into_bytes()),
    }
}

pub async fn trigger(args: &TriggerArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    let output = args.target.output;
    {
        let n = operations(registry).trigger(&args.job).await.map_err(failed)?;
        let line = if n == 0 {
            format!("job {}: no live instance, nothing triggered", args.job)
        } else {
            format!("job {}: triggered on {n} instance(s)", args.job)
        };
        report(output, line, object!({"jobName": args.job, "instances": n}))
    }
}

pub async fn toggle(
    args: &ToggleArgs,
    disabled: bool,
    registry: &dyn CoordinatorRegistry,
) -> Printed {
    let verb = if disabled { "disabled" } else { "enabled" };
    let output = args.target.output;
    {
        let ops = operations(registry);
        match (&args.job, &args.server, args.item) {
            (Some(job), None, Some(item)) => {
                ops.set_item_disabled(job, item, disabled).await.map_err(failed)?;
                let line = format!("job {job}: item {item} {verb}");
                report(output, line, object!({"jobName": job, "item": item, "disabled": disabled}))
            }
            (job, Some(ip), None) => {
                let jobs =
                    ops.disable_server(ip, job.as_deref(), disabled).await.map_err(failed)?;
                let line = format!("server {ip}: {verb} for {}", jobs.join(", "));
                report(
                    output,
                    line,
                    object!({"serverIp": ip, "jobNames": jobs, "disabled": disabled}),
                )
            }
            (Some(job), None, None) => {
                let ips = ops.disable_job(job, disabled).await.map_err(failed)?;
                let line = format!("job {job}: {verb} (servers: {})", list(&ips));
                report(
                    output,
                    line,
                    object!({"jobName": job, "servers": ips, "disabled": disabled}),
                )
            }
            // clap's groups rule the rest out; say so rather than guess.
            _ => Err(CliError::InvalidInput("give a JOB, --server IP, or JOB --item N".into())),
        }
    }
}

pub async fn shutdown(args: &ShutdownArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    let output = args.target.output;
    {
        let ops = operations(registry);
        let job = args.job.as_deref();
        match (job, &args.server, &args.instance) {
            (_, Some(ip), None) => {
                let n = ops.shutdown_server(ip, job).await.map_err(failed)?;
                let line = format!("server {ip}: {n} instance node(s) removed");
                report(output, line, object!({"serverIp": ip, "jobName": job, "instances": n}))
            }
            (_, None, Some(id)) => {
                let jobs = ops.shutdown_instance(id, job).await.map_err(failed)?;
                let line = format!("instance {id}: shut down for {}", jobs.join(", "));
                report(output, line, object!({"instanceId": id, "jobNames": jobs}))
            }
            (Some(job), None, None) => {
                let n = ops.shutdown(job, None).await.map_err(failed)?;
                let line = format!("job {job}: {n} instance(s) shut down");
                report(output, line, object!({"jobName": job, "instances": n}))
            }
            _ => Err(CliError::InvalidInput("give a JOB, --server IP or --instance ID".into())),
        }
    }
}

pub async fn remove(args: &RemoveArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    let output = args.target.output;
    {
        let ops = operations(registry);
        match (&args.job, &args.server) {
            (job, Some(ip)) => {
                let jobs = ops.remove_server(ip, job.as_deref()).await.map_err(failed)?;
                let line = format!("server {ip}: removed from {}", jobs.join(", "));
                report(output, line, object!({"serverIp": ip, "jobNames": jobs}))
            }
            (Some(job), None) => {
                ops.remove(job).await.map_err(failed)?;
                report(output, format!("job {job}: removed"), object!({"jobName": job}))
            }
            (None, None) => Err(CliError::InvalidInput("give a JOB or --server IP".into())),
        }
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "none yet".into()
    } else {
        items.join(", ")
    }
}
