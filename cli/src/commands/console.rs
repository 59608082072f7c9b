//! `shardcron console`: the web console and ElasticJob-UI's REST API on a registry.

use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;

use shardcron_console::{Console, ConsoleOptions, DEFAULT_LISTEN};
use shardcron_observe::TraceReader;

use super::ops::connect;
use super::worker::Signals;
use crate::error::CliError;

pub const ABOUT: &str = "Serve the web console and ElasticJob-UI's REST API for a registry";

pub const LONG_ABOUT: &str = "\
Serve the web console of a registry's namespace, and ElasticJob-UI's REST API under /api (same \
paths, same {success, errorCode, errorMsg, model} wrapper), plus adding a job.

The page lists the jobs with their status, the servers, and for a selected job each item's \
owner and live status (refreshed every 2 s); it triggers, disables, enables and shuts down \
jobs, servers and items, edits a job's config (showing why an invalid one is refused) and adds \
jobs.

With --trace, the console also searches the execution trace the workers record (give it the \
same SQLite file path or postgres:// URL as their `shardcron worker --trace`): the page's Job \
trace and History status tabs, and ElasticJob-UI's /api/event-trace/execution and \
/api/event-trace/status searches with their filters and paging. Without it those answer that the \
console has no trace database.

Reading is open to whoever reaches the address; changes need the access token (log in on the \
page, or send it in the Access-Token header). Without --token a random one is made and printed. \
--read-only refuses every change. The console listens on loopback unless --listen says \
otherwise: put it behind an authenticating proxy before exposing it.

Prints `listening on http://ADDR/` (and the generated token) on stdout, then serves until \
SIGTERM or Ctrl-C.";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Registry: mem:[/namespace], zk://host:port[,host:port]/namespace or
    /// etcd://host:port[,host:port]/namespace
    #[arg(long, value_name = "URL")]
    pub registry: String,

    /// Address to listen on (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = DEFAULT_LISTEN)]
    pub listen: SocketAddr,

    /// The token changes need (default: a random one, printed at start).
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,

    /// Refuse every change: a console to look only.
    #[arg(long)]
    pub read_only: bool,

    /// Search this execution trace: the SQLite file path or postgres://user:password@host/db
    /// URL the workers record to (`shardcron worker --trace`). Its tables are created when
    /// missing.
    #[arg(long, value_name = "URL")]
    pub trace: Option<String>,
}

pub fn run(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(serve(args, out));
    runtime.shutdown_timeout(Duration::from_secs(1));
    result
}

async fn serve(args: &Args, out: &mut dyn Write) -> Result<(), CliError> {
    if args.token.as_deref() == Some("") {
        return Err(CliError::InvalidInput("--token must not be empty".into()));
    }
    let mut signals = Signals::new()?;
    // The trace first: a bad URL or an unreachable database is found before any registry work.
    let trace = match &args.trace {
        Some(url) => Some(
            TraceReader::open(url)
                .await
                .map_err(|e| CliError::InvalidInput(format!("--trace: {}", one_line(&e))))?,
        ),
        None => None,
    };
    let registry = connect(&args.registry).await?;
    let options = ConsoleOptions {
        listen: args.listen,
        token: args.token.clone(),
        read_only: args.read_only,
        // The query may hold credentials (digest=, password=): the page shows the rest.
        label: args.registry.split('?').next().unwrap_or_default().to_owned(),
        trace,
    };
    let console = Console::bind(registry.clone(), options)
        .await
        .map_err(|e| CliError::InvalidInput(e.to_string()))?;
    let addr = console.local_addr();
    writeln!(out, "listening on http://{addr}/")?;
    if args.trace.is_some() {
        writeln!(out, "execution trace: searchable on the page and under /api/event-trace")?;
    }
    if args.read_only {
        writeln!(out, "read-only: every change is refused")?;
    } else if args.token.is_none() {
        writeln!(out, "access token: {}", console.token())?;
    }
    if !addr.ip().is_loopback() {
        eprintln!(
            "warning: listening on {addr}, beyond this host: anyone who reaches it can read the \
             cluster's state"
        );
    }
    out.flush()?;
    let stop = async move { signals.recv().await };
    let served = console.serve(stop).await;
    let _ = registry.close().await;
    served.map_err(|e| CliError::Failed(e.to_string()))
}

/// Database errors may span lines; the CLI's errors are one line.
fn one_line(error: &dyn std::fmt::Display) -> String {
    error.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}
