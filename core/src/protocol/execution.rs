//! The execution markers of a job's items: `sharding/{n}/running` while an item runs (when
//! `monitorExecution` is on) and `sharding/{n}/misfire` when a fire was skipped because items
//! still ran.
//!
//! A `running` marker holds the id of the instance running the item, as ElasticJob writes it.
//! With failover on it is persistent: when its instance vanishes mid-run, the marker stays and
//! says which items were interrupted, and the failover taker takes it over (a versioned write,
//! so the old owner can no longer remove it). With failover off it is ephemeral and goes with
//! its session, as in ElasticJob. Starting and finishing the items of one fire are one
//! transaction each, whatever the number of items; the instance's [`Ledger`] changes in the
//! same transactions.

use crate::layout::{Detailed, ItemNode, JobPaths};
use crate::registry::{CreateMode, RegistryError, TxnOp, TxnResult, Version};

use super::detail;
use super::records::{parse_time, Garbage, Ledger};
use super::view::View;

/// How marking the start of a fire went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Start {
    /// Marked; each item's marker with its version (what a fenced finish expects).
    Marked(Vec<(u32, Version)>),
    /// Item `0` is still marked running (by an earlier fire, here or elsewhere).
    AlreadyRunning(u32),
    /// The owner node of item `0` is no longer the version the view showed: a reshard
    /// committed that this instance has not seen yet. Nothing was marked; decide again once the
    /// view caught up, or the fire would run under an assignment the leader already replaced.
    Reassigned(u32),
}

/// How to read the outcome of a fire's start transaction (what [`start`] returns with it).
#[derive(Debug, Clone)]
pub struct StartPlan {
    items: Vec<u32>,
    /// Items whose owner node version is checked, in the order of the first ops.
    checked: Vec<u32>,
    /// Checks after the owner checks that fence the start on the view's reading of the job's
    /// state (the reshard flag's detail: 0 or 1).
    guards: usize,
    /// Items whose misfire marker this run settles, checked after the guards.
    settled: Vec<u32>,
    /// Whether the run holds `running` markers (monitorExecution on).
    pub marks_running: bool,
}

/// What a start transaction marks.
#[derive(Debug, Clone, Copy)]
pub struct StartOf<'a> {
    pub me: &'a str,
    pub items: &'a [u32],
    pub fire_ms: i64,
    /// Markers survive the session (failover on).
    pub persistent: bool,
    /// Scheduled and catch-up fires: the items are ours by the assignment in the view, and the
    /// transaction fails if a reshard replaced it meanwhile.
    pub check_owners: bool,
    /// A catch-up: the misfire markers of the items are settled by this run, whatever fire
    /// they name. Otherwise only markers naming this very fire are (an instance that was busy
    /// when the fire came, with a reshard pending, marked every item, not knowing who would
    /// own it after the reshard).
    pub catch_up: bool,
    /// `running` markers (and the ledger) are written: monitorExecution on. Off, only a
    /// catch-up has something to write (the markers it settles).
    pub mark_running: bool,
    /// Items that answer another fire than `fire_ms` (a catch-up's), recorded so in the ledger.
    pub item_fires: &'a [(u32, i64)],
    /// The view may lag behind some nodes (`job::Settings::fence_absent`): with
    /// `check_owners`, the reshard flag and the misfire markers the view does not show are
    /// checked absent, and the detail of a marker the run does not settle is checked at the
    /// version seen (or absent).
    pub fence_absent: bool,
}

/// Marks `start.items` running, all or none; with a ledger (failover on), records the fire in
/// it. Returns the transaction and the plan that reads its outcome.
pub fn start(
    view: &View,
    paths: &JobPaths,
    start: StartOf<'_>,
    ledger: Option<&Ledger>,
) -> (Vec<TxnOp>, StartPlan) {
    let mut ops = Vec::with_capacity(start.items.len() * 2 + 1);
    let mut checked = Vec::new();
    let mut guards = 0;
    let mut settled = Vec::new();
    if start.check_owners {
        for &n in start.items {
            let path = paths.item_node(n, ItemNode::Instance);
            if let Some(owner) = view.get(&path) {
                ops.push(TxnOp::check(path, Some(owner.version)));
                checked.push(n);
            }
        }
        guards += push_raise_fences(view, paths, start.fence_absent, &mut ops);
        // Where views lag per entry, a misfire marker the view does not show may owe this very
        // fire (`victim` 4 × 3 seed 31,533,747: the marker's catch-up ran the fire again after
        // the owner ran it on time): what the decision took as absent is checked absent.
        // The settles go after every guard (the plan reads failures by region).
        let mut settles = Vec::new();
        for &n in start.items {
            match misfire_mark(view, paths, n) {
                Some((version, owed)) if start.catch_up || owed == Some(start.fire_ms) => {
                    let path = paths.item_node(n, ItemNode::Misfire);
                    settles.push(TxnOp::delete(path, Some(version)));
                    settled.push(n);
                }
                // A marker that names another fire, or none: so says its detail, which can lag
                // behind it (4 × 3 seed 31,533,747 again: the detail's entry late, a marker
                // owing this fire read as owing none).
                Some(_) if start.fence_absent => {
                    let detail = paths.detail(Detailed::Misfire(n));
                    ops.push(match view.get(&detail) {
                        Some(node) => TxnOp::check(detail, Some(node.version)),
                        None => TxnOp::absent(detail),
                    });
                    guards += 1;
                }
                None if start.fence_absent => {
                    ops.push(TxnOp::absent(paths.item_node(n, ItemNode::Misfire)));
                    guards += 1;
                }
                Some(_) | None => {}
            }
        }
        ops.extend(settles);
    }
    if !start.mark_running {
        let plan = StartPlan {
            items: start.items.to_vec(),
            checked,
            guards,
            settled,
            marks_running: false,
        };
        return (ops, plan);
    }
    let mode = if start.persistent { CreateMode::Persistent } else { CreateMode::Ephemeral };
    ops.extend(
        start.items.iter().map(|&n| {
            TxnOp::create(paths.item_node(n, ItemNode::Running), start.me.as_bytes(), mode)
        }),
    );
    if let Some(ledger) = ledger {
        let mut next = ledger.clone();
        for &n in start.items {
            next.running
                .insert(n, crate::protocol::job::fire_of(start.item_fires, n, start.fire_ms));
        }
        next.last_fire_ms = Some(next.last_fire_ms.map_or(start.fire_ms, |f| f.max(start.fire_ms)));
        ops.push(write_ledger(view, paths, start.me, &next));
    }
    let plan =
        StartPlan { items: start.items.to_vec(), checked, guards, settled, marks_running: true };
    (ops, plan)
}

/// The checks that no raise of the reshard flag came since the view: pushed onto `ops`, their
/// count returned. A start carries them ahead of its marks, and so does a fire this instance
/// finds no item of its own for (see [`no_items_fence`]).
fn push_raise_fences(
    view: &View,
    paths: &JobPaths,
    fence_absent: bool,
    ops: &mut Vec<TxnOp>,
) -> usize {
    let mut guards = 0;
    // Every raise of the reshard flag writes its detail: a start decided on a view that has
    // not shown a raise yet fails here instead of running the fire under the assignment the
    // raise is replacing (whose reshard then hands the fire, waiting on the other instances,
    // to a new owner that runs it again). A view can lag behind the flag alone: etcd delivers
    // the events of a watch it has to catch up after later events of the stream's other
    // watches (the simulator's `lag` profile).
    let detail = paths.detail(Detailed::Flag);
    if let Some(node) = view.get(&detail) {
        ops.push(TxnOp::check(detail, Some(node.version)));
        guards += 1;
    }
    // A view that lags per entry (`fence_absent`) can show the flag's detail at the raise's
    // version and not the flag (the simulator's `victim` profile, 6 × 4 seed 1,553,391,649:
    // an owner started its old item under a pending reshard, which then gave it another, run
    // by nobody). What the decision took as absent is checked absent.
    if fence_absent {
        let flag = paths.sharding_necessary();
        if !view.exists(&flag) {
            ops.push(TxnOp::absent(flag));
            guards += 1;
        }
    }
    guards
}

/// The transaction that stands behind a fire skipped for want of items (`NoItems`): the same
/// raise fences as a start's, and nothing written. An instance that owns nothing can be the one
/// a pending reshard gives items to at this very fire (it just joined, its server was enabled):
/// if its view has not shown the raise yet, it would skip the fire while the others wait for the
/// reshard, which then hands it items for the fire it skipped, and nobody runs them (the
/// multi-process kill -9 test on etcd, under load: a newcomer's first fire found it with no
/// items and no flag in view, and the leader's reshard a millisecond later gave it two items
/// of that fire). With the check failed, the fire is decided again on a view
/// that shows the raise, and waits for the reshard. `None` when the view shows nothing to check
/// (before the job's first raise, which every fire waits for anyway).
pub fn no_items_fence(view: &View, paths: &JobPaths, fence_absent: bool) -> Option<Vec<TxnOp>> {
    let mut ops = Vec::with_capacity(2);
    push_raise_fences(view, paths, fence_absent, &mut ops);
    (!ops.is_empty()).then_some(ops)
}

/// The op that writes `me`'s ledger: a set fenced on the version the view shows, or a create.
pub fn write_ledger(view: &View, paths: &JobPaths, me: &str, ledger: &Ledger) -> TxnOp {
    let path = paths.ledger(me);
    match view.get(&path) {
        Some(node) => TxnOp::set(path, ledger.encode(), Some(node.version)),
        None => TxnOp::create(path, ledger.encode(), CreateMode::Persistent),
    }
}

/// `me`'s ledger as the view shows it (empty when absent), or its garbage.
pub fn ledger_of(view: &View, paths: &JobPaths, instance: &str) -> Option<Result<Ledger, Garbage>> {
    let path = paths.ledger(instance);
    view.get(&path).map(|node| Ledger::parse(&path, &node.data))
}

impl StartPlan {
    /// What a committed start transaction marked.
    pub fn marked(&self) -> Start {
        Start::Marked(self.items.iter().map(|&n| (n, 0)).collect())
    }

    /// What a failed start transaction means, or `None` for a failure that is an error.
    pub fn outcome(&self, e: &RegistryError) -> Option<Start> {
        let fenced = self.checked.len() + self.guards + self.settled.len();
        match e.transaction_failure()? {
            (i, RegistryError::BadVersion { .. } | RegistryError::NoNode { .. })
                if i < self.checked.len() =>
            {
                Some(Start::Reassigned(self.checked[i]))
            }
            // The flag was raised, a misfire marker or the ledger changed meanwhile: decide
            // again on a fresh view.
            (i, RegistryError::BadVersion { .. } | RegistryError::NoNode { .. })
                if i < fenced || i >= fenced + self.items.len() =>
            {
                Some(Start::Reassigned(self.items.first().copied().unwrap_or(0)))
            }
            (i, RegistryError::NodeExists { .. })
                if i >= fenced && i < fenced + self.items.len() =>
            {
                Some(Start::AlreadyRunning(self.items[i - fenced]))
            }
            (_, RegistryError::NodeExists { .. }) => {
                Some(Start::Reassigned(self.items.first().copied().unwrap_or(0)))
            }
            _ => None,
        }
    }
}

/// A marker this instance holds and will remove when its item ends: the item, the marker's
/// version when this instance wrote it, and whether it also holds the item's `failover` marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub item: u32,
    pub version: Version,
    pub failed_over: bool,
}

/// The finish transaction of items whose code returned: each `running` marker removed only if
/// it is still the version this instance wrote (a failover taker's write replaced it
/// otherwise, and the item is no longer ours to finish), the `failover` markers, and the items
/// out of the ledger.
pub fn finish(
    view: &View,
    paths: &JobPaths,
    me: &str,
    held: &[Held],
    ledger: Option<&Ledger>,
) -> Vec<TxnOp> {
    let mut ops: Vec<TxnOp> = held
        .iter()
        .map(|h| TxnOp::delete(paths.item_node(h.item, ItemNode::Running), Some(h.version)))
        .collect();
    ops.extend(held.iter().filter(|h| h.failed_over).filter_map(|h| {
        let path = paths.item_node(h.item, ItemNode::Failover);
        view.exists(&path).then(|| TxnOp::delete(path, None))
    }));
    if let Some(ledger) = ledger {
        let mut next = ledger.clone();
        let before = next.running.len();
        for h in held {
            next.running.remove(&h.item);
        }
        if next.running.len() != before {
            ops.push(write_ledger(view, paths, me, &next));
        }
    }
    ops
}

/// The held marker a failed finish transaction lost (op `index` failed): that one is taken
/// over or gone, and the rest are finished without it. `None` when the failure is not about
/// a marker.
pub fn lost_marker(held: &[Held], e: &RegistryError) -> Option<usize> {
    match e.transaction_failure()? {
        (i, RegistryError::BadVersion { .. } | RegistryError::NoNode { .. }) if i < held.len() => {
            Some(i)
        }
        _ => None,
    }
}

/// The version a transaction gave the node its op `index` wrote (0 for a create).
pub fn written_version(results: &[TxnResult], index: usize) -> Version {
    match results.get(index) {
        Some(TxnResult::Set { version }) => *version,
        _ => 0,
    }
}

/// The instance the `running` marker of item `n` names, if it is marked.
pub fn running_owner(view: &View, paths: &JobPaths, n: u32) -> Option<String> {
    view.get(&paths.item_node(n, ItemNode::Running)).map(|node| node.text().trim().to_owned())
}

/// Whether any of `items` is marked running (by anyone).
pub fn any_running(view: &View, paths: &JobPaths, items: &[u32]) -> bool {
    items.iter().any(|&n| view.exists(&paths.item_node(n, ItemNode::Running)))
}

/// The transaction that marks `items` misfired for `fire_ms`. A marker already there owes
/// the item a catch-up for an earlier fire, which answers this one too: it is kept as it is
/// (checked at the version the view shows, so a marker settled meanwhile fails the
/// transaction and the fire is decided again), never rewritten to this fire, whose own run
/// elsewhere would then settle the older debt. With `flag` (a reshard flag), it holds only
/// while the flag still exists: the marks are for a fire that will run under the assignment
/// the pending reshard makes.
pub fn mark_misfire(
    view: &View,
    paths: &JobPaths,
    items: &[u32],
    fire_ms: i64,
    flag: Option<&str>,
) -> Vec<TxnOp> {
    let data = fire_ms.to_string();
    let mut ops: Vec<TxnOp> = flag.map(|f| TxnOp::check(f, None)).into_iter().collect();
    // Every item is marked while the flag holds this fire; the raise it holds is the one the
    // view shows, fenced on the flag's detail (persistent, set at every raise and reshard: its
    // version only grows, where the flag's own starts again when the flag is created again).
    // A flag answered and raised again since is another raise: the fire ran under the reshard
    // that answered ours, and the mark is decided again on a view that shows it (3 x 2
    // `failover` seed 532,654,249: on a 1 s link, every item was marked for a fire the others
    // had run under that reshard, the flag raised again by a registration meanwhile, and the
    // next reshard had the fire run twice).
    if flag.is_some() {
        let detail = paths.detail(Detailed::Flag);
        if let Some(node) = view.get(&detail) {
            ops.push(TxnOp::check(detail, Some(node.version)));
        }
    }
    for &n in items {
        let p = paths.item_node(n, ItemNode::Misfire);
        match view.get(&p) {
            Some(node) => {
                ops.push(TxnOp::check(p, Some(node.version)));
                // And its detail: a marker settled and written again meanwhile (for another
                // fire) is back at the version read; its detail, kept when the marker is
                // settled ([`detail::BLANK`]), is not.
                let detail = paths.detail(Detailed::Misfire(n));
                if let Some(node) = view.get(&detail) {
                    ops.push(TxnOp::check(detail, Some(node.version)));
                }
            }
            None => ops.push(TxnOp::create(p, data.clone(), CreateMode::Persistent)),
        }
    }
    ops
}

/// A catch-up an item owes: the fire its `misfire` marker names; `None` for an empty marker (as
/// ElasticJob writes it: only its existence counts, the fire is unknown); the marker's garbage
/// otherwise (the item still owes one catch-up).
pub type Owed = Result<Option<i64>, Garbage>;

/// Item `n`'s misfire marker as the view shows it: its version, and the fire it owes (`None`
/// when its detail names none readable). A run of that very fire settles it.
pub fn misfire_mark(view: &View, paths: &JobPaths, n: u32) -> Option<(Version, Option<i64>)> {
    let (marker, owed) = detail::read(view, paths, Detailed::Misfire(n))?;
    Some((marker.version, parse_time("", owed, "a misfire marker").ok()))
}

/// The misfired items among `items` with the fire each one owes, as the view shows them.
pub fn misfired(view: &View, paths: &JobPaths, items: &[u32]) -> Vec<(u32, Owed)> {
    items
        .iter()
        .filter_map(|&n| {
            let (_, data) = detail::read(view, paths, Detailed::Misfire(n))?;
            let owed = if data.iter().all(u8::is_ascii_whitespace) {
                Ok(None)
            } else {
                parse_time(&paths.detail(Detailed::Misfire(n)), data, "a misfire marker").map(Some)
            };
            Some((n, owed))
        })
        .collect()
}

/// Whether an operator disabled item `n`.
pub fn item_disabled(view: &View, paths: &JobPaths, n: u32) -> bool {
    view.exists(&paths.item_node(n, ItemNode::Disabled))
}
