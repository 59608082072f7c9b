//! Scope watches: one etcd watch per entry of the scope, multiplexed on one gRPC watch stream.
//!
//! A subtree entry is a prefix watch of its node keys (see [`crate::keys`]), a node entry a
//! watch of its single key; entries another entry makes redundant are left out
//! ([`WatchScope::minimal`]). So etcd sends the client only the changes the scope covers.
//!
//! **Opening: watch first, then read.** The watches are created at the store's current
//! revision and the opening waits until etcd has confirmed every one of them; only then is the
//! scope read, at one revision `R` (the first read fixes it, the others ask for it). Every change
//! after `R` is delivered by a watch that existed before the read, and the events up to `R`,
//! which the snapshot already shows, are dropped. Watches created at the current revision start
//! *synced* in etcd: the server sends their events revision by revision on the one stream, so
//! events of different entries arrive in revision order.
//!
//! **Order across entries.** Each delivered event's revision is checked against the highest one
//! delivered so far. An event older than that would come out of the registry's order: the task
//! delivers nothing more, reads the whole scope again at one revision `R` on the same stream (its
//! watches kept, the stream read on meanwhile), sends it as a `Resync`, and goes on from `R` (every
//! watch existed before the read, so each delivers every change after `R`; what comes up to `R` is
//! dropped). It used to open every watch afresh for that, thousands of them at thousands of jobs:
//! registering 10,000 jobs took about a quarter longer, and etcd a third more CPU (the crate's
//! README). etcd sends such events when one of a stream's watches is *unsynced*: a watch created
//! while other clients' writes land (etcd reads the revision it starts from before registering it,
//! and one that starts in the past is caught up by etcd's sync loop, every 100 ms, while the others
//! go on), a watch held back because the stream's buffer was full, or one re-opened in the past.
//! etcd 3.4 gives no way to learn when such a watch has caught up (a requested progress
//! notification answers with the store's revision at once, ahead of the events still owed: etcd
//! issue 15220; the 3.5 line answers only once every watch of the stream is synced), so holding
//! later events back until it has is not possible there. Events of one revision (one transaction)
//! are delivered together, entry by entry.
//!
//! **Resuming.** When the etcd stream breaks (server restart, link loss), a scope of one entry
//! opens it again with its watch starting right after the last revision it had delivered (or
//! that a progress notification said it had caught up with), so nothing is lost or repeated. A
//! scope of several entries opens its watches afresh and resyncs: watches started at a past
//! revision are caught up by etcd each on its own, so their events could interleave out of the
//! registry's order. If etcd compacted
//! that revision away meanwhile, the history is gone: the task opens the watches and reads the
//! scope again, and sends a `Resync`. It also resyncs after the client's session expired, as the
//! contract asks.
//!
//! **Changing the scope in place** (`WatchScoper::rescope`). The task adds a watch per entry the
//! new scope adds to the same etcd stream, created at the current revision like the others
//! (so synced, and in revision order with them), waits until etcd confirmed each (delivering
//! the other watches' events meanwhile), reads the added ranges at one revision, sends the
//! `Rescoped` event with what they hold, and cancels the watches of the entries the new scope
//! drops (their confirmations, and whatever they still had in flight, are dropped). The
//! kept watches go on undisturbed; an added one's events up to its read are dropped. The
//! added nodes are as of the read, which may be later than the last event delivered: their
//! later events are not repeated. A failure leaves the scope as it was (the stream is opened
//! again for it, with a `Resync`). An empty scope has no etcd stream; its first change opens
//! one.
//!
//! **Ending.** The task ends with the subscriber's stream or the client; dropping the etcd
//! stream cancels its watches on the server.

use std::collections::{BTreeMap, BTreeSet};

use etcd_client::{
    EventType, GetOptions, KvClient, WatchClient, WatchOptions, WatchResponse,
    WatchStream as EtcdStream,
};
use futures::future::try_join_all;
use shardcron_core::registry::{
    path, Node, Op, RegistryError, ScopeChange, SessionEvent, WatchEvent, WatchScope,
};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::{oneshot, watch};

use crate::error::{self, map, BACKEND};
use crate::keys::{decode_value, KeySpace};
use crate::reads;
use crate::scope_form::ScopeForm;
use crate::session::{Session, RETRY_PAUSE};
pub(crate) use crate::watched::prefix_end;
use crate::watched::{ranges_of, watch_id, Range, Watched};

/// Keys per page when reading a subtree (values are up to 1 MiB each).
const PAGE: i64 = 128;

/// Ranges read at once by a snapshot. A scheduler of ten thousand jobs watches a hundred
/// thousand ranges: read all at once, each an HTTP/2 stream of its own with its buffers, a
/// resync took tens of megabytes that the allocator kept afterwards.
const READS_AT_ONCE: usize = 32;

/// From how many reads a snapshot considers reading key intervals instead ([`reads::lanes`]).
const LANES_FROM_READS: usize = 64;

/// Keys of the namespace per read below which a snapshot reads key intervals: a request costs
/// etcd and the client about as much as some tens of small keys, so reading up to this many
/// keys (most of them the jobs' own) costs less than one request per job.
const KEYS_PER_READ: usize = 64;

/// Options for the watch of `range` with id `id` on its stream, from `start` (0: now).
fn watch_options(keys: &KeySpace, range: &Range, id: i64, start: i64) -> WatchOptions {
    // Progress notifications move a quiet watch's revision on, so that a re-open after a long
    // quiet spell does not ask for history compacted meanwhile.
    let mut options = WatchOptions::new().with_watch_id(id).with_progress_notify();
    if let Some(end) = range.end(keys) {
        options = options.with_range(end);
    }
    if start > 0 {
        options = options.with_start_revision(start);
    }
    options
}

/// The key ranges of `scope`: one per entry of its minimal form (the root's node entry has
/// none).
pub(crate) fn ranges(scope: &WatchScope) -> Vec<Range> {
    ranges_of(&scope.minimal())
}

/// Reads one range at revision `rev` (0: the current one); returns the revision read at.
async fn read_range(
    kv: &KvClient,
    keys: &KeySpace,
    range: &Range,
    rev: i64,
) -> Result<(i64, Vec<(String, Node)>), RegistryError> {
    let (from, end) = (range.key(keys), range.end(keys));
    let mut nodes = Vec::new();
    let rev = read_keys(kv, keys, from, end, rev, range.path(), |_, at, node| {
        nodes.push((at, node));
    })
    .await?;
    Ok((rev, nodes))
}

/// Reads the key `from` (`end` `None`) or the keys from `from` up to `end`, in pages, at
/// revision `rev` (0: the current one), handing each node to `found` with its key; returns
/// the revision read at. `label` names the read in errors.
async fn read_keys(
    kv: &KvClient,
    keys: &KeySpace,
    mut from: Vec<u8>,
    end: Option<Vec<u8>>,
    mut rev: i64,
    label: &str,
    mut found: impl FnMut(&[u8], String, Node),
) -> Result<i64, RegistryError> {
    loop {
        let mut client = kv.clone();
        let mut options = GetOptions::new().with_revision(rev);
        if let Some(end) = &end {
            options = options.with_range(end.clone()).with_limit(PAGE);
        }
        let resp =
            client.get(from.clone(), Some(options)).await.map_err(|e| map(e, Op::Watch, label))?;
        if rev == 0 {
            rev = resp.header().map_or(0, |h| h.revision());
        }
        for kv in resp.kvs() {
            if let Some((at, node)) = node_of(keys, kv.key(), kv.value(), kv.lease()) {
                found(kv.key(), at, node);
            }
        }
        match resp.kvs().last() {
            Some(last) if resp.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => return Ok(rev),
        }
    }
}

/// Reads every range at one revision: the first read fixes it, the others ask for it and go
/// out together; ranges under one job's root are read as its subtree ([`crate::reads`]), and
/// the subtrees of many jobs as a few key intervals where the namespace holds not many more
/// keys than they do.
/// Returns the revision and the nodes by client path.
pub(crate) async fn snapshot(
    kv: &KvClient,
    keys: &KeySpace,
    ranges: &[&Range],
) -> Result<(i64, BTreeMap<String, Node>), RegistryError> {
    let reads = reads::plan(ranges);
    if reads.len() < LANES_FROM_READS {
        return read_each(kv, keys, &reads, 0).await;
    }
    let Some(lanes) = reads::lanes(&reads, keys, READS_AT_ONCE) else {
        return read_each(kv, keys, &reads, 0).await;
    };
    // Counting the namespace's keys fixes the revision, and tells what the lanes would read.
    let (from, to) = reads::every_node(keys);
    let mut client = kv.clone();
    let counted = client
        .get(from, Some(GetOptions::new().with_range(to).with_count_only()))
        .await
        .map_err(|e| map(e, Op::Watch, path::ROOT))?;
    let rev = counted.header().map_or(0, |h| h.revision());
    let stored = usize::try_from(counted.count()).unwrap_or(usize::MAX);
    if stored > reads.len().saturating_mul(KEYS_PER_READ) {
        return read_each(kv, keys, &reads, rev).await;
    }
    // One map for every lane, filled as the pages come: the nodes are not held twice.
    let nodes = parking_lot::Mutex::new(BTreeMap::new());
    let read = try_join_all(lanes.iter().map(|lane| {
        let (from, to) = (lane.from.clone(), Some(lane.to.clone()));
        let nodes = &nodes;
        read_keys(kv, keys, from, to, rev, path::ROOT, move |key, at, node| {
            if lane.keeps(key, &at) {
                nodes.lock().insert(at, node);
            }
        })
    }));
    read.await?;
    Ok((rev, nodes.into_inner()))
}

/// Makes `reads` one by one, `READS_AT_ONCE` at a time, at revision `rev` (0: the first
/// read's).
async fn read_each(
    kv: &KvClient,
    keys: &KeySpace,
    reads: &[reads::Read<'_>],
    rev: i64,
) -> Result<(i64, BTreeMap<String, Node>), RegistryError> {
    let Some((first, rest)) = reads.split_first() else { return Ok((rev, BTreeMap::new())) };
    let (rev, found) = read_range(kv, keys, &first.range, rev).await?;
    let mut nodes: BTreeMap<String, Node> =
        found.into_iter().filter(|(at, _)| first.keeps(at)).collect();
    for chunk in rest.chunks(READS_AT_ONCE) {
        let found = try_join_all(chunk.iter().map(|read| read_range(kv, keys, &read.range, rev)));
        for (read, (_, found)) in chunk.iter().zip(found.await?) {
            nodes.extend(found.into_iter().filter(|(at, _)| read.keeps(at)));
        }
    }
    Ok((rev, nodes))
}

/// A stored key and value as a client path and node; `None` (logged) for anything not ours.
fn node_of(keys: &KeySpace, key: &[u8], value: &[u8], lease: i64) -> Option<(String, Node)> {
    let path = keys.path_of(key);
    let decoded = decode_value(value);
    match (path, decoded) {
        (Some(path), Some((version, data))) => {
            Some((path, Node { data: data.to_vec(), version, ephemeral: lease != 0 }))
        }
        _ => {
            tracing::error!(key = %String::from_utf8_lossy(key), "etcd: skipping a key that is not a shardcron node");
            None
        }
    }
}

/// Opens one etcd stream with a watch per range, each from `start(index)` (0: now).
async fn open_stream(
    watch: &WatchClient,
    keys: &KeySpace,
    ranges: &[&Range],
    start: impl Fn(usize) -> i64,
) -> Result<EtcdStream, RegistryError> {
    let Some(first) = ranges.first() else {
        return Err(RegistryError::Backend {
            backend: BACKEND,
            op: Op::Watch,
            path: path::ROOT.to_owned(),
            message: "a watch stream needs at least one range".into(),
            retryable: false,
            source: None,
        });
    };
    let mut client = watch.clone();
    let mut stream = client
        .watch(first.key(keys), Some(watch_options(keys, first, watch_id(0), start(0))))
        .await
        .map_err(|e| map(e, Op::Watch, first.path()))?;
    for (index, range) in ranges.iter().enumerate().skip(1) {
        stream
            .watch(range.key(keys), Some(watch_options(keys, range, watch_id(index), start(index))))
            .await
            .map_err(|e| map(e, Op::Watch, range.path()))?;
    }
    Ok(stream)
}

/// A scope's watches, confirmed by etcd, and the scope read after them.
pub(crate) struct Opened {
    pub stream: EtcdStream,
    /// The revision the scope was read at.
    pub rev: i64,
    pub nodes: BTreeMap<String, Node>,
    /// Responses that arrived while the watches were being confirmed, in order.
    pub early: Vec<WatchResponse>,
}

/// Creates the watches of `ranges` at the current revision, waits until etcd has confirmed
/// each, then reads the scope (see the module documentation).
pub(crate) async fn open(
    watch: &WatchClient,
    kv: &KvClient,
    keys: &KeySpace,
    ranges: &[&Range],
) -> Result<Opened, RegistryError> {
    let mut stream = open_stream(watch, keys, ranges, |_| 0).await?;
    let label = ranges.first().map_or(path::ROOT, |r| r.path());
    let mut confirmed = 0;
    let mut early = Vec::new();
    while confirmed < ranges.len() {
        let resp = match stream.message().await {
            Ok(Some(resp)) => resp,
            Ok(None) => {
                return Err(RegistryError::ConnectionLoss { op: Op::Watch, path: label.into() })
            }
            Err(e) => return Err(map(e, Op::Watch, label)),
        };
        if resp.canceled() {
            let index = usize::try_from(resp.watch_id() - 1).unwrap_or(usize::MAX);
            let at = ranges.get(index).map_or(label, |r| r.path());
            return Err(RegistryError::Backend {
                backend: BACKEND,
                op: Op::Watch,
                path: at.to_owned(),
                message: format!("etcd refused the watch: {}", resp.cancel_reason()),
                retryable: true,
                source: None,
            });
        }
        if resp.created() {
            confirmed += 1;
        } else {
            early.push(resp);
        }
    }
    let (rev, nodes) = snapshot(kv, keys, ranges).await?;
    Ok(Opened { stream, rev, nodes, early })
}

/// What the watch task works with.
pub(crate) struct WatchTask {
    pub kv: KvClient,
    pub watch: WatchClient,
    pub keys: KeySpace,
    pub tx: UnboundedSender<WatchEvent>,
    /// The client's session events (an expiry calls for a resync).
    pub session: UnboundedReceiver<SessionEvent>,
    /// The client's session, whose lease deadline is checked before anything is delivered.
    pub lease: Session,
    pub shutdown: watch::Receiver<bool>,
    /// How long opening the watches and reading the scope may take before it is tried again
    /// (the client's operation timeout): a call stuck on a connection that died silently would
    /// otherwise leave the subscriber's view behind for good.
    pub timeout: std::time::Duration,
    /// The ranges of the current etcd stream, with their ids and how far each has delivered.
    watched: Watched,
    /// Watches cancelled by a change of scope, whose cancellation etcd has not confirmed.
    cancelled: BTreeSet<i64>,
    /// The highest revision delivered to the subscriber (or read by its snapshot).
    delivered: i64,
    /// An event came out of the registry's order: nothing more is delivered until the scope
    /// has been read again on the same stream ([`WatchTask::read_again`]).
    behind: bool,
    /// What the subscriber watches (client paths), as one range per entry of its minimal
    /// form (but the root's node entry) and the other entries.
    form: ScopeForm,
    /// The generation of the last scope change applied ([`ScopeChange::generation`]).
    generation: u64,
    /// Changes of the scope asked for through the stream's scoper.
    pub requests: UnboundedReceiver<Rescope>,
}

/// A change of a watch's scope asked for, and where to answer.
pub(crate) type Rescope = (ScopeChange, oneshot::Sender<Result<(), RegistryError>>);

/// Watches added to a stream ([`WatchTask::add_watches`]).
struct Added {
    /// Their ids, in the order of the ranges.
    ids: Vec<i64>,
    /// The revision they were read at, and what they hold.
    rev: i64,
    nodes: BTreeMap<String, Node>,
    /// The stream's responses that came while they were read, in order.
    held: Vec<WatchResponse>,
}

/// Why one etcd watch stream ended.
enum Break {
    /// Re-open from each range's revision (stream broken or cancelled).
    Reopen,
    /// History lost, the session expired, or reading the scope again failed: open the
    /// watches afresh and read the scope again.
    Resync,
    /// The subscriber or the client is gone.
    Stop,
    /// The scope is empty now: no etcd stream until a change gives it entries.
    Quiet,
}

impl WatchTask {
    /// A task for `ranges` whose subscriber was sent the snapshot read at `rev`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kv: KvClient,
        watch: WatchClient,
        keys: KeySpace,
        ranges: Vec<Range>,
        tx: UnboundedSender<WatchEvent>,
        lease: Session,
        shutdown: watch::Receiver<bool>,
        timeout: std::time::Duration,
        rev: i64,
        scope: WatchScope,
        requests: UnboundedReceiver<Rescope>,
    ) -> Self {
        WatchTask {
            kv,
            watch,
            keys,
            watched: Watched::new(ranges, rev),
            tx,
            session: lease.subscribe(),
            lease,
            shutdown,
            timeout,
            cancelled: BTreeSet::new(),
            delivered: rev,
            behind: false,
            form: ScopeForm::new(&scope),
            generation: 0,
            requests,
        }
    }

    /// The ranges numbered in order, for a new etcd stream (the old one's ids mean nothing
    /// on it).
    fn renumber(&mut self) {
        self.watched.compact();
        self.cancelled.clear();
        self.behind = false;
    }

    /// Follows `stream` (with the responses that came before it was handed over), re-opening
    /// and resyncing as needed until the subscriber or the client is gone.
    pub async fn run(mut self, stream: Option<EtcdStream>, early: Vec<WatchResponse>) {
        let mut next = match stream {
            Some(stream) => self.follow(stream, early).await,
            None => Break::Quiet,
        };
        loop {
            // A stream that breaks while the scope is owed a read has dropped events past the
            // revision its watches would resume from: only a resync makes up for them.
            if self.behind && matches!(next, Break::Reopen) {
                next = Break::Resync;
            }
            next = match next {
                Break::Stop => return,
                Break::Quiet => match self.quiet().await {
                    Some((stream, early)) => self.follow(stream, early).await,
                    None => return,
                },
                // Nothing to watch: no etcd stream (a resync of nothing is empty).
                Break::Reopen | Break::Resync if self.watched.is_empty() => {
                    if self.tx.send(WatchEvent::Resync { nodes: BTreeMap::new() }).is_err() {
                        return;
                    }
                    Break::Quiet
                }
                // A watch re-opened at a past revision starts unsynced in etcd, which catches it
                // up on its own schedule: with several entries, a later change of one entry
                // could come before an earlier one of another. So a scope of several entries
                // opens afresh and resyncs; one entry resumes where it was.
                Break::Reopen if self.watched.len() > 1 => match self.resync().await {
                    Some((stream, early)) => self.follow(stream, early).await,
                    None => return,
                },
                Break::Reopen => {
                    if self.pause().await {
                        return;
                    }
                    self.renumber();
                    let through: Vec<i64> = self.watched.iter().map(|(_, _, t)| t).collect();
                    let ranges = self.watched.ranges();
                    let reopen = open_stream(&self.watch, &self.keys, &ranges, |i| through[i] + 1);
                    match tokio::time::timeout(self.timeout, reopen).await {
                        Ok(Ok(stream)) => self.follow(stream, Vec::new()).await,
                        Ok(Err(e)) => {
                            tracing::debug!(scope = %self.label(), error = %e, "etcd watch: cannot re-open; retrying");
                            Break::Reopen
                        }
                        Err(_) => {
                            tracing::warn!(scope = %self.label(), after = ?self.timeout, "etcd watch: no answer to re-opening the stream; retrying");
                            Break::Reopen
                        }
                    }
                }
                Break::Resync => match self.resync().await {
                    Some((stream, early)) => self.follow(stream, early).await,
                    None => return,
                },
            };
        }
    }

    /// An empty scope: nothing to watch; a resync (empty) after an expiry, as for any scope.
    /// Returns the etcd stream of the scope a change asked for, once one covers something.
    async fn quiet(&mut self) -> Option<(EtcdStream, Vec<WatchResponse>)> {
        // Nothing is watched: nothing is owed a read.
        self.behind = false;
        loop {
            tokio::select! {
                biased;
                changed = self.shutdown.changed() => {
                    if changed.is_err() || *self.shutdown.borrow() {
                        return None;
                    }
                }
                () = self.tx.closed() => return None,
                ev = self.session.recv() => match ev {
                    Some(SessionEvent::Expired) => {
                        if self.tx.send(WatchEvent::Resync { nodes: BTreeMap::new() }).is_err() {
                            return None;
                        }
                    }
                    Some(SessionEvent::Closed) | None => return None,
                    Some(_) => {}
                },
                request = self.requests.recv() => {
                    let (change, reply) = request?;
                    if change.generation <= self.generation {
                        // A retry of a change applied already.
                        let _ = reply.send(Ok(()));
                        continue;
                    }
                    let plan = self.form.apply(&change);
                    let ranges = ranges_of(self.form.minimal());
                    if ranges.is_empty() {
                        let added = BTreeMap::new();
                        self.generation = change.generation;
                        let sent = self.tx.send(WatchEvent::Rescoped { change, added });
                        let _ = reply.send(if sent.is_ok() { Ok(()) } else { Err(self.closed()) });
                        continue;
                    }
                    // The first entries: opened and read as a new watch's are.
                    let refs: Vec<&Range> = ranges.iter().collect();
                    let attempt = open(&self.watch, &self.kv, &self.keys, &refs);
                    let opened = match tokio::time::timeout(self.timeout, attempt).await {
                        Ok(Ok(opened)) => opened,
                        Ok(Err(e)) => {
                            self.form.undo(&plan);
                            let _ = reply.send(Err(e));
                            continue;
                        }
                        Err(_) => {
                            self.form.undo(&plan);
                            let _ = reply.send(Err(self.timed_out()));
                            continue;
                        }
                    };
                    let added = opened.nodes;
                    self.generation = change.generation;
                    if self.tx.send(WatchEvent::Rescoped { change, added }).is_err() {
                        let _ = reply.send(Err(self.closed()));
                        return None;
                    }
                    self.watched = Watched::new(ranges, opened.rev);
                    self.cancelled.clear();
                    self.delivered = self.delivered.max(opened.rev);
                    let _ = reply.send(Ok(()));
                    return Some((opened.stream, opened.early));
                }
            }
        }
    }

    fn closed(&self) -> RegistryError {
        RegistryError::Closed { op: Op::Watch, path: self.label().to_owned() }
    }

    /// A change of scope cut short by the stream ending for a re-open or a resync.
    fn interrupted(&self) -> RegistryError {
        RegistryError::Backend {
            backend: BACKEND,
            op: Op::Watch,
            path: self.label().to_owned(),
            message: "the watch stream is being opened again; the change of scope was not \
                      applied: send it again"
                .to_owned(),
            retryable: true,
            source: None,
        }
    }

    fn timed_out(&self) -> RegistryError {
        RegistryError::Timeout { op: Op::Watch, path: self.label().to_owned(), after: self.timeout }
    }

    /// Changes the scope of the watch following `stream` in place: watches for the ranges it
    /// adds go onto the same etcd stream (created at the current revision, so in etcd's order
    /// with the others), the added ranges are read at one revision once etcd confirmed them,
    /// the `Rescoped` event carries what they hold, and the watches of the ranges it drops are
    /// cancelled. `Some` when the stream must end. Costs what the change changes: the ranges
    /// come from the entries it names ([`WatchScope::widening`], [`WatchScope::narrowing`]).
    async fn rescope(
        &mut self,
        stream: &mut EtcdStream,
        change: ScopeChange,
        reply: oneshot::Sender<Result<(), RegistryError>>,
    ) -> Option<Break> {
        let plan = self.form.apply(&change);
        let added: Vec<Range> =
            ranges_of(&plan.joined).into_iter().filter(|r| !self.watched.contains(r)).collect();
        let Added { ids, rev, nodes, held } = match self.add_watches(stream, &added).await {
            Ok(done) => done,
            Err((error, next)) => {
                // The scope stays as it was: the stream is opened again for it.
                self.form.undo(&plan);
                let _ = reply.send(Err(error));
                return Some(next);
            }
        };
        // Kept ranges go on as they were; added ones deliver what comes after their read.
        for (range, id) in added.into_iter().zip(ids) {
            self.watched.fill_id(id, range, rev);
        }
        for range in ranges_of(&plan.left) {
            let Some(id) = self.watched.remove(&range) else { continue };
            if let Err(e) = stream.cancel(id).await {
                tracing::debug!(scope = %self.label(), error = %e, "etcd watch: cannot cancel a dropped range");
            }
            self.cancelled.insert(id);
        }
        // `added` may hold, as of `rev`, nodes the old scope covered through a range now
        // dropped (a node entry inside an added subtree): the read is their latest word.
        self.generation = change.generation;
        if self.tx.send(WatchEvent::Rescoped { change, added: nodes }).is_err() {
            let _ = reply.send(Err(self.closed()));
            return Some(Break::Stop);
        }
        let _ = reply.send(Ok(()));
        held.into_iter().find_map(|resp| self.on_response(resp))
    }

    /// Adds a watch per range of `added` to `stream`, waits until etcd confirmed each
    /// (delivering the other watches' responses meanwhile), then reads the ranges at one
    /// revision. On failure, the error for the change and how the stream must go on.
    async fn add_watches(
        &mut self,
        stream: &mut EtcdStream,
        added: &[Range],
    ) -> Result<Added, (RegistryError, Break)> {
        let mut ids = Vec::with_capacity(added.len());
        for range in added {
            let id = self.watched.reserve();
            if let Err(e) = stream
                .watch(range.key(&self.keys), Some(watch_options(&self.keys, range, id, 0)))
                .await
            {
                return Err((map(e, Op::Watch, range.path()), Break::Reopen));
            }
            ids.push(id);
        }
        let mut unconfirmed: BTreeSet<i64> = ids.iter().copied().collect();
        while !unconfirmed.is_empty() {
            let message = match tokio::time::timeout(self.timeout, stream.message()).await {
                Ok(message) => message,
                Err(_) => return Err((self.timed_out(), Break::Reopen)),
            };
            let resp = match message {
                Ok(Some(resp)) => resp,
                Ok(None) => {
                    let path = self.label().to_owned();
                    return Err((
                        RegistryError::ConnectionLoss { op: Op::Watch, path },
                        Break::Reopen,
                    ));
                }
                Err(e) => {
                    let next = if error::is_compacted(&e) { Break::Resync } else { Break::Reopen };
                    return Err((map(e, Op::Watch, self.label()), next));
                }
            };
            if unconfirmed.contains(&resp.watch_id()) {
                if resp.canceled() {
                    let error = RegistryError::Backend {
                        backend: BACKEND,
                        op: Op::Watch,
                        path: self.label().to_owned(),
                        message: format!("etcd refused the watch: {}", resp.cancel_reason()),
                        retryable: true,
                        source: None,
                    };
                    return Err((error, Break::Resync));
                }
                if resp.created() {
                    unconfirmed.remove(&resp.watch_id());
                }
                continue;
            }
            if let Some(next) = self.on_response(resp) {
                // Only a subscriber or client gone is `Closed`: the runtime gives a change up
                // on it. A stream opened again (history compacted, a watch cancelled) ends
                // this change unapplied, to be sent again (100 jobs registered at once hung on
                // it for good). An event out of order goes on: the scope is read again after
                // the change.
                let error = match next {
                    Break::Stop => self.closed(),
                    _ => self.interrupted(),
                };
                return Err((error, next));
            }
        }
        let refs: Vec<&Range> = added.iter().collect();
        let (rev, nodes, held) = self.read_following(stream, &refs).await?;
        Ok(Added { ids, rev, nodes, held })
    }

    /// Reads `ranges` at one revision while the stream is read on, its responses held for
    /// after the read: left unread, it backs up into etcd, which then holds back the watches
    /// it cannot send to (and sends their events later, out of order). A failed read calls
    /// for a resync, a broken stream for a re-open.
    async fn read_following(
        &self,
        stream: &mut EtcdStream,
        ranges: &[&Range],
    ) -> Result<(i64, BTreeMap<String, Node>, Vec<WatchResponse>), (RegistryError, Break)> {
        let mut held = Vec::new();
        let read = snapshot(&self.kv, &self.keys, ranges);
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(read, deadline);
        loop {
            tokio::select! {
                biased;
                read = &mut read => {
                    return match read {
                        Ok((rev, nodes)) => Ok((rev, nodes, held)),
                        Err(e) => Err((e, Break::Resync)),
                    };
                }
                () = &mut deadline => return Err((self.timed_out(), Break::Resync)),
                message = stream.message() => match message {
                    Ok(Some(resp)) => held.push(resp),
                    Ok(None) => {
                        let path = self.label().to_owned();
                        return Err((RegistryError::ConnectionLoss { op: Op::Watch, path }, Break::Reopen));
                    }
                    Err(e) => {
                        let next = if error::is_compacted(&e) { Break::Resync } else { Break::Reopen };
                        return Err((map(e, Op::Watch, self.label()), next));
                    }
                },
            }
        }
    }

    /// Reads the whole scope again on the same stream after an event came out of order, and
    /// sends it as a `Resync`; `Some` when the stream must end (a failed read falls back to
    /// opening the watches afresh).
    ///
    /// Every watch of the stream was created before the read, so each delivers every change
    /// of its range after the read's revision `R`, in revision order: dropping what comes up
    /// to `R` (the read shows it) and going on from `R` delivers every change once. The watch
    /// whose late event started this has caught up by the time etcd sends it (etcd moves a
    /// watch it caught up to its synced ones), so its later events come in order with the
    /// others'. A resync would also create every watch again (thousands, at thousands of
    /// jobs), which costs etcd and the client more and brings nothing here.
    async fn read_again(&mut self, stream: &mut EtcdStream) -> Option<Break> {
        while self.behind {
            let begin = tokio::time::Instant::now();
            let ranges = self.watched.ranges();
            let read = self.read_following(stream, &ranges).await;
            let count = ranges.len();
            let (rev, nodes, held) = match read {
                Ok(read) => read,
                Err((e, next)) => {
                    tracing::debug!(scope = %self.label(), error = %e, "etcd watch: cannot read the scope again; opening it afresh");
                    return Some(next);
                }
            };
            tracing::debug!(
                scope = %self.label(),
                ranges = count,
                nodes = nodes.len(),
                took = ?begin.elapsed(),
                "etcd watch: read again"
            );
            if self.tx.send(WatchEvent::Resync { nodes }).is_err() {
                return Some(Break::Stop);
            }
            self.watched.set_through(rev);
            self.delivered = rev;
            self.behind = false;
            // What came during the read: up to `R` dropped, later delivered (or late again).
            if let Some(next) = held.into_iter().find_map(|resp| self.on_response(resp)) {
                return Some(next);
            }
        }
        None
    }

    /// Opens the watches and reads the scope again, sends the `Resync`; retries until it works.
    /// `None` when the task should end.
    async fn resync(&mut self) -> Option<(EtcdStream, Vec<WatchResponse>)> {
        self.renumber();
        loop {
            let ranges = self.watched.ranges();
            let begin = tokio::time::Instant::now();
            let attempt = open(&self.watch, &self.kv, &self.keys, &ranges);
            let result = tokio::time::timeout(self.timeout, attempt).await.unwrap_or_else(|_| {
                Err(RegistryError::Timeout {
                    op: Op::Watch,
                    path: self.label().to_owned(),
                    after: self.timeout,
                })
            });
            match result {
                Ok(opened) => {
                    tracing::debug!(
                        scope = %self.label(),
                        ranges = ranges.len(),
                        nodes = opened.nodes.len(),
                        took = ?begin.elapsed(),
                        "etcd watch: resynced"
                    );
                    if self.tx.send(WatchEvent::Resync { nodes: opened.nodes }).is_err() {
                        return None;
                    }
                    self.watched.set_through(opened.rev);
                    self.delivered = opened.rev;
                    return Some((opened.stream, opened.early));
                }
                Err(e) => {
                    tracing::debug!(scope = %self.label(), error = %e, "etcd watch: resync failed; retrying");
                    if self.pause().await {
                        return None;
                    }
                }
            }
        }
    }

    /// The subscriber's first entry, naming the scope in messages.
    fn label(&self) -> &str {
        self.form.label()
    }

    /// Waits a little before retrying; true if the task should end instead.
    async fn pause(&mut self) -> bool {
        tokio::select! {
            biased;
            changed = self.shutdown.changed() => changed.is_err() || *self.shutdown.borrow(),
            () = self.tx.closed() => true,
            () = tokio::time::sleep(RETRY_PAUSE) => false,
        }
    }

    /// Runs one etcd watch stream until it breaks.
    async fn follow(&mut self, mut stream: EtcdStream, early: Vec<WatchResponse>) -> Break {
        for resp in early {
            if let Some(next) = self.on_response(resp) {
                return next;
            }
        }
        loop {
            if let Some(next) = self.read_again(&mut stream).await {
                return next;
            }
            let message = tokio::select! {
                biased;
                changed = self.shutdown.changed() => {
                    if changed.is_err() || *self.shutdown.borrow() { return Break::Stop }
                    continue;
                }
                () = self.tx.closed() => return Break::Stop,
                ev = self.session.recv() => match ev {
                    Some(SessionEvent::Expired) => return Break::Resync,
                    Some(SessionEvent::Closed) | None => return Break::Stop,
                    Some(_) => continue,
                },
                request = self.requests.recv() => {
                    let Some((change, reply)) = request else { return Break::Stop };
                    if change.generation <= self.generation {
                        // A retry of a change applied already.
                        let _ = reply.send(Ok(()));
                        continue;
                    }
                    if let Some(next) = self.rescope(&mut stream, change, reply).await {
                        return next;
                    }
                    if self.watched.is_empty() {
                        return Break::Quiet;
                    }
                    continue;
                }
                message = stream.message() => message,
            };
            let resp = match message {
                Ok(Some(resp)) => resp,
                Ok(None) => return Break::Reopen,
                Err(e) if error::is_compacted(&e) => return Break::Resync,
                Err(e) => {
                    tracing::debug!(scope = %self.label(), error = %e, "etcd watch stream broke; resuming");
                    return Break::Reopen;
                }
            };
            if let Some(next) = self.on_response(resp) {
                return next;
            }
        }
    }

    /// Delivers what one response holds; `Some` when the stream must end.
    fn on_response(&mut self, resp: WatchResponse) -> Option<Break> {
        if resp.compact_revision() > 0 {
            tracing::info!(
                scope = %self.label(),
                compacted = resp.compact_revision(),
                "etcd watch: history compacted; resyncing"
            );
            return Some(Break::Resync);
        }
        if resp.canceled() {
            // A watch this task cancelled when its range left the scope.
            if self.cancelled.remove(&resp.watch_id()) {
                self.watched.cancelled(resp.watch_id());
                return None;
            }
            tracing::debug!(scope = %self.label(), reason = resp.cancel_reason(), "etcd watch cancelled; re-opening");
            return Some(Break::Reopen);
        }
        // A range dropped from the scope: what it still had in flight is no longer covered.
        let id = resp.watch_id();
        let through = self.watched.through(id)?;
        if !resp.events().is_empty() {
            // The events may be the deletion of this client's own nodes by the expiry of a
            // lease whose deadline passed while the process was paused: `Lost` goes first.
            self.lease.lapse_if_due();
        }
        let mut last = None;
        for event in resp.events() {
            let Some(kv) = event.kv() else { continue };
            let rev = kv.mod_revision();
            last = Some(rev);
            // In the snapshot, or delivered before a re-open.
            if rev <= through {
                continue;
            }
            // Owed a read of the scope: it will show this change.
            if self.behind {
                continue;
            }
            if rev < self.delivered {
                tracing::debug!(
                    scope = %self.label(),
                    entry = %self.watched.range(id).map_or("", |r| r.path()),
                    rev,
                    delivered = self.delivered,
                    "etcd watch: an entry's event came after a later one of another entry; reading the scope again"
                );
                self.behind = true;
                continue;
            }
            let out = match event.event_type() {
                EventType::Delete => match self.keys.path_of(kv.key()) {
                    Some(path) => WatchEvent::Deleted { path },
                    None => continue,
                },
                EventType::Put => {
                    let Some((path, node)) = node_of(&self.keys, kv.key(), kv.value(), kv.lease())
                    else {
                        continue;
                    };
                    // etcd counts puts since the key's creation: 1 means this put created it.
                    if kv.version() == 1 {
                        WatchEvent::Created { path, node }
                    } else {
                        WatchEvent::Changed { path, node }
                    }
                }
            };
            if self.tx.send(out).is_err() {
                return Some(Break::Stop);
            }
            self.delivered = rev;
        }
        // A response holds whole revisions (no fragmenting requested), so resuming after the
        // last one delivered neither loses nor repeats an event.
        if let Some(rev) = last {
            self.watched.advance(id, rev);
        } else if !resp.created() {
            // A progress notification: etcd sends those only to watches that have caught up,
            // so everything up to the header's revision has been delivered. (The header of the
            // `created` answer is the store's revision, which a watch starting in the past has
            // not caught up with yet.)
            if let Some(rev) = resp.header().map(|h| h.revision()) {
                self.watched.advance(id, rev);
            }
        }
        None
    }
}
