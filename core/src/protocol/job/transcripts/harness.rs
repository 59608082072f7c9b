//! Runs one transcript's commands: holds the protocol, the registry model, the view the watch
//! feeds, the time and the timers, and prints what the protocol does. The command language is
//! described in the module documentation of `transcripts`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use super::super::Settings;
use super::super::{Action, Ctx, Input, JobProtocol, Launch, LaunchId, OpId, Reply, Request};
use super::print::{self, rel, JOB};
use super::registry::{Entry, Registry};
use crate::config::JobConfig;
use crate::cron::CronSchedule;
use crate::instance::ip_of;
use crate::job::{FireReport, ItemOutcome, JobFailure};
use crate::layout::JobNode;
use crate::protocol::records::InstanceRecord;
use crate::protocol::view::View;
use crate::registry::{Op, RegistryError, SessionEvent, WatchEvent};

/// How many inputs one command may cause before the harness calls it a loop.
const MAX_INPUTS: usize = 2_000;

/// An error to answer the next request with.
#[derive(Debug, Clone)]
struct Inject {
    kind: String,
    /// For a transaction: the op that fails (the error is wrapped as the registry wraps it).
    index: Option<usize>,
}

const ERROR_KINDS: [&str; 6] =
    ["conn-loss", "node-exists", "no-node", "bad-version", "session-expired", "timeout"];

impl Inject {
    fn parse(kind: &str, index: Option<String>) -> Result<Self, String> {
        if !ERROR_KINDS.contains(&kind) {
            return Err(format!("unknown error {kind:?}; one of {ERROR_KINDS:?}"));
        }
        let index =
            index.map(|i| i.parse().map_err(|_| format!("bad op index {i:?}"))).transpose()?;
        Ok(Inject { kind: kind.to_owned(), index })
    }

    fn error(&self, request: &Request) -> RegistryError {
        let (op, path) = match request {
            Request::Txn(ops) => match self.index.and_then(|i| ops.get(i)) {
                Some(o) => (op_of(o), o.path().to_owned()),
                None => (Op::Transaction, ops.first().map_or("/", |o| o.path()).to_owned()),
            },
            Request::Create { path, .. } | Request::Ensure(path) => (Op::Create, path.clone()),
            Request::Get(path) => (Op::Get, path.clone()),
            Request::Children(path) => (Op::Children, path.clone()),
            Request::RegistryTime => (Op::Time, "/".to_owned()),
        };
        let base = match self.kind.as_str() {
            "node-exists" => RegistryError::NodeExists { op, path },
            "no-node" => RegistryError::NoNode { op, path },
            "bad-version" => RegistryError::BadVersion { op, path, expected: 0 },
            "session-expired" => RegistryError::SessionExpired { op, path },
            "timeout" => RegistryError::Timeout { op, path, after: Duration::from_secs(5) },
            _ => RegistryError::ConnectionLoss { op, path },
        };
        match (request, self.index) {
            (Request::Txn(_), Some(index)) => {
                RegistryError::Transaction { index, source: Box::new(base) }
            }
            _ => base,
        }
    }
}

fn op_of(op: &crate::registry::TxnOp) -> Op {
    use crate::registry::TxnOp;
    match op {
        TxnOp::Check { .. } | TxnOp::Absent { .. } => Op::Check,
        TxnOp::Create { .. } => Op::Create,
        TxnOp::Set { .. } => Op::Set,
        TxnOp::Delete { .. } => Op::Delete,
    }
}

/// Splits a command line into words; `"..."` quotes (with `\n`, `\"`, `\\`) anywhere in a word.
fn words(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let (mut in_word, mut quoted) = (false, false);
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if quoted {
            match c {
                '"' => quoted = false,
                '\\' => match chars.next() {
                    Some('n') => word.push('\n'),
                    Some(c) => word.push(c),
                    None => return Err("a line ends in an escape".into()),
                },
                c => word.push(c),
            }
        } else if c == '"' {
            quoted = true;
            in_word = true;
        } else if c.is_whitespace() {
            if in_word {
                out.push(std::mem::take(&mut word));
                in_word = false;
            }
        } else {
            word.push(c);
            in_word = true;
        }
    }
    if quoted {
        return Err("an unclosed quote".into());
    }
    if in_word {
        out.push(word);
    }
    Ok(out)
}

/// A command's words after its name: `key=value` options and bare flags are taken out by name,
/// what is left is positional.
struct Args(Vec<String>);

impl Args {
    fn opt(&mut self, key: &str) -> Option<String> {
        let prefix = format!("{key}=");
        let i = self.0.iter().position(|w| w.starts_with(&prefix))?;
        Some(self.0.remove(i)[prefix.len()..].to_owned())
    }

    fn flag(&mut self, name: &str) -> bool {
        match self.0.iter().position(|w| w == name) {
            Some(i) => {
                self.0.remove(i);
                true
            }
            None => false,
        }
    }

    /// A boolean option: bare `name`, or `name=on|off`.
    fn switch(&mut self, name: &str) -> Result<Option<bool>, String> {
        if self.flag(name) {
            return Ok(Some(true));
        }
        match self.opt(name).as_deref() {
            None => Ok(None),
            Some("on" | "true") => Ok(Some(true)),
            Some("off" | "false") => Ok(Some(false)),
            Some(other) => Err(format!("{name}={other}: on or off")),
        }
    }

    fn num<T: std::str::FromStr>(&mut self, key: &str) -> Result<Option<T>, String> {
        self.opt(key).map(|v| v.parse().map_err(|_| format!("{key}={v}: not a number"))).transpose()
    }

    fn positional(self, min: usize, max: usize) -> Result<Vec<String>, String> {
        if self.0.len() < min || self.0.len() > max {
            return Err(format!("expected {min}..={max} arguments, got {:?}", self.0));
        }
        Ok(self.0)
    }
}

fn parse_num<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("{s:?}: not a number"))
}

/// A path relative to the job's root, or absolute.
fn abs(path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("/{JOB}/{path}")
    }
}

fn instance_data(id: &str) -> Vec<u8> {
    InstanceRecord { job_instance_id: id.to_owned(), server_ip: ip_of(id).to_owned() }
        .encode()
        .into_bytes()
}

pub struct Harness {
    me: String,
    config: JobConfig,
    settings: Settings,
    protocol: Option<JobProtocol>,
    registry: Registry,
    view: View,
    now: i64,
    sessions_lost: u64,
    /// This process's session number; its ephemerals are owned by `{me}#{session}`.
    session: u64,
    /// Answer requests at once (else they wait for `reply`).
    auto: bool,
    /// Hold every watch batch until `deliver`.
    hold: bool,
    /// A held write stalled the watch: nothing is delivered until `deliver`.
    stalled: bool,
    /// Watch batches not delivered yet, in registry order.
    held: VecDeque<Vec<WatchEvent>>,
    inject: VecDeque<Inject>,
    outstanding: BTreeMap<u64, Request>,
    /// Replies held back when a command hit `limit`, fed by `reply N`.
    answered: BTreeMap<u64, Result<Reply, RegistryError>>,
    /// A bound on the inputs of one command, set by `limit`: past it the harness stops and
    /// prints so (without it, a loop is a test failure).
    limit: Option<usize>,
    armed_fire: Option<i64>,
    armed_wait: Option<i64>,
    launches: BTreeMap<u64, Launch>,
    /// How far the registry's clock is ahead of this instance's.
    skew: i64,
}

impl Harness {
    pub fn new() -> Self {
        let mut config = JobConfig::new(JOB, 2);
        config.cron = Some("0/10 * * * * ?".to_owned());
        config.time_zone = Some("UTC".to_owned());
        Harness {
            me: "A@-@1".to_owned(),
            config,
            settings: Settings::default(),
            protocol: None,
            registry: Registry::default(),
            view: View::default(),
            now: 0,
            sessions_lost: 0,
            session: 1,
            auto: true,
            hold: false,
            stalled: false,
            held: VecDeque::new(),
            inject: VecDeque::new(),
            outstanding: BTreeMap::new(),
            answered: BTreeMap::new(),
            limit: None,
            armed_fire: None,
            armed_wait: None,
            launches: BTreeMap::new(),
            skew: 0,
        }
    }

    fn owner(&self) -> String {
        format!("{}#{}", self.me, self.session)
    }

    /// Runs one command line, appending what it printed.
    pub fn run(&mut self, line: &str, out: &mut Vec<String>) -> Result<(), String> {
        let mut words = words(line)?;
        if words.is_empty() {
            return Ok(());
        }
        let name = words.remove(0);
        let mut args = Args(words);
        match name.as_str() {
            // Setup, before the first input.
            "me" => {
                self.before_start(&name)?;
                self.me = args.positional(1, 1)?.remove(0);
            }
            "job" => {
                self.before_start(&name)?;
                let mut config = self.config.clone();
                configure(&mut config, &mut args)?;
                args.positional(0, 0)?;
                self.config = config;
            }
            "settings" => {
                self.before_start(&name)?;
                let s = &mut self.settings;
                if let Some(v) = args.num("sharding-timeout")? {
                    s.sharding_timeout_ms = v;
                }
                if let Some(v) = args.num("shutdown-timeout")? {
                    s.shutdown_timeout_ms = v;
                }
                if let Some(v) = args.num("grace")? {
                    s.cancel_grace_ms = v;
                }
                if let Some(v) = args.num("catch-up")? {
                    s.catch_up_ms = v;
                }
                if let Some(v) = args.switch("once-listeners")? {
                    s.once_listeners = v;
                }
                if let Some(v) = args.switch("fence-absent")? {
                    s.fence_absent = v;
                }
                args.positional(0, 0)?;
            }
            "node" => {
                self.before_start(&name)?;
                let owner = args.opt("eph").map(|o| self.owner_named(&o));
                let version = args.num("v")?;
                let pos = args.positional(1, 2)?;
                let data = pos.get(1).cloned().unwrap_or_default();
                let path = abs(&pos[0]);
                match detail_of(&path) {
                    Some(detail) => {
                        self.setup_put(&path, b"", owner, version)?;
                        self.setup_put(&detail, data.as_bytes(), None, None)?;
                    }
                    None => self.setup_put(&path, data.as_bytes(), owner, version)?,
                }
            }
            "peer" => {
                self.before_start(&name)?;
                let disabled = args.flag("disabled");
                let id = args.positional(1, 1)?.remove(0);
                let server = abs(&format!("servers/{}", ip_of(&id)));
                let state = if disabled { "DISABLED" } else { "ENABLED" };
                self.setup_put(&server, state.as_bytes(), None, None)?;
                let instance = abs(&format!("instances/{id}"));
                self.setup_put(&instance, &instance_data(&id), Some(id.clone()), None)?;
            }
            "assign" => {
                self.before_start(&name)?;
                for pair in args.positional(1, usize::MAX)? {
                    let (item, owner) =
                        pair.split_once('=').ok_or_else(|| format!("{pair:?}: ITEM=OWNER"))?;
                    let path = abs(&format!("sharding/{}/instance", parse_num::<u32>(item)?));
                    self.setup_put(&path, owner.as_bytes(), None, None)?;
                }
            }
            "leader" => {
                self.before_start(&name)?;
                let id = args.positional(1, 1)?.remove(0);
                let owner = self.owner_named(&id);
                let id = if id == "me" { self.me.clone() } else { id };
                self.setup_put(&abs("leader/election/instance"), id.as_bytes(), Some(owner), None)?;
            }
            // Time and timers.
            "time" => self.now = parse_num(&args.positional(1, 1)?[0])?,
            "skew" => self.skew = parse_num(&args.positional(1, 1)?[0])?,
            "start" => {
                args.positional(0, 0)?;
                let added_ms = self.now;
                self.feed(Input::Start { added_ms }, out)?;
            }
            "fire" => {
                let pos = args.positional(0, 1)?;
                let fire_ms = match pos.first() {
                    Some(t) => parse_num(t)?,
                    None => self.armed_fire.ok_or("no fire is armed")?,
                };
                if self.armed_fire == Some(fire_ms) {
                    self.armed_fire = None;
                }
                self.now = self.now.max(fire_ms);
                self.feed(Input::FireDue { fire_ms }, out)?;
            }
            "wait-due" => {
                args.positional(0, 0)?;
                if let Some(at) = self.armed_wait.take() {
                    self.now = self.now.max(at);
                }
                self.feed(Input::WaitDue, out)?;
            }
            "reconcile" => {
                args.positional(0, 0)?;
                self.feed(Input::ReconcileDue, out)?;
            }
            "clock-back" => {
                args.positional(0, 0)?;
                self.feed(Input::ClockWentBack, out)?;
            }
            "done" => self.done(args, out)?,
            "stop" => {
                let reason = args.positional(0, usize::MAX)?.join(" ");
                let reason = if reason.is_empty() { "stop".to_owned() } else { reason };
                self.feed(Input::Stop { reason }, out)?;
            }
            "session" => self.session(&args.positional(1, 1)?[0], out)?,
            "resync" => {
                args.positional(0, 0)?;
                self.held.clear();
                self.stalled = false;
                let nodes = self.registry.snapshot();
                self.view.apply(&WatchEvent::Resync { nodes });
                out.push("watch resync".to_owned());
                self.feed(Input::Resynced, out)?;
            }
            // What others do to the registry.
            "write" => {
                let hold = args.flag("hold");
                let owner = args.opt("eph").map(|o| self.owner_named(&o));
                let version = args.num("v")?;
                let pos = args.positional(1, 2)?;
                let data = pos.get(1).cloned().unwrap_or_default();
                let mut events = Vec::new();
                let path = abs(&pos[0]);
                let (data, detail) = match detail_of(&path) {
                    Some(detail) => (String::new(), Some((detail, data))),
                    None => (data, None),
                };
                self.registry
                    .put(&path, data.as_bytes(), owner, version, &mut events)
                    .map_err(|e| e.to_string())?;
                if let Some((detail, data)) = detail {
                    self.registry
                        .put(&detail, data.as_bytes(), None, None, &mut events)
                        .map_err(|e| e.to_string())?;
                }
                self.external(events, hold, out)?;
            }
            "delete" => {
                let hold = args.flag("hold");
                let path = abs(&args.positional(1, 1)?[0]);
                if !self.registry.exists(&path) {
                    return Err(format!("{path} does not exist"));
                }
                let mut events = Vec::new();
                self.registry.delete_tree(&path, &mut events);
                self.external(events, hold, out)?;
            }
            "join" => {
                let hold = args.flag("hold");
                let id = args.positional(1, 1)?.remove(0);
                let mut events = Vec::new();
                let server = abs(&format!("servers/{}", ip_of(&id)));
                if !self.registry.exists(&server) {
                    self.registry
                        .put(&server, b"ENABLED", None, None, &mut events)
                        .map_err(|e| e.to_string())?;
                }
                let instance = abs(&format!("instances/{id}"));
                self.registry
                    .put(&instance, &instance_data(&id), Some(id.clone()), None, &mut events)
                    .map_err(|e| e.to_string())?;
                self.external(events, hold, out)?;
            }
            "kill" => {
                let hold = args.flag("hold");
                let owner = self.owner_named(&args.positional(1, 1)?[0]);
                let mut events = Vec::new();
                self.registry.expire(&owner, &mut events);
                self.external(events, hold, out)?;
            }
            "config-change" => {
                let hold = args.flag("hold");
                let mut config = self.config.clone();
                configure(&mut config, &mut args)?;
                args.positional(0, 0)?;
                let yaml = config.to_yaml().map_err(|e| e.to_string())?;
                self.config = config;
                let mut events = Vec::new();
                self.registry
                    .put(&abs("config"), yaml.as_bytes(), None, None, &mut events)
                    .map_err(|e| e.to_string())?;
                self.external(events, hold, out)?;
            }
            "deliver" => {
                // `together`: the batches arrive at once, as a link back after a cut delivers
                // them, and the job hears of them in one input.
                let together = args.flag("together");
                let count = match args.positional(0, 1)?.first() {
                    Some(n) => parse_num(n)?,
                    None => usize::MAX,
                };
                self.ensure_protocol()?;
                let mut inputs = 0;
                let mut merged = Vec::new();
                for _ in 0..count {
                    let Some(batch) = self.held.pop_front() else { break };
                    if together {
                        merged.extend(batch);
                    } else {
                        self.deliver(batch, &mut inputs, out)?;
                    }
                }
                if !merged.is_empty() {
                    self.deliver(merged, &mut inputs, out)?;
                }
                if self.held.is_empty() {
                    self.stalled = false;
                }
                self.settle(out)?;
            }
            "hold" => {
                self.hold = match args.positional(1, 1)?[0].as_str() {
                    "on" => true,
                    "off" => false,
                    other => return Err(format!("hold {other:?}: on or off")),
                };
                if !self.hold {
                    self.settle(out)?;
                }
            }
            // How requests are answered.
            "inject" => {
                let index = args.opt("op");
                let kind = args.positional(1, 1)?.remove(0);
                self.inject.push_back(Inject::parse(&kind, index)?);
            }
            "limit" => self.limit = Some(parse_num(&args.positional(1, 1)?[0])?),
            "manual" => self.auto = false,
            "auto" => self.auto = true,
            "reply" => {
                let index = args.opt("op");
                let mut pos = args.positional(0, 2)?;
                let id: u64 = match pos.first().map(|p| p.parse()) {
                    Some(Ok(id)) => {
                        pos.remove(0);
                        id
                    }
                    _ => {
                        let waiting = self.answered.keys().chain(self.outstanding.keys());
                        *waiting.min().ok_or("no request waits for a reply")?
                    }
                };
                let result = if let Some(result) = self.answered.remove(&id) {
                    result
                } else {
                    let request = self
                        .outstanding
                        .remove(&id)
                        .ok_or_else(|| format!("no request #{id} waits for a reply"))?;
                    match pos.first() {
                        Some(kind) => Err(Inject::parse(kind, index)?.error(&request)),
                        None => self.perform(&request),
                    }
                };
                out.push(format!("req#{id} {}", print::reply(&result).trim_start()));
                self.feed(Input::Reply { op: OpId(id), result }, out)?;
            }
            "registry" => {
                let prefix = args.positional(0, 1)?.pop();
                self.dump(prefix.as_deref(), out);
            }
            other => return Err(format!("unknown command {other:?}")),
        }
        Ok(())
    }

    fn before_start(&self, name: &str) -> Result<(), String> {
        match self.protocol {
            Some(_) => {
                Err(format!("`{name}` sets up the registry: it goes before the first input"))
            }
            None => Ok(()),
        }
    }

    /// `me` names this process's current session; any other name is used as is.
    fn owner_named(&self, name: &str) -> String {
        if name == "me" {
            self.owner()
        } else {
            name.to_owned()
        }
    }

    fn setup_put(
        &mut self,
        path: &str,
        data: &[u8],
        owner: Option<String>,
        version: Option<u64>,
    ) -> Result<(), String> {
        let mut events = Vec::new();
        self.registry.put(path, data, owner, version, &mut events).map_err(|e| e.to_string())?;
        events.iter().for_each(|e| self.view.apply(e));
        Ok(())
    }

    fn ensure_protocol(&mut self) -> Result<(), String> {
        if self.protocol.is_some() {
            return Ok(());
        }
        let config_path = abs("config");
        if !self.registry.exists(&config_path) {
            let yaml = self.config.to_yaml().map_err(|e| e.to_string())?;
            self.setup_put(&config_path, yaml.as_bytes(), None, None)?;
        }
        let schedule = match self.config.cron_expression() {
            Some(cron) => Some(
                CronSchedule::parse(cron, self.config.time_zone.as_deref().unwrap_or(""))
                    .map_err(|e| e.to_string())?,
            ),
            None => None,
        };
        let ip = ip_of(&self.me).to_owned();
        self.protocol = Some(JobProtocol::new(
            self.me.as_str(),
            ip.as_str(),
            self.config.clone(),
            schedule,
            self.settings.clone(),
        ));
        Ok(())
    }

    fn step(&mut self, input: Input) -> Result<Vec<Action>, String> {
        self.ensure_protocol()?;
        let Harness { protocol, view, now, sessions_lost, .. } = self;
        let protocol = protocol.as_mut().ok_or("no protocol")?;
        let ctx = Ctx { view, now_ms: *now, sessions_lost: *sessions_lost };
        Ok(protocol.step(input, &ctx))
    }

    /// Steps `input` and the replies to the requests it leads to (auto mode), then delivers the
    /// watch unless it is held.
    fn feed(&mut self, input: Input, out: &mut Vec<String>) -> Result<(), String> {
        let mut inputs = 0;
        self.chain(input, &mut inputs, out)?;
        self.settle(out)
    }

    fn chain(
        &mut self,
        input: Input,
        inputs: &mut usize,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        let mut queue = VecDeque::from([input]);
        while let Some(input) = queue.pop_front() {
            *inputs += 1;
            if let Some(limit) = self.limit.filter(|&l| *inputs > l) {
                out.push(format!("!! stopped after {limit} inputs (the protocol keeps asking)"));
                if let Input::Reply { op, result } = input {
                    out.push(format!("!! req#{}'s reply waits for `reply {}`", op.0, op.0));
                    self.answered.insert(op.0, result);
                }
                return Ok(());
            }
            if *inputs > MAX_INPUTS {
                return Err(format!("more than {MAX_INPUTS} inputs: the protocol loops"));
            }
            for action in self.step(input)? {
                match action {
                    Action::Request { op, request } => {
                        print::request(op.0, &request, out);
                        if self.auto {
                            let result = match self.inject.pop_front() {
                                Some(inject) => Err(inject.error(&request)),
                                None => self.perform(&request),
                            };
                            out.push(print::reply(&result));
                            queue.push_back(Input::Reply { op, result });
                        } else {
                            self.outstanding.insert(op.0, request);
                        }
                    }
                    other => {
                        out.push(print::action(&other));
                        match other {
                            Action::ArmFire(at) => self.armed_fire = at,
                            Action::ArmWait(at) => self.armed_wait = at,
                            Action::Launch(l) => {
                                self.launches.insert(l.id.0, l);
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Delivers the watch batches while nothing holds them.
    fn settle(&mut self, out: &mut Vec<String>) -> Result<(), String> {
        let mut inputs = 0;
        while !self.hold && !self.stalled {
            let Some(batch) = self.held.pop_front() else { break };
            self.deliver(batch, &mut inputs, out)?;
        }
        Ok(())
    }

    /// The watch delivers a batch: the view applies it, then the job hears of its nodes.
    fn deliver(
        &mut self,
        batch: Vec<WatchEvent>,
        inputs: &mut usize,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        out.push(print::watch(&batch));
        batch.iter().for_each(|e| self.view.apply(e));
        // The job's nodes of the batch, each once, in one input: the runtime hands over the
        // changes queued in the job's mailbox together.
        let mut nodes = Vec::new();
        for event in &batch {
            let Some((job, node)) = event.path().and_then(JobNode::parse) else { continue };
            if job == JOB
                && !matches!(node, JobNode::Other | JobNode::Root)
                && !nodes.contains(&node)
            {
                nodes.push(node);
            }
        }
        if !nodes.is_empty() {
            self.chain(Input::Changed(nodes), inputs, out)?;
        }
        Ok(())
    }

    /// A change by someone else: the watch delivers it (unless held).
    fn external(
        &mut self,
        events: Vec<WatchEvent>,
        hold: bool,
        out: &mut Vec<String>,
    ) -> Result<(), String> {
        self.ensure_protocol()?;
        if !events.is_empty() {
            self.held.push_back(events);
        }
        if hold {
            self.stalled = true;
        }
        self.settle(out)
    }

    /// Performs a request on the registry as the runtime does: a success is recorded in the
    /// view at once, its watch events come later.
    fn perform(&mut self, request: &Request) -> Result<Reply, RegistryError> {
        let owner = self.owner();
        let mut events = Vec::new();
        let result = match request {
            Request::Txn(ops) => self.registry.transaction(ops, &owner, &mut events).map(|r| {
                self.view.committed(ops, &r);
                Reply::Txn(r)
            }),
            Request::Create { path, data, mode } => self
                .registry
                .create_with_parents(path, data, *mode, &owner, &mut events)
                .map(|()| {
                    self.view.wrote(path, data, 0, mode.is_ephemeral());
                    Reply::Created
                }),
            Request::Ensure(path) => self.registry.ensure(path, &mut events).map(|created| {
                if created {
                    self.view.wrote(path, b"", 0, false);
                }
                Reply::Ensured
            }),
            Request::Get(path) => Ok(Reply::Node(self.registry.get(path).map(Entry::node))),
            Request::Children(path) => Ok(Reply::Children(self.registry.children(path))),
            Request::RegistryTime => Ok(Reply::Time(self.now + self.skew)),
        };
        if !events.is_empty() {
            self.held.push_back(events);
        }
        result
    }

    fn done(&mut self, args: Args, out: &mut Vec<String>) -> Result<(), String> {
        let pos = args.positional(1, usize::MAX)?;
        let id: u64 = parse_num(&pos[0])?;
        let launch = self.launches.remove(&id).ok_or_else(|| format!("no launch#{id} runs"))?;
        let mut items = BTreeMap::new();
        let mut raised = None;
        let mut raised_items = Vec::new();
        if pos.len() == 1 {
            items.extend(launch.items.iter().map(|&(n, _)| (n, ItemOutcome::Completed)));
        }
        for outcome in &pos[1..] {
            let (item, how) =
                outcome.split_once('=').ok_or_else(|| format!("{outcome:?}: ITEM=OUTCOME"))?;
            let item: u32 = parse_num(item)?;
            let failure = JobFailure::Error(format!("item {item} failed"));
            let outcome = match how {
                "ok" => ItemOutcome::Completed,
                "failed" => ItemOutcome::Failed(failure),
                "raised" => {
                    raised.get_or_insert(failure.clone());
                    raised_items.push(item);
                    ItemOutcome::Failed(failure)
                }
                "cancelled" => ItemOutcome::Cancelled,
                other => return Err(format!("{other:?}: ok, failed, raised or cancelled")),
            };
            items.insert(item, outcome);
        }
        let report = FireReport {
            job_name: JOB.to_owned(),
            started_ms: launch.fire_ms,
            finished_ms: self.now,
            items,
            timings: BTreeMap::new(),
            raised,
            raised_items,
        };
        self.feed(Input::Done { launch: LaunchId(id), report: Box::new(report) }, out)
    }

    fn session(&mut self, what: &str, out: &mut Vec<String>) -> Result<(), String> {
        let event = match what {
            "suspended" => SessionEvent::Suspended,
            "reconnected" => SessionEvent::Reconnected,
            "lost" => SessionEvent::Lost,
            "closed" => SessionEvent::Closed,
            "connected" => SessionEvent::Connected { session: self.session },
            "expired" => {
                // The server ends the session: its ephemerals go (the watch shows it once the
                // job has heard of the expiry), and the runtime counts it before routing.
                let mut events = Vec::new();
                self.registry.expire(&self.owner(), &mut events);
                if !events.is_empty() {
                    self.held.push_back(events);
                }
                self.sessions_lost += 1;
                self.session += 1;
                SessionEvent::Expired
            }
            other => {
                return Err(format!(
                    "session {other:?}: suspended, reconnected, lost, expired, connected, closed"
                ))
            }
        };
        self.feed(Input::Session(event), out)
    }

    /// Prints the registry's nodes (directories left out), with the view where it differs.
    fn dump(&self, prefix: Option<&str>, out: &mut Vec<String>) {
        let root = format!("/{JOB}");
        let mut paths: BTreeSet<String> = self
            .registry
            .nodes()
            .keys()
            .filter(|p| p.starts_with(&format!("{root}/")))
            .cloned()
            .collect();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            for child in self.view.children(&dir) {
                let path = format!("{dir}/{child}");
                stack.push(path.clone());
                paths.insert(path);
            }
        }
        for path in paths {
            let shown = rel(&path);
            let wanted = match prefix {
                Some(p) => shown.starts_with(p),
                None => shown != "config",
            };
            if !wanted {
                continue;
            }
            let truth = self.registry.get(&path);
            let seen = self.view.get(&path);
            let same = match (truth, seen) {
                (Some(t), Some(s)) => t.data == s.data && t.version == s.version,
                (None, None) => true,
                _ => false,
            };
            let directory = truth.is_some_and(|t| t.data.is_empty() && t.owner.is_none())
                && self.registry.has_children(&path);
            if directory && same {
                continue;
            }
            let mut line = match truth {
                Some(t) => {
                    let owner = t.owner.as_ref().map(|o| format!(" E({o})")).unwrap_or_default();
                    format!("{shown} {} v{}{owner}", print::data(&t.data), t.version)
                }
                None => format!("{shown} (absent)"),
            };
            if !same {
                let view = match seen {
                    Some(s) => format!("{} v{}", print::data(&s.data), s.version),
                    None => "absent".to_owned(),
                };
                line.push_str(&format!("  [view: {view}]"));
            }
            out.push(line);
        }
    }
}

/// Applies `job`/`config-change` options to a config.
fn configure(config: &mut JobConfig, args: &mut Args) -> Result<(), String> {
    if let Some(cron) = args.opt("cron") {
        config.cron = Some(cron);
    }
    if let Some(tz) = args.opt("tz") {
        config.time_zone = Some(tz);
    }
    if let Some(n) = args.num("count")? {
        config.sharding_total_count = n;
    }
    if let Some(on) = args.switch("failover")? {
        config.failover = on;
    }
    if let Some(on) = args.switch("misfire")? {
        config.misfire = on;
    }
    if let Some(on) = args.switch("monitor")? {
        config.monitor_execution = on;
    }
    if let Some(on) = args.switch("disabled")? {
        config.disabled = on;
    }
    if let Some(n) = args.num("reconcile")? {
        config.reconcile_interval_minutes = n;
    }
    if let Some(n) = args.num("max-diff")? {
        config.max_time_diff_seconds = n;
    }
    if let Some(s) = args.opt("strategy") {
        config.job_sharding_strategy_type = Some(s);
    }
    if let Some(on) = args.switch("static")? {
        config.static_sharding = on;
    }
    Ok(())
}

/// The detail node of `path`, if it is a node ElasticJob keeps empty: `node` and `write` put
/// DATA there (and the node empty), as shardcron writes them.
fn detail_of(path: &str) -> Option<String> {
    let of = crate::layout::Detailed::of_path(path)?;
    let (job, _) = crate::layout::JobNode::parse(path)?;
    Some(crate::layout::JobPaths::new(job).detail(of))
}
