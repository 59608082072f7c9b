//! How transcripts show what the protocol did: one compact, deterministic line per action
//! (a transaction's ops indented below it), paths relative to the job's root.

use crate::events::{FireKind, SchedulerEvent, SkipReason};
use crate::registry::{CreateMode, RegistryError, TxnOp, WatchEvent};

use super::super::{Action, Launch, Reply, Request};

/// The job every transcript runs.
pub const JOB: &str = "j";

/// A path relative to the job's root (`/j/sharding/0` → `sharding/0`).
pub fn rel(path: &str) -> &str {
    path.strip_prefix("/j/").unwrap_or(path)
}

pub fn data(bytes: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(bytes))
}

fn version(v: Option<u64>) -> String {
    v.map(|v| format!(" v{v}")).unwrap_or_default()
}

fn mode(mode: CreateMode) -> &'static str {
    if mode.is_ephemeral() {
        "E"
    } else {
        "P"
    }
}

pub fn op(op: &TxnOp) -> String {
    match op {
        TxnOp::Check { path, version: v } => format!("check {}{}", rel(path), version(*v)),
        TxnOp::Absent { path } => format!("absent {}", rel(path)),
        TxnOp::Create { path, data: d, mode: m } => {
            format!("create {} {} {}", mode(*m), rel(path), data(d))
        }
        TxnOp::Set { path, data: d, version: v } => {
            format!("set {} {}{}", rel(path), data(d), version(*v))
        }
        TxnOp::Delete { path, version: v } => format!("delete {}{}", rel(path), version(*v)),
    }
}

pub fn request(id: u64, request: &Request, out: &mut Vec<String>) {
    let head = format!("req#{id}");
    match request {
        Request::Txn(ops) => {
            out.push(format!("{head} txn"));
            out.extend(ops.iter().map(|o| format!("  {}", op(o))));
        }
        Request::Create { path, data: d, mode: m } => {
            out.push(format!("{head} create {} {} {}", mode(*m), rel(path), data(d)))
        }
        Request::Ensure(path) => out.push(format!("{head} ensure {}", rel(path))),
        Request::Get(path) => out.push(format!("{head} get {}", rel(path))),
        Request::Children(path) => out.push(format!("{head} children {}", rel(path))),
        Request::RegistryTime => out.push(format!("{head} registry-time")),
    }
}

pub fn reply(result: &Result<Reply, RegistryError>) -> String {
    let what = match result {
        Ok(Reply::Txn(_) | Reply::Created | Reply::Ensured) => "ok".to_owned(),
        Ok(Reply::Node(Some(node))) => format!("node {} v{}", data(&node.data), node.version),
        Ok(Reply::Node(None)) => "no node".to_owned(),
        Ok(Reply::Children(names)) => format!("children [{}]", names.join(", ")),
        Ok(Reply::Time(ms)) => format!("time {ms}"),
        Err(e) => format!("err {}", error(e)),
    };
    format!("  -> {what}")
}

pub fn error(e: &RegistryError) -> String {
    let path = |p: &str| rel(p).to_owned();
    match e {
        RegistryError::Transaction { index, source } => format!("op#{index} {}", error(source)),
        RegistryError::NoNode { path: p, .. } => format!("no-node {}", path(p)),
        RegistryError::NodeExists { path: p, .. } => format!("node-exists {}", path(p)),
        RegistryError::BadVersion { path: p, expected, .. } => {
            format!("bad-version {} (expected v{expected})", path(p))
        }
        RegistryError::NotEmpty { path: p, .. } => format!("not-empty {}", path(p)),
        RegistryError::EphemeralParent { path: p, .. } => format!("ephemeral-parent {}", path(p)),
        RegistryError::ConnectionLoss { path: p, .. } => format!("conn-loss {}", path(p)),
        RegistryError::SessionExpired { path: p, .. } => format!("session-expired {}", path(p)),
        RegistryError::Timeout { path: p, .. } => format!("timeout {}", path(p)),
        other => other.to_string(),
    }
}

pub fn watch(batch: &[WatchEvent]) -> String {
    let parts: Vec<String> = batch
        .iter()
        .map(|e| match e {
            WatchEvent::Created { path, .. } => format!("+{}", rel(path)),
            WatchEvent::Changed { path, node } => format!("~{} v{}", rel(path), node.version),
            WatchEvent::Deleted { path } => format!("-{}", rel(path)),
            WatchEvent::Resync { .. } => "resync".to_owned(),
            WatchEvent::Rescoped { .. } => "rescoped".to_owned(),
        })
        .collect();
    format!("watch {}", parts.join(" "))
}

fn kind(kind: FireKind) -> &'static str {
    match kind {
        FireKind::Scheduled => "scheduled",
        FireKind::Misfire => "misfire",
        FireKind::Manual => "manual",
        FireKind::Failover => "failover",
    }
}

fn at(ms: Option<i64>) -> String {
    ms.map_or_else(|| "none".to_owned(), |ms| ms.to_string())
}

pub fn launch(l: &Launch) -> String {
    let items: Vec<String> = l
        .items
        .iter()
        .map(|&(n, t)| match l.fire_of(n) {
            f if f == l.fire_ms => format!("{n} t{t}"),
            f => format!("{n} t{t} fire={f}"),
        })
        .collect();
    format!("launch#{} {} fire={} items=[{}]", l.id.0, kind(l.kind), l.fire_ms, items.join(", "))
}

/// One action; requests are printed by the harness, which numbers and answers them.
pub fn action(action: &Action) -> String {
    match action {
        Action::Request { op, request: r } => {
            let mut out = Vec::new();
            request(op.0, r, &mut out);
            out.join("\n")
        }
        Action::ArmFire(ms) => format!("arm-fire {}", at(*ms)),
        Action::ArmReconcile(ms) => format!("arm-reconcile {}", at(*ms)),
        Action::ArmWait(ms) => format!("arm-wait {}", at(*ms)),
        Action::Launch(l) => launch(l),
        Action::Cancel(id) => format!("cancel launch#{}", id.0),
        Action::Emit(e) => format!("emit {}", event(e)),
        Action::RunOnceListeners { stage, fire_ms } => {
            format!("run-once-listeners {} fire={fire_ms}", stage.name())
        }
        Action::UseConfig(c) => format!(
            "use-config count={} cron={:?} disabled={} failover={}",
            c.sharding_total_count,
            c.cron.as_deref().unwrap_or(""),
            c.disabled,
            c.failover
        ),
        Action::Stopped => "stopped".to_owned(),
    }
}

fn reason(r: &SkipReason) -> String {
    match r {
        SkipReason::ClockSkew { diff_ms } => format!("clock_skew diff={diff_ms}"),
        SkipReason::RegistryError(m) => format!("registry_error: {m}"),
        other => other.code().to_owned(),
    }
}

pub fn event(e: &SchedulerEvent) -> String {
    match e {
        SchedulerEvent::Armed { next_fire_ms, .. } => format!("armed next={next_fire_ms}"),
        SchedulerEvent::Skipped { fire_ms, reason: r, .. } => {
            format!("skipped fire={fire_ms} reason={}", reason(r))
        }
        SchedulerEvent::ItemStarted { item, fire_ms, kind: k, token, .. } => {
            format!("item-started item={item} fire={fire_ms} kind={} token={token}", kind(*k))
        }
        SchedulerEvent::ItemFinished { item, fire_ms, ok, .. } => {
            format!("item-finished item={item} fire={fire_ms} ok={ok}")
        }
        SchedulerEvent::FireFailed { fire_ms, item, error, .. } => {
            format!("fire-failed fire={fire_ms} item={item}: {error}")
        }
        SchedulerEvent::FailoverClaimed { item, fire_ms, .. } => {
            format!("failover-claimed item={item} fire={fire_ms}")
        }
        SchedulerEvent::Reconciled { .. } => "reconciled".to_owned(),
        SchedulerEvent::LeaderElected { .. } => "leader-elected".to_owned(),
        SchedulerEvent::Sharded { assignment, .. } => {
            let parts: Vec<String> = assignment
                .iter()
                .map(|(i, items)| {
                    let items: Vec<String> = items.iter().map(u32::to_string).collect();
                    format!("{i}=[{}]", items.join(","))
                })
                .collect();
            format!("sharded {}", parts.join(" "))
        }
        SchedulerEvent::ConfigRejected { reason, .. } => format!("config-rejected: {reason}"),
        SchedulerEvent::ConfigApplied { .. } => "config-applied".to_owned(),
        SchedulerEvent::Session(s) => format!("session {s:?}"),
        SchedulerEvent::JobStopped { reason, .. } => format!("job-stopped: {reason}"),
        SchedulerEvent::RegistryGarbage { path, value, reason, .. } => {
            format!("registry-garbage {} {value}: {reason}", rel(path))
        }
        SchedulerEvent::Error { message, .. } => format!("error: {message}"),
    }
}
