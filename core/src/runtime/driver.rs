//! The driver: one task per scheduler that owns the process's single scope watch, its session
//! stream and its timer heap, feeds the cache, and routes events to the job runners. It performs
//! no registry I/O itself, so nothing a job does can stall the others' timers.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;

use super::events::SchedulerEvent;
use super::mailbox;
use super::runner::JobEvent;
use super::scope::{Opened, Watching};
use super::timer::{TimerHeap, TimerKey, TimerKind};
use super::{Command, JobId, Shared};
use crate::layout::{ItemNode, JobNode};
use crate::registry::{ScopeChange, SessionEvent, SessionEvents, WatchEvent, WatchStream};

/// Where the driver sends a watch event.
enum Route {
    /// Every job (a resync).
    Everyone,
    /// One job, as one of its nodes; `marker` for an execution record (a running marker, a
    /// ledger).
    Job { id: JobId, node: JobNode, marker: bool },
    /// No job: the root, a node no job reads, or a job this instance does not run.
    Nobody,
    /// The watch's scope changed in place by `change`, adding the nodes at `added`.
    Rescoped { change: ScopeChange, added: Vec<String> },
}

pub(crate) struct Driver {
    pub shared: Arc<Shared>,
    pub commands: mpsc::UnboundedReceiver<Command>,
    pub watch: WatchStream,
    /// The jobs' scopes, and the change of `watch`'s scope under way.
    pub watching: Watching,
    pub session: SessionEvents,
    /// The jobs by name, for the watch's events.
    pub names: BTreeMap<String, JobId>,
    /// Each job's name and mailbox.
    pub jobs: BTreeMap<JobId, (String, mailbox::Sender<JobEvent>)>,
    pub timers: TimerHeap,
    /// The deadlines of one wake-up, kept to reuse its allocation.
    pub due: Vec<(i64, TimerKey)>,
    /// The clock at the driver's last look, to notice it going back.
    pub last_now: i64,
}

impl Driver {
    pub async fn run(mut self) {
        loop {
            self.notice_clock_back();
            let next = self.timers.next_deadline();
            let clock = self.shared.handles.clock.clone();
            let timer = async move {
                match next {
                    // A fire's lateness is the scheduler's precision: wake at the deadline
                    // itself (the other deadlines tolerate the timer's millisecond or two).
                    Some((at, true)) => clock.sleep_until_exactly(at).await,
                    Some((at, false)) => clock.sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                command = self.commands.recv() => match command {
                    Some(Command::Shutdown { reply }) => {
                        let _ = reply.send(());
                        return;
                    }
                    Some(command) => self.on_command(command),
                    None => return,
                },
                opened = self.watching.opened.recv() => {
                    if let Some(opened) = opened {
                        self.on_opened(opened);
                    }
                }
                event = self.session.next() => match event {
                    Some(event) => self.on_session(event),
                    None => return,
                },
                event = self.watch.next() => match event {
                    Some(event) => {
                        // Take everything the watch has ready: the effects of one transaction
                        // then reach the cache together, and no runner sees half of them.
                        let mut batch = vec![event];
                        while let Some(Some(more)) = tokio::task::unconstrained(self.watch.next()).now_or_never() {
                            batch.push(more);
                        }
                        self.on_watch(batch);
                    }
                    None => return,
                },
                () = timer => self.on_timer(),
            }
        }
    }

    fn on_command(&mut self, command: Command) {
        match command {
            Command::Register { job, id, mailbox } => {
                self.names.insert(job.clone(), id);
                self.jobs.insert(id, (job, mailbox));
            }
            Command::Arm { job, kind, at_ms } => {
                if self.jobs.contains_key(&job) {
                    self.timers.arm((job, kind), at_ms);
                }
            }
            Command::Scope { job, scope } => {
                if self.jobs.contains_key(&job) {
                    self.watching.set(&self.shared, job, Some(scope));
                }
            }
            Command::Forget { job } => {
                self.watching.set(&self.shared, job, None);
                self.timers.disarm_job(job);
                if let Some((name, _)) = self.jobs.remove(&job) {
                    // A job added again under the same name has a new id: keep its route.
                    if self.names.get(&name) == Some(&job) {
                        self.names.remove(&name);
                    }
                }
            }
            Command::Shutdown { .. } => {}
        }
    }

    fn on_session(&mut self, event: SessionEvent) {
        if event == SessionEvent::Expired {
            self.shared.sessions_expired.fetch_add(1, Ordering::SeqCst);
        }
        self.shared.events.emit(SchedulerEvent::Session(event));
        for (_, mailbox) in self.jobs.values() {
            let _ = mailbox.send(JobEvent::Session(event));
        }
    }

    /// A swap's watch is open: its snapshot replaces the view, it replaces the old watch, the
    /// jobs whose scope changed look again, as after a resync, and the others hear of what
    /// the snapshot shows otherwise than the old watch did.
    fn on_opened(&mut self, opened: Opened) {
        let Opened { scope, asked, stream, nodes } = opened;
        let scoper = stream.scoper();
        // What the old watch has ready happened before the snapshot, or is delivered again.
        let mut ready = Vec::new();
        while let Some(Some(event)) = tokio::task::unconstrained(self.watch.next()).now_or_never() {
            ready.push(event);
        }
        if !ready.is_empty() {
            self.on_watch(ready);
        }
        let differences = self.shared.cache.read().differences(&nodes, &scope);
        self.shared.cache.update(|c| c.swap(nodes, scope.clone()));
        self.watch = stream;
        let widened = self.watching.opened(&self.shared, scope, asked, scoper);
        // The old watch may have shown changes made after the snapshot was taken, which the
        // snapshot just took back: the new watch has them ready, and no job reads the view
        // before they are applied again.
        let mut ready = Vec::new();
        while let Some(Some(event)) = tokio::task::unconstrained(self.watch.next()).now_or_never() {
            ready.push(event);
        }
        for id in &widened {
            if let Some((_, mailbox)) = self.jobs.get(id) {
                let _ = mailbox.send(JobEvent::Resynced);
            }
        }
        for path in differences {
            if let Route::Job { id, node, .. } = self.route_path(&path) {
                if let (false, Some((_, mailbox))) = (widened.contains(&id), self.jobs.get(&id)) {
                    let _ = mailbox.send(JobEvent::Changed(node));
                }
            }
        }
        if !ready.is_empty() {
            self.on_watch(ready);
        }
    }

    fn on_watch(&mut self, batch: Vec<WatchEvent>) {
        // Where each event goes, found before the cache takes the events (and their nodes).
        let routes: Vec<Route> = batch.iter().map(|event| self.route(event)).collect();
        // The event of an execution record this process wrote and recorded (a running marker,
        // its ledger) changes nothing its jobs can see: it would only wake the job for nothing
        // (twice per fire; the ledger's, once per start of a fire: a sixth of a simulated
        // cluster's job steps). Other nodes' events wake their job even then (a repaired
        // config, say, is acted on at its event).
        let seen: Vec<bool> = self
            .shared
            .cache
            .update(|c| batch.into_iter().map(|event| c.apply_seen(event)).collect());
        for (route, seen) in routes.into_iter().zip(seen) {
            match route {
                // After a gap anything may have changed: let every job look again at what
                // matters to it.
                Route::Everyone => {
                    for (_, mailbox) in self.jobs.values() {
                        let _ = mailbox.send(JobEvent::Resynced);
                    }
                }
                Route::Job { marker: true, .. } if !seen => {}
                Route::Job { id, node, .. } => {
                    if let Some((_, mailbox)) = self.jobs.get(&id) {
                        let _ = mailbox.send(JobEvent::Changed(node));
                    }
                }
                Route::Nobody => {}
                Route::Rescoped { change, added } => self.on_rescoped(&change, added),
            }
        }
    }

    /// The view took the watch's new scope (in `on_watch`, in the stream's order): the jobs
    /// whose scope the change was for look again, as after a resync; the others hear of the
    /// nodes it added that are theirs (none, unless their scopes overlap another's).
    fn on_rescoped(&mut self, change: &ScopeChange, added: Vec<String>) {
        let widened = self.watching.rescoped(&self.shared, change);
        for id in &widened {
            if let Some((_, mailbox)) = self.jobs.get(id) {
                let _ = mailbox.send(JobEvent::Resynced);
            }
        }
        for path in added {
            if let Route::Job { id, node, .. } = self.route_path(&path) {
                if let (false, Some((_, mailbox))) = (widened.contains(&id), self.jobs.get(&id)) {
                    let _ = mailbox.send(JobEvent::Changed(node));
                }
            }
        }
    }

    /// Which job a watch event concerns, and as which of its nodes.
    fn route(&self, event: &WatchEvent) -> Route {
        if let WatchEvent::Rescoped { change, added } = event {
            return Route::Rescoped {
                change: change.clone(),
                added: added.keys().cloned().collect(),
            };
        }
        match event.path() {
            Some(path) => self.route_path(path),
            None => Route::Everyone,
        }
    }

    /// Which job a change of the node at `path` concerns.
    fn route_path(&self, path: &str) -> Route {
        let Some((job, node)) = JobNode::parse(path) else { return Route::Nobody };
        if matches!(node, JobNode::Other | JobNode::Root) {
            return Route::Nobody;
        }
        match self.names.get(job) {
            Some(&id) => {
                let marker =
                    matches!(node, JobNode::Item(_, ItemNode::Running) | JobNode::Ledger(_));
                Route::Job { id, node, marker }
            }
            None => Route::Nobody,
        }
    }

    /// Tells every job when the clock went back since the driver's last look (between two
    /// events; or while it slept: its timer, measured from the clock when armed, rings before
    /// its deadline by the clock now). A job's timer armed by the earlier reading would wait
    /// for a time the clock now reaches only later, and the fires before it would go by.
    fn notice_clock_back(&mut self) {
        let now = self.shared.handles.clock.now_ms();
        if now < self.last_now - CLOCK_BACK_MS {
            for (_, mailbox) in self.jobs.values() {
                let _ = mailbox.send(JobEvent::ClockBack);
            }
        }
        self.last_now = now;
    }

    fn on_timer(&mut self) {
        let now = self.shared.handles.clock.now_ms();
        let mut due = std::mem::take(&mut self.due);
        self.timers.pop_due(now, &mut due);
        for (at_ms, (job, kind)) in due.drain(..) {
            if let Some((_, mailbox)) = self.jobs.get(&job) {
                let event = match kind {
                    TimerKind::Fire => JobEvent::Fire { fire_ms: at_ms },
                    TimerKind::Reconcile => JobEvent::Reconcile,
                    TimerKind::Wait => JobEvent::Wait,
                };
                let _ = mailbox.send(event);
            }
        }
        self.due = due;
    }
}

/// How far the clock may go back between two looks of the driver before it is taken for a
/// clock set back (jitter of a wall clock slewed by NTP is far below this).
const CLOCK_BACK_MS: i64 = 1_000;
