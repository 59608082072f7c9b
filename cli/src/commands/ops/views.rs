//! Read-only commands: `jobs`, `job show`, `servers`, `instances`, `dump`.

use shardcron::registry::CoordinatorRegistry;

use shardcron::api::{JobDetail, JobServer, ShardingItem};

use super::render::{fields, name, Table};
use super::{failed, json, operations, CliError, Output, Printed, Target};

pub const JOBS_ABOUT: &str = "List the jobs of a registry with their status";
pub const JOB_ABOUT: &str = "Show one job: status, config, servers, and each item's owner";
pub const SERVERS_ABOUT: &str = "List the servers (IPs) of a registry, or the jobs of one";
pub const INSTANCES_ABOUT: &str = "List the live instances of a registry with their jobs";
pub const DUMP_ABOUT: &str = "Print every registry node of a job (JSON lines with --output json)";

/// Statuses follow ElasticJob's console.
pub const STATUS_HELP: &str = "\
Job status: CRASHED (no live instance), DISABLED (every server disabled), SHARDING_FLAG (an \
item's owner is gone or none is assigned yet: a reshard is due), OK. Item status: DISABLED, \
RUNNING, SHARDING_FLAG (owner not live), PENDING (owned, idle).";

#[derive(Debug, clap::Args)]
pub struct JobsArgs {
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, clap::Args)]
pub struct JobArgs {
    #[command(subcommand)]
    pub command: JobCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum JobCommand {
    /// Status, config, servers and every item's owner, status and failover.
    #[command(after_help = STATUS_HELP)]
    Show {
        /// The job's name.
        job: String,
        #[command(flatten)]
        target: Target,
    },
}

#[derive(Debug, clap::Args)]
pub struct ServersArgs {
    /// Only this server: list the jobs on it with their status there.
    #[arg(long, value_name = "IP")]
    pub server: Option<String>,
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, clap::Args)]
pub struct InstancesArgs {
    #[command(flatten)]
    pub target: Target,
}

#[derive(Debug, clap::Args)]
pub struct DumpArgs {
    /// The job's name.
    pub job: String,
    #[command(flatten)]
    pub target: Target,
}

pub async fn jobs(args: &JobsArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    let output = args.target.output;
    {
        let jobs = operations(registry).jobs().await.map_err(failed)?;
        if output == Output::Json {
            return json(&jobs);
        }
        let mut t = Table::new(&["JOB", "STATUS", "CRON", "ITEMS", "INSTANCES", "DESCRIPTION"]);
        for j in &jobs {
            let status = match &j.problem {
                Some(problem) => format!("{} (config unusable: {problem})", name(&j.status)),
                None => name(&j.status),
            };
            t.row(vec![
                j.job_name.clone(),
                status,
                j.cron.clone(),
                j.sharding_total_count.to_string(),
                j.instance_count.to_string(),
                j.description.clone(),
            ]);
        }
        Ok(t.render().into_bytes())
    }
}

pub async fn job(args: &JobArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    let JobCommand::Show { job, target } = &args.command;
    let output = target.output;
    {
        let detail = operations(registry).job_detail(job).await.map_err(failed)?;
        let yaml = match &detail.config {
            Some(c) => c.to_yaml().map_err(|e| CliError::Failed(e.to_string()))?,
            None => String::new(),
        };
        if output == Output::Json {
            return json(&detail_json(&detail, &yaml));
        }
        Ok(show(&detail, &yaml).into_bytes())
    }
}

/// The JSON of `job show`: the brief's fields, the config as an object, servers and items.
fn detail_json(detail: &JobDetail, yaml: &str) -> serde_json::Value {
    let config: serde_json::Value = serde_norway::from_str(yaml).unwrap_or(serde_json::Value::Null);
    let mut value = serde_json::to_value(&detail.brief).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("config".into(), config);
        object.insert("servers".into(), serde_json::to_value(&detail.servers).unwrap_or_default());
        object
            .insert("sharding".into(), serde_json::to_value(&detail.sharding).unwrap_or_default());
    }
    value
}

fn show(detail: &JobDetail, yaml: &str) -> String {
    let b = &detail.brief;
    let mut text = fields(&[
        ("job", b.job_name.clone()),
        ("status", name(&b.status)),
        ("cron", b.cron.clone()),
        ("items", b.sharding_total_count.to_string()),
        ("instances", b.instance_count.to_string()),
        ("leader", b.leader.clone().unwrap_or_default()),
        ("description", b.description.clone()),
    ]);
    if let Some(problem) = &b.problem {
        text.push_str(&format!("config unusable: {problem}\n"));
    }
    text.push('\n');
    text.push_str(&items_table(&detail.sharding));
    text.push('\n');
    text.push_str(&servers_table(&detail.servers));
    if !yaml.is_empty() {
        text.push_str("\nconfig:\n");
        for line in yaml.lines() {
            text.push_str(&format!("  {line}\n"));
        }
    }
    text
}

fn items_table(items: &[ShardingItem]) -> String {
    let mut t = Table::new(&["ITEM", "STATUS", "OWNER", "FAILOVER"]);
    for i in items {
        t.row(vec![
            i.item.to_string(),
            name(&i.status),
            i.instance_id.clone().unwrap_or_default(),
            i.failover_instance_id.clone().unwrap_or_default(),
        ]);
    }
    t.render()
}

fn servers_table(servers: &[JobServer]) -> String {
    let mut t = Table::new(&["SERVER", "STATUS", "INSTANCES"]);
    for s in servers {
        t.row(vec![s.server_ip.clone(), name(&s.status), s.instances.join(",")]);
    }
    t.render()
}

pub async fn servers(args: &ServersArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    let output = args.target.output;
    {
        let ops = operations(registry);
        if let Some(ip) = &args.server {
            let jobs = ops.server_jobs(ip).await.map_err(failed)?;
            if output == Output::Json {
                return json(&jobs);
            }
            let mut t = Table::new(&["JOB", "STATUS", "INSTANCES"]);
            for j in &jobs {
                t.row(vec![j.job_name.clone(), name(&j.status), j.instance_count.to_string()]);
            }
            return Ok(t.render().into_bytes());
        }
        let servers = ops.all_servers().await.map_err(failed)?;
        if output == Output::Json {
            return json(&servers);
        }
        let mut t = Table::new(&["SERVER", "INSTANCES", "JOBS", "DISABLED_JOBS", "JOB_NAMES"]);
        for s in &servers {
            t.row(vec![
                s.server_ip.clone(),
                s.instances_num.to_string(),
                s.jobs_num.to_string(),
                s.disabled_jobs_num.to_string(),
                s.job_names.join(","),
            ]);
        }
        Ok(t.render().into_bytes())
    }
}

pub async fn instances(args: &InstancesArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    let output = args.target.output;
    {
        let instances = operations(registry).all_instances().await.map_err(failed)?;
        if output == Output::Json {
            return json(&instances);
        }
        let mut t = Table::new(&["INSTANCE", "SERVER", "JOBS"]);
        for i in &instances {
            t.row(vec![i.instance_id.clone(), i.server_ip.clone(), i.job_names.join(",")]);
        }
        Ok(t.render().into_bytes())
    }
}

pub async fn dump(args: &DumpArgs, registry: &dyn CoordinatorRegistry) -> Printed {
    let output = args.target.output;
    {
        let nodes = operations(registry).dump(&args.job).await.map_err(failed)?;
        let mut text = Vec::new();
        for n in &nodes {
            if output == Output::Json {
                let line = serde_json::to_string(n)
                    .map_err(|e| CliError::Failed(format!("cannot encode a node: {e}")))?;
                text.extend_from_slice(line.as_bytes());
            } else {
                let mode = if n.ephemeral { "E" } else { "P" };
                // Escaped so that one node stays one line (configs are multi-line YAML).
                let data = n.data.escape_default();
                text.extend_from_slice(format!("{}  {mode}  {data}", n.path).as_bytes());
            }
            text.push(b'\n');
        }
        Ok(text)
    }
}
