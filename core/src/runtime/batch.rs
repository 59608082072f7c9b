//! Group commit of the jobs' registry transactions (`docs/architecture.md`, "Batched
//! transactions").
//!
//! Cron fires fall on whole seconds, so the jobs of a process fire together: 1,000 jobs due in
//! the same second each ask for a start transaction within the same few milliseconds, and their
//! items end together too. Each job's protocol still issues its own transaction and gets its own
//! outcome; the runtime hands the transactions to one committer, which waits until the runners
//! have no work left in hand ([`Activity`]: every runner idle or waiting for the registry, every
//! answer taken up), then concatenates every transaction queued into one registry transaction
//! (within the backend's [`Capability::txn_batch_ops`] and a byte budget), and gives each job
//! its slice of the results. So the fires of one tick start with one registry write, and their ends take one
//! more: the removal of a returned item's marker waits for the other items launched for the same
//! fire time to return too ([`Launches`]), at most [`END_LINGER_MS`] after the last of them was
//! launched. The wait for the runners is bounded too ([`GATHER_LIMIT_MS`]): a runner that
//! keeps working does not hold the others' transactions longer than that.
//!
//! Why that is the same as committing them one by one: the jobs' transactions touch disjoint
//! subtrees (every path of a job is under `/{job}`), so applying them together, atomically, is
//! one of the orders in which they could have applied separately. When the combined transaction
//! fails, the failure says which op failed: its job's transaction is committed again alone (it
//! gets the registry's own verdict on it, at a later moment, as if it had been sent later), and
//! the others are combined again without it. An error that leaves the outcome unknown (a lost
//! connection, a timeout) reaches every job of the batch, each with its own first path, exactly
//! as it would have reached each of them alone; any other failure that names no op falls back to
//! one transaction per job.
//!
//! [`Capability::txn_batch_ops`]: crate::registry::Capability::txn_batch_ops

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};

use super::cache::SharedCache;
use crate::handles::{Clock, Spawner};
use crate::registry::{CoordinatorRegistry, Op, RegistryError, TxnOp, TxnResult};

/// The most bytes of paths and data one combined transaction carries: well within ZooKeeper's
/// default packet limit (1 MiB) and etcd's request limit (1.5 MiB).
const BATCH_BYTES: usize = 256 * 1024;

/// The longest the committer holds a queued transaction while runners still work: a burst of
/// 1,000 fires takes tens of milliseconds of CPU on a loaded two-core machine to reach its
/// transactions. Runners that stay busy longer than this are an overload, in which fewer and
/// larger transactions are what helps.
pub(crate) const GATHER_LIMIT_MS: i64 = 50;

/// How many times the committer lets the other tasks run once the runners are quiet, before
/// it commits: the items a tick launched that end at once then report first, and their ends
/// share a transaction.
const SETTLE_ROUNDS: usize = 3;

/// After this many failed combined attempts in one batch, the rest go one by one.
const COMBINED_FAILURES: usize = 2;

/// How long after the last launch of a tick the committer holds the ends of its items that
/// returned ([`Urgency::Deferrable`]: the removal of their markers) for the others to return
/// too. Items that end together (the common case: the items of a tick are alike) are flushed
/// as soon as the last of them returned; an item still running this long after the tick's last
/// launch is not ending with the others, and the ends already in hand go without it. So a
/// returned item's marker outlives it (what the next fire of its job, a leader's reshard and a
/// failover look at) by at most the rest of its tick's launches and this; anything urgent
/// queued meanwhile (a start) ends the wait at once and takes the ends along.
pub(crate) const END_LINGER_MS: i64 = 50;

/// The longest the committer holds ends at all, from when it began to: in an overloaded burst
/// the tick's launches go on and on, and the runners whose ends are held wait meanwhile.
pub(crate) const END_HOLD_MAX_MS: i64 = 200;

type Outcome = Result<Vec<TxnResult>, RegistryError>;

/// An answer the committer sent that its runner has not taken up yet: it counts as work in
/// hand ([`Activity`]) until the runner counts its own again (`mailbox::Receiver::resume`)
/// and drops this. Without it, a runner woken by its start's answer but not yet polled counts
/// as nothing: the items launched before it could all end, the ends of its tick be committed
/// without its own, and its end take a write of its own.
#[derive(Debug)]
pub(crate) struct InHand {
    activity: Arc<Activity>,
}

impl InHand {
    fn new(activity: &Arc<Activity>) -> Self {
        activity.begin(1);
        InHand { activity: activity.clone() }
    }
}

impl Drop for InHand {
    fn drop(&mut self) {
        self.activity.end(1);
    }
}

/// Whether a transaction's commit may wait for others to join it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Urgency {
    /// A fire waits for it (its start), or anything else a job decides.
    Now,
    /// Nobody waits for it but the job's own bookkeeping: the end of items that returned from
    /// a launch for fire time `tick` (when known), which may wait for that tick's other items.
    Deferrable { tick: Option<i64> },
}

struct Queued {
    ops: Vec<TxnOp>,
    reply: oneshot::Sender<(Outcome, InHand)>,
}

impl Queued {
    /// Sends the outcome, counted as work in hand until its runner takes it up (dropped with
    /// the message if the runner is gone).
    fn answer(self, activity: &Arc<Activity>, outcome: Outcome) {
        let _ = self.reply.send((outcome, InHand::new(activity)));
    }
}

/// The launches of the process whose items have not all returned, by the fire time they were
/// launched for (the items of one tick share it): how many, and when the last was launched.
#[derive(Debug, Default)]
pub(crate) struct Launches {
    running: Mutex<BTreeMap<i64, Tick>>,
    /// A tick's last launch returned.
    ended: Notify,
}

#[derive(Debug, Clone, Copy)]
struct Tick {
    running: usize,
    last_launch_ms: i64,
}

impl Launches {
    /// Until when the ends of `tick` may wait for its items still running.
    fn hold_until(&self, tick: i64) -> Option<i64> {
        self.running.lock().get(&tick).map(|t| t.last_launch_ms + END_LINGER_MS)
    }
}

/// One running launch, counted in [`Launches`] until dropped: the launch's task holds it until
/// its end has been sent to the runner.
#[derive(Debug)]
pub(crate) struct LaunchGuard {
    launches: Arc<Launches>,
    tick: i64,
}

impl Drop for LaunchGuard {
    fn drop(&mut self) {
        let last = {
            let mut running = self.launches.running.lock();
            match running.get_mut(&self.tick) {
                Some(t) if t.running > 1 => {
                    t.running -= 1;
                    false
                }
                _ => {
                    running.remove(&self.tick);
                    true
                }
            }
        };
        if last {
            self.launches.ended.notify_one();
        }
    }
}

/// How much work the job runners have in hand: events queued in their mailboxes or being
/// handled, less the runners waiting for the registry, plus the committer's answers their
/// runners have not taken up yet ([`InHand`]). While it is above zero a runner may still be on
/// its way to a transaction of the same tick (a start's answer leads to a launch, whose end
/// belongs with its tick's).
#[derive(Debug, Default)]
pub(crate) struct Activity {
    busy: AtomicI64,
    /// The committer's wake-up (one waiter; a notification without it leaves a permit).
    quiet: Notify,
    /// Every task waiting for the runners to settle ([`TxnBatcher::settled`]).
    settled: Notify,
}

impl Activity {
    /// `n` more units of work (events queued for a runner, a runner back from a wait with
    /// what queued meanwhile).
    pub fn begin(&self, n: usize) {
        self.busy.fetch_add(n as i64, Ordering::AcqRel);
    }

    /// `n` units done (an event handled; a runner starting to wait for the registry, which
    /// cannot handle its queued events before the answer).
    pub fn end(&self, n: usize) {
        if n > 0 && self.busy.fetch_sub(n as i64, Ordering::AcqRel) <= n as i64 {
            self.quiet.notify_one();
            self.settled.notify_waiters();
        }
    }

    #[cfg(test)]
    pub fn busy(&self) -> i64 {
        self.busy.load(Ordering::Acquire)
    }

    fn is_quiet(&self) -> bool {
        self.busy.load(Ordering::Acquire) <= 0
    }
}

/// Returns once `activity` is quiet, or `limit_ms` from now at the latest.
async fn settled(activity: &Activity, clock: &dyn Clock, limit_ms: i64) {
    // Most ends find the runners quiet: no waiter registered, no timer armed.
    if activity.is_quiet() {
        return;
    }
    let mut deadline = None;
    loop {
        // Enabled before the look: a notification between the two is not missed.
        let notified = activity.settled.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if activity.is_quiet() {
            return;
        }
        let deadline = deadline.get_or_insert_with(|| clock.sleep_until(clock.now_ms() + limit_ms));
        tokio::select! {
            biased;
            () = &mut notified => {}
            () = deadline => return,
        }
    }
}

/// The transactions waiting for the committer, and what the hold of the ends needs to know
/// about them without a look at each (a burst queues thousands).
#[derive(Default)]
struct Queue {
    items: Vec<Queued>,
    /// How many may not wait.
    urgent: usize,
    /// The ticks of the ends queued, with how many of each.
    ticks: BTreeMap<i64, usize>,
}

struct Inner {
    registry: Arc<dyn CoordinatorRegistry>,
    /// Where committed writes are recorded (read your own writes) before the jobs hear back.
    cache: SharedCache,
    clock: Arc<dyn Clock>,
    activity: Arc<Activity>,
    queue: Mutex<Queue>,
    ready: Notify,
    /// Something that may not wait was queued: it ends a hold of the ends at once.
    urgent: Notify,
    launches: Arc<Launches>,
    max_ops: usize,
}

/// The jobs' side of the committer: submit a transaction, await its outcome.
#[derive(Clone)]
pub(crate) struct TxnBatcher {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TxnBatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxnBatcher").field("max_ops", &self.inner.max_ops).finish()
    }
}

impl TxnBatcher {
    /// A batcher on `registry`, its committer spawned on `spawner`, gathering while
    /// `activity` says the runners still work.
    pub fn start(
        registry: Arc<dyn CoordinatorRegistry>,
        cache: SharedCache,
        clock: Arc<dyn Clock>,
        activity: Arc<Activity>,
        spawner: &dyn Spawner,
    ) -> Self {
        let max_ops = registry.capability().txn_batch_ops.max(1);
        let inner = Arc::new(Inner {
            registry,
            cache,
            clock,
            activity,
            queue: Mutex::new(Queue::default()),
            ready: Notify::new(),
            urgent: Notify::new(),
            launches: Arc::default(),
            max_ops,
        });
        spawner.spawn(Box::pin(committer(inner.clone())));
        TxnBatcher { inner }
    }

    /// Returns once the runners have no work in hand, or [`END_LINGER_MS`] from now at the
    /// latest. An item that returned waits for this before it reports its end: in a burst the
    /// runners still to launch their items would otherwise take turns with the runners of the
    /// items already done (each end a protocol step and a transaction queued): the launches
    /// of a tick of 1,000 took 8 to 10.5 ms from the first to the last, 6 to 7 ms since. The
    /// end's write waits for the other ends of its tick anyway ([`Urgency::Deferrable`]).
    pub fn settled(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let inner = self.inner.clone();
        async move { settled(&inner.activity, inner.clock.as_ref(), END_LINGER_MS).await }
    }

    /// Counts a launch for fire time `tick` as running until the guard is dropped (after its
    /// end was sent to its runner). Its items start now, or at `starts_ms` when they wait for
    /// their fire's time (a fire taken ahead, `Settings::fire_lead`): the ends of a tick are
    /// held for the others from its last start.
    pub fn launched(&self, tick: i64, starts_ms: Option<i64>) -> LaunchGuard {
        let now_ms = self.inner.clock.now_ms().max(starts_ms.unwrap_or(i64::MIN));
        let mut running = self.inner.launches.running.lock();
        let t = running.entry(tick).or_insert(Tick { running: 0, last_launch_ms: now_ms });
        t.running += 1;
        t.last_launch_ms = t.last_launch_ms.max(now_ms);
        drop(running);
        LaunchGuard { launches: self.inner.launches.clone(), tick }
    }

    /// Commits `ops` atomically, possibly together with other jobs' transactions, and records
    /// what they wrote in the view before it returns their results. A deferrable transaction
    /// may wait up to [`END_LINGER_MS`] for the other ends of its tick. The answer counts as
    /// work in hand until the [`InHand`] returned with it is dropped: the caller drops it once
    /// its own work counts again.
    pub fn transaction(
        &self,
        ops: Vec<TxnOp>,
        urgency: Urgency,
    ) -> impl std::future::Future<Output = (Outcome, Option<InHand>)> + Send + 'static {
        // Queued now, not when first polled: the caller stops counting as work in hand only
        // once its transaction is in the queue (`mailbox::Receiver::pause` after this call).
        // The other way round, the committer could find the runners quiet and commit the tick
        // while this transaction was still on its way (one start or end in some 30 ticks at
        // 1,000 jobs took a write of its own).
        let path = ops.first().map_or_else(|| "/".to_owned(), |op| op.path().to_owned());
        let (reply, outcome) = oneshot::channel();
        {
            let mut queue = self.inner.queue.lock();
            match urgency {
                Urgency::Now => queue.urgent += 1,
                Urgency::Deferrable { tick: Some(tick) } => {
                    *queue.ticks.entry(tick).or_insert(0) += 1
                }
                Urgency::Deferrable { tick: None } => {}
            }
            queue.items.push(Queued { ops, reply });
        }
        if urgency == Urgency::Now {
            self.inner.urgent.notify_one();
        }
        self.inner.ready.notify_one();
        async move {
            // The committer is gone only when the scheduler stops.
            match outcome.await {
                Ok((outcome, in_hand)) => (outcome, Some(in_hand)),
                Err(_) => (Err(RegistryError::Closed { op: Op::Transaction, path }), None),
            }
        }
    }
}

async fn committer(inner: Arc<Inner>) {
    loop {
        // A notification without a waiter leaves a permit: nothing queued meanwhile is missed.
        while inner.queue.lock().items.is_empty() {
            inner.ready.notified().await;
        }
        gather(&inner).await;
        if ends_to_hold(&inner).is_some() {
            // Ends only, and items of their tick still run, launched just now: give those the
            // time to end too (their ends then share this write), unless something urgent
            // comes first; never longer than END_HOLD_MAX_MS (an overloaded burst keeps
            // launching, and the runners of the ends held wait for them).
            let cap = inner.clock.now_ms() + END_HOLD_MAX_MS;
            while let Some(until) = ends_to_hold(&inner) {
                let until = until.min(cap);
                if inner.clock.now_ms() >= until {
                    break;
                }
                let linger = inner.clock.sleep_until(until);
                tokio::select! {
                    biased;
                    () = linger => {}
                    () = inner.urgent.notified() => {}
                    () = inner.launches.ended.notified() => {}
                }
            }
            // The last items' ends are on their way to their runners: let them queue theirs.
            gather(&inner).await;
        }
        let queued = std::mem::take(&mut *inner.queue.lock()).items;
        for batch in split(queued, inner.max_ops) {
            commit(&inner, batch).await;
        }
    }
}

/// Waits until the runners woken by the same tick have queued theirs: until they have no work
/// in hand (and the tasks just spawned had a few rounds to report), at most
/// [`GATHER_LIMIT_MS`].
async fn gather(inner: &Inner) {
    let limit = inner.clock.now_ms() + GATHER_LIMIT_MS;
    let mut deadline = inner.clock.sleep_until(limit);
    let mut settle = SETTLE_ROUNDS;
    loop {
        while !inner.activity.is_quiet() {
            tokio::select! {
                biased;
                () = inner.activity.quiet.notified() => {}
                () = &mut deadline => return,
            }
        }
        // Quiet: the tasks just spawned (items that end at once) may still be about to
        // report; let them run before deciding the tick is over.
        if settle == 0 {
            return;
        }
        settle -= 1;
        tokio::task::yield_now().await;
    }
}

/// When everything queued may wait and some of it is the end of a tick whose other items still
/// run: until when they may wait for those (the latest such tick's hold).
fn ends_to_hold(inner: &Inner) -> Option<i64> {
    let queue = inner.queue.lock();
    if queue.urgent > 0 {
        return None;
    }
    queue.ticks.keys().filter_map(|&tick| inner.launches.hold_until(tick)).max()
}

/// Cuts the queue into batches of at most `max_ops` ops and [`BATCH_BYTES`] bytes, in queue
/// order; a transaction larger than either limit goes alone.
fn split(queued: Vec<Queued>, max_ops: usize) -> Vec<Vec<Queued>> {
    let mut batches: Vec<Vec<Queued>> = Vec::new();
    let (mut ops, mut bytes) = (0, 0);
    for q in queued {
        let (n, b) = (q.ops.len(), q.ops.iter().map(op_bytes).sum::<usize>());
        let fits = batches
            .last()
            .is_some_and(|last| !last.is_empty() && ops + n <= max_ops && bytes + b <= BATCH_BYTES);
        if fits {
            ops += n;
            bytes += b;
            if let Some(last) = batches.last_mut() {
                last.push(q);
            }
        } else {
            (ops, bytes) = (n, b);
            batches.push(vec![q]);
        }
    }
    batches
}

fn op_bytes(op: &TxnOp) -> usize {
    let data = match op {
        TxnOp::Create { data, .. } | TxnOp::Set { data, .. } => data.len(),
        TxnOp::Check { .. } | TxnOp::Absent { .. } | TxnOp::Delete { .. } => 0,
    };
    op.path().len() + data + 16
}

/// Commits one batch and answers every job in it.
async fn commit(inner: &Inner, mut batch: Vec<Queued>) {
    let mut failures = 0;
    while batch.len() > 1 && failures < COMBINED_FAILURES {
        let combined: Vec<TxnOp> = batch.iter().flat_map(|q| q.ops.iter().cloned()).collect();
        match inner.registry.transaction(combined).await {
            Ok(results) => {
                let mut results = results.into_iter();
                let answers: Vec<(Queued, Vec<TxnResult>)> = batch
                    .into_iter()
                    .map(|q| {
                        let mine = results.by_ref().take(q.ops.len()).collect();
                        (q, mine)
                    })
                    .collect();
                inner.cache.update(|c| {
                    for (q, mine) in &answers {
                        c.committed(&q.ops, mine);
                    }
                });
                for (q, mine) in answers {
                    q.answer(&inner.activity, Ok(mine));
                }
                return;
            }
            Err(e) => {
                if let Some((index, _)) = e.transaction_failure() {
                    // Nothing applied, and the failing op names its job: that transaction alone
                    // gets the registry's own verdict; the others are combined again.
                    failures += 1;
                    let Some(at) = owner_of(&batch, index) else { break };
                    let failed = batch.remove(at);
                    alone(inner, failed).await;
                } else if e.is_retryable() {
                    // The outcome is unknown: each job learns just that, about its own ops.
                    for q in batch {
                        let error = retarget(&e, q.ops.first().map_or("/", |op| op.path()));
                        q.answer(&inner.activity, Err(error));
                    }
                    return;
                } else {
                    // A failure that names no op: one transaction per job says whose it is.
                    break;
                }
            }
        }
    }
    for q in batch {
        alone(inner, q).await;
    }
}

/// Which transaction of `batch` op `index` of the combined transaction belongs to.
fn owner_of(batch: &[Queued], index: usize) -> Option<usize> {
    let mut end = 0;
    batch.iter().position(|q| {
        end += q.ops.len();
        index < end
    })
}

async fn alone(inner: &Inner, q: Queued) {
    let outcome = inner.registry.transaction(q.ops.clone()).await;
    if let Ok(results) = &outcome {
        inner.cache.update(|c| c.committed(&q.ops, results));
    }
    q.answer(&inner.activity, outcome);
}

/// `error` as the transaction starting at `path` would have got it.
fn retarget(error: &RegistryError, path: &str) -> RegistryError {
    let mut error = error.clone();
    match &mut error {
        RegistryError::NoNode { path: p, .. }
        | RegistryError::NodeExists { path: p, .. }
        | RegistryError::BadVersion { path: p, .. }
        | RegistryError::NotEmpty { path: p, .. }
        | RegistryError::EphemeralParent { path: p, .. }
        | RegistryError::InvalidPath { path: p, .. }
        | RegistryError::DataTooLarge { path: p, .. }
        | RegistryError::SessionExpired { path: p, .. }
        | RegistryError::ConnectionLoss { path: p, .. }
        | RegistryError::Timeout { path: p, .. }
        | RegistryError::Auth { path: p, .. }
        | RegistryError::Closed { path: p, .. }
        | RegistryError::Backend { path: p, .. } => path.clone_into(p),
        RegistryError::Transaction { .. } => {}
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::CreateMode;

    fn queued(paths: &[&str], data: usize) -> Queued {
        let ops = paths
            .iter()
            .map(|p| TxnOp::create(*p, vec![b'x'; data], CreateMode::Persistent))
            .collect();
        Queued { ops, reply: oneshot::channel().0 }
    }

    fn sizes(batches: &[Vec<Queued>]) -> Vec<Vec<usize>> {
        batches.iter().map(|b| b.iter().map(|q| q.ops.len()).collect()).collect()
    }

    #[test]
    fn batches_keep_queue_order_within_the_op_limit() {
        let queue = vec![
            queued(&["/a/1", "/a/2"], 1),
            queued(&["/b/1"], 1),
            queued(&["/c/1", "/c/2"], 1),
            queued(&["/d/1", "/d/2", "/d/3", "/d/4", "/d/5"], 1),
            queued(&["/e/1"], 1),
        ];
        // A transaction over the limit goes alone, and is never split.
        assert_eq!(sizes(&split(queue, 4)), vec![vec![2, 1], vec![2], vec![5], vec![1]]);
    }

    #[test]
    fn batches_keep_within_the_byte_budget() {
        let big = BATCH_BYTES / 2;
        let queue = vec![queued(&["/a"], big), queued(&["/b"], big), queued(&["/c"], 1)];
        assert_eq!(sizes(&split(queue, 100)), vec![vec![1], vec![1, 1]]);
    }

    #[test]
    fn a_failing_op_names_its_transaction() {
        let batch = vec![queued(&["/a/1", "/a/2"], 1), queued(&["/b/1"], 1), queued(&["/c/1"], 1)];
        let owners: Vec<Option<usize>> = (0..5).map(|i| owner_of(&batch, i)).collect();
        assert_eq!(owners, vec![Some(0), Some(0), Some(1), Some(2), None]);
    }

    #[tokio::test]
    async fn an_answer_counts_as_work_in_hand_until_its_runner_takes_it_up() {
        let activity = Arc::new(Activity::default());
        let (reply, answered) = oneshot::channel();
        Queued { ops: Vec::new(), reply }.answer(&activity, Ok(Vec::new()));
        assert_eq!(activity.busy(), 1, "sent, not taken up yet");
        let (outcome, in_hand) = answered.await.expect("answered");
        assert!(outcome.is_ok());
        assert_eq!(activity.busy(), 1, "received, the runner not counting its own work yet");
        drop(in_hand);
        assert_eq!(activity.busy(), 0);
        // A runner gone before its answer: the answer stops counting with it.
        let (reply, answered) = oneshot::channel();
        drop(answered);
        Queued { ops: Vec::new(), reply }.answer(&activity, Ok(Vec::new()));
        assert_eq!(activity.busy(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn ends_wait_for_the_runners_to_settle_within_a_limit() {
        let clock = crate::handles::TokioClock::starting_at(0);
        let activity = Arc::new(Activity::default());
        settled(&activity, &clock, 50).await;
        assert_eq!(clock.now_ms(), 0, "quiet: at once");

        activity.begin(2);
        let quiet_later = {
            let activity = activity.clone();
            async move {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                activity.end(1);
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                activity.end(1);
            }
        };
        tokio::join!(settled(&activity, &clock, 50), quiet_later);
        assert_eq!(clock.now_ms(), 20, "until the last work in hand is done");

        activity.begin(1);
        settled(&activity, &clock, 50).await;
        assert_eq!(clock.now_ms(), 70, "a runner that stays busy holds the end no longer");
    }

    #[test]
    fn an_unknown_outcome_names_each_transaction_own_path() {
        let lost = RegistryError::ConnectionLoss { op: Op::Transaction, path: "/a/1".into() };
        let mine = retarget(&lost, "/b/1");
        assert_eq!(
            mine,
            RegistryError::ConnectionLoss { op: Op::Transaction, path: "/b/1".into() }
        );
        assert!(mine.is_retryable());
    }
}
