//! Failover: the items a vanished instance was running, and with `misfire` on the fires it
//! missed before its departure was noticed, are queued under `leader/failover/items/{n}` and
//! run again by the survivors, each exactly once.
//!
//! - **Finding orphans.** With failover on, `running` markers are persistent: a marker that
//!   still names an instance whose instance node is gone is an interrupted item (a run that
//!   completed removed its marker in its finish transaction). The instance's ledger says which
//!   fire each one belonged to, and which scheduled fire it started last: the fires due since,
//!   for the items it owned, were missed.
//! - **Queueing.** Every survivor queues what it found, in a transaction that also checks the
//!   version of each item's owner node as it saw it and removes the dead instance's ledger. The
//!   first transaction wins; a slow survivor's fails, so nothing is queued twice.
//! - **Claiming.** The queue is shared among the eligible instances (rotating by rank), so idle
//!   survivors claim in parallel, in one round; an entry left unclaimed for a while by its
//!   share's claimer (busy, or cut off) is anyone's. A claim is one transaction: delete the entry
//!   (only one claimant can), rewrite the item's owner node unchanged (which advances the
//!   item's fencing token), take the `running` marker over (a write fenced on the version the dead
//!   instance left, so a marker its owner removed after all is not run again) and create the
//!   ephemeral `failover` marker.
//! - **Why the taker need not wait.** An instance node goes when its session ends: by then the
//!   instance has stopped its items, as its own lease ran out first (see
//!   [`crate::registry`]'s sessions), or it left gracefully after they returned.

use crate::cron::CronSchedule;
use crate::layout::{Detailed, ItemNode, JobPaths};
use crate::registry::{CreateMode, RegistryError, TxnOp};
use crate::sharding::Assignment;

use super::execution::{ledger_of, misfire_mark, running_owner};
use super::records::{
    parse_flag, parse_owner, Assigned, FailoverEntry, Garbage, Ledger, Orphaned, Section,
};
use super::view::View;

/// How far back a garbage ledger's missed fires are looked for.
const DAY_MS: i64 = 24 * 3600 * 1000;

/// An item to queue, or queued, with the fire it owes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Orphan {
    pub item: u32,
    pub fire_ms: i64,
    /// Its place among the orphans queued together; shares are dealt by it, so they stay the
    /// same while the queue empties.
    pub rank: u64,
    pub why: Orphaned,
}

/// What a departed instance left: its interrupted items, and (with `missed_until`) one
/// catch-up per item it owned for the latest fire it missed up to that time. `fallback_fire` is
/// the fire an interrupted item owes when the ledger does not say (absent or unreadable: the
/// garbage is returned for the caller to report).
pub fn left_by(
    view: &View,
    paths: &JobPaths,
    dead: &str,
    total: u32,
    missed: Option<(&CronSchedule, i64)>,
    fallback_fire: i64,
) -> (Vec<Orphan>, Option<Garbage>) {
    let (ledger, garbage) = match ledger_of(view, paths, dead) {
        None => (None, None),
        Some(Ok(ledger)) => (Some(ledger), None),
        Some(Err(g)) => (None, Some(g)),
    };
    // A marker garbage replaced (or that names another instance that is gone) is the dead
    // instance's if its ledger says it ran the item; with its ledger garbage too, if the item
    // was the dead instance's: nobody else can tell the run was theirs, and the marker would
    // hold the item back for good (2 × 1 `garbage` seed 517,348,607: both garbled while
    // both instances were cut off; the item never ran again).
    let owned = match (&ledger, &garbage) {
        (None, Some(_)) => super::sharding::items_of(view, paths, dead, total),
        _ => Vec::new(),
    };
    let garbled = |n: u32| {
        let path = paths.item_node(n, ItemNode::Running);
        view.get(&path).is_some_and(|m| !super::garbage::names_live(view, paths, &m.data))
            && ledger.as_ref().map_or(owned.contains(&n), |l| l.running.contains_key(&n))
    };
    let mut orphans: Vec<Orphan> = (0..total)
        .filter(|&n| running_owner(view, paths, n).as_deref() == Some(dead) || garbled(n))
        .map(|item| {
            let fire_ms = ledger
                .as_ref()
                .and_then(|l| l.running.get(&item).copied())
                .unwrap_or(fallback_fire);
            Orphan { item, fire_ms, rank: 0, why: Orphaned::Interrupted }
        })
        .collect();
    // Without a ledger (it never wrote one: it crashed while registering; or its leaving
    // removed it), the record of the assignments keeps the mark its fires count from, which a
    // reshard moving its items away would read in the ledger's place. Counted here, by the
    // departure, as a ledger's: the reshard after it may give the items back to the same id,
    // come back meanwhile, and owe nothing then (3 × 2 `chaos` seed 4,132,758,956).
    let since = match (&ledger, &garbage) {
        (Some(ledger), _) => ledger.last_fire_ms,
        (None, None) => departed_mark(view, paths, dead),
        (None, Some(_)) => None,
    };
    if let (Some((schedule, until)), Some(since)) = (missed, since) {
        // An interrupted item may have missed a later fire too: [`queue`] marks that one
        // misfired (one queue entry per item).
        orphans.extend(missed_since(view, paths, dead, total, schedule, since, until, &[]));
    } else if let (Some((schedule, until)), Some(_)) = (missed, &garbage) {
        // A garbage ledger does not say which fires the instance started: its items owe the
        // latest fire due, as a garbage misfire marker does (a run may repeat; none is lost).
        let interrupted: Vec<u32> = orphans.iter().map(|o| o.item).collect();
        let since = until.saturating_sub(DAY_MS);
        orphans.extend(missed_since(
            view,
            paths,
            dead,
            total,
            schedule,
            since,
            until,
            &interrupted,
        ));
    }
    for (rank, orphan) in orphans.iter_mut().enumerate() {
        orphan.rank = rank as u64;
    }
    (orphans, garbage)
}

/// What [`owe_misfire`] does with a misfire marker the view shows already.
#[derive(Clone, Copy)]
enum Existing {
    /// Writes `fire` over it.
    Replace,
    /// Keeps it (it owes a catch-up already, which answers this fire too), fenced on its
    /// version.
    Keep,
}

/// Owes `item`'s catch-up of `fire` in a queue's `ops`: creates its misfire marker, or, when
/// the view shows one, as `existing` says. Once per marker: an item whose entry takes over
/// another instance's missed fire and that also missed a later fire of its own owes both to
/// one marker, and a transaction that creates a node twice (or, on etcd, writes one key
/// twice) fails whole. Every departure of the dead instance then failed the same way, read
/// as a race lost to another survivor, and its interrupted item stayed blocked behind its
/// marker until it came back (chaos seed 53,084,486 at 3 × 2, 17 s). The marker keeps the
/// earliest fire: one catch-up answers every fire missed since.
fn owe_misfire(
    ops: &mut Vec<TxnOp>,
    view: &View,
    paths: &JobPaths,
    item: u32,
    fire: i64,
    existing: Existing,
) {
    let marker = paths.item_node(item, ItemNode::Misfire);
    let op = match (view.get(&marker), existing) {
        (None, _) => TxnOp::create(marker, fire.to_string(), CreateMode::Persistent),
        (Some(_), Existing::Replace) => TxnOp::set(marker, fire.to_string(), None),
        (Some(node), Existing::Keep) => TxnOp::check(marker, Some(node.version)),
    };
    once_per_marker(ops, op);
}

/// Adds `op` (a write or check of a misfire marker) to `ops` unless they write that marker
/// already: then the write keeps the earlier of the two fires, and a check (of the version
/// the view shows, which the write changes) is dropped.
fn once_per_marker(ops: &mut Vec<TxnOp>, op: TxnOp) {
    let fire_of = |data: &[u8]| super::records::parse_time("", data, "a misfire marker").ok();
    let written = ops
        .iter_mut()
        .find(|o| o.path() == op.path() && matches!(o, TxnOp::Create { .. } | TxnOp::Set { .. }));
    match (written, &op) {
        (
            Some(TxnOp::Create { data: kept, .. } | TxnOp::Set { data: kept, .. }),
            TxnOp::Create { data, .. } | TxnOp::Set { data, .. },
        ) => {
            if let (Some(new), Some(old)) = (fire_of(data), fire_of(kept)) {
                if new < old {
                    kept.clone_from(data);
                }
            }
        }
        // Written already: a check of the version the view shows would fail against it.
        (Some(_), TxnOp::Check { .. }) => {}
        _ => ops.push(op),
    }
}

/// The items `dead` owned (by the view's assignment), was not running, and whose schedule fell
/// due after `since_ms` up to `until_ms`: one catch-up each, for the latest such fire.
#[allow(clippy::too_many_arguments)]
pub fn missed_since(
    view: &View,
    paths: &JobPaths,
    dead: &str,
    total: u32,
    schedule: &CronSchedule,
    since_ms: i64,
    until_ms: i64,
    skip: &[u32],
) -> Vec<Orphan> {
    // The owner nodes say who owns the item now; a reshard since the fire may have moved it
    // (to `dead` or away from it): the record of the assignments says who owned it then
    // (items moved away from an owner that missed a fire were marked misfired by the reshard).
    let record = read_assigned(view, paths);
    // A fire overtaken while it waited for a reshard is owed by no owner under that reshard
    // (GUARANTEES.md, section 2: an owner down while it waited lost nothing); the latest fire
    // before its raise may be. Counted, it ran twice when the owner before the reshard had
    // restarted while it waited and run it as its own miss (failover seed 315,122,289).
    let mut until_ms = until_ms;
    let fire_ms = loop {
        let Some(fire_ms) = schedule.last_in(since_ms, until_ms) else { return Vec::new() };
        let overtaken =
            record.as_ref().and_then(|r| r.overtaken(fire_ms, schedule.next_after(fire_ms)));
        match overtaken {
            Some(raised_ms) => until_ms = raised_ms,
            None => break fire_ms,
        }
    };
    let owned_then = |n: u32| match record.as_ref().and_then(|r| r.owner_at(n, fire_ms)) {
        Some(owner) => owner == Some(dead),
        None => true,
    };
    // An owner node garbage replaced (or deleted) is the dead instance's if the record says
    // it owned the item at the fire.
    let owns = |n: u32| {
        let path = paths.item_node(n, ItemNode::Instance);
        match view.get(&path).map(|o| parse_owner(&path, &o.data)) {
            Some(Ok(Some(id))) if id == dead || super::garbage::is_live(view, paths, &id) => {
                id == dead
            }
            // Garbage, nobody, or another instance that is not there: the record says.
            _ => record.as_ref().and_then(|r| r.owner_at(n, fire_ms)) == Some(Some(dead)),
        }
    };
    (0..total)
        .filter(|&n| owns(n))
        .filter(|&n| owned_then(n))
        // A reshard since moved the item away from `dead` and owed its catch-up of that
        // fire already (run by the new owner: counted again it would run twice).
        .filter(|&n| !record.as_ref().is_some_and(|r| r.caught_up(n, fire_ms)))
        // A misfire marker owes the item a catch-up already (one answers every fire missed),
        // unless it names a later fire, whose own run settles it (see `owed_on_reshard`).
        .filter(|&n| {
            super::detail::read(view, paths, Detailed::Misfire(n)).is_none_or(|(_, owed)| {
                super::records::parse_time("", owed, "a misfire marker")
                    .is_ok_and(|owed| owed > fire_ms)
            })
        })
        .filter(|&n| !view.exists(&paths.item_node(n, ItemNode::Disabled)))
        .filter(|n| !skip.contains(n))
        .map(|item| Orphan { item, fire_ms, rank: 0, why: Orphaned::Missed })
        .collect()
}

/// The catch-ups a reshard owes, with `misfire` on: the items it moves away from an instance
/// that had not started the latest fire due under the assignment being replaced (it crashed
/// and its session has not ended yet, or it was about to start and will now find the item
/// gone). Fires after the pending flag's raise run under the new assignment; the latest one
/// before it, and after the raise of the reshard that made the old assignment, was the old
/// owner's. The ops mark those items misfired for that fire, fenced on each old owner's ledger
/// version: if it starts the fire meanwhile, the reshard fails and is decided again. Nothing
/// is owed where no record says (no ledger, an unreadable time): a catch-up that may repeat a
/// run is not made up. Without `ledgers` (failover off: nothing says what an owner started),
/// only the items no owner had at a fire a late raise let run under the old assignment are
/// owed (see `owe_unowned`).
pub fn owed_on_reshard(
    view: &View,
    paths: &JobPaths,
    assignment: &Assignment,
    total: u32,
    schedule: &CronSchedule,
    now_ms: i64,
    ledgers: bool,
) -> OwedOnReshard {
    let mut owed = OwedOnReshard::default();
    let flag = super::detail::read(view, paths, Detailed::Flag).map(|(_, data)| data);
    let raised = flag.and_then(|data| parse_flag("", data).ok().flatten());
    let record = read_assigned(view, paths);
    let (Some(raised), Some(record)) = (raised, record) else { return owed };
    let since = record.raised_ms;
    let Some(fire_ms) = schedule.last_in(since, raised.min(now_ms)) else { return owed };
    // The raise was moved from an earlier time to when it committed (a slow link), and this
    // fire came between: it ran under the old assignment, whose owners lacked the items a
    // count change added before the raise (1 × 3 `chaos` 812,787,233: nobody ran them). A
    // fire in the very millisecond the raise first wrote counts: a raise holds no fire of its
    // own millisecond (`sharding::pending_for`; 1 × 3 `chaos` 1,258,633,092).
    let unowned_missed =
        flag.and_then(super::records::parse_flag_moved_from).is_some_and(|from| from <= fire_ms);
    let mut fenced: Vec<String> = Vec::new();
    for item in 0..total {
        let owner = paths.item_node(item, ItemNode::Instance);
        // An owner node garbage replaced (or deleted) still had the recorded owner.
        let recorded = record.owners.get(&item);
        let Some(old) = (match view.get(&owner).map(|n| parse_owner(&owner, &n.data)) {
            Some(Ok(Some(id)))
                if recorded == Some(&id) || super::garbage::is_live(view, paths, &id) =>
            {
                Some(id)
            }
            // Garbage, nobody, or another instance that is not there: the record says.
            _ => recorded.cloned(),
        }) else {
            if unowned_missed {
                owe_unowned(view, paths, assignment, item, fire_ms, &mut owed);
            }
            continue;
        };
        if !ledgers {
            continue;
        }
        // A failover claim since the last reshard moved the item (the claimer owns it for
        // the fires after its claim): who owned it at the fire is then not known.
        if record.owners.get(&item) != Some(&old) {
            continue;
        }
        let moved = assignment.iter().any(|(id, items)| id != old && items.contains(&item));
        if old.is_empty() || !moved {
            continue;
        }
        // Unless a misfire marker owes the item a catch-up already (see `misfire_op`).
        let Some(mark_op) = misfire_op(view, paths, item, fire_ms) else { continue };
        // What the old owner accounted for: its ledger's mark, or, once its leaving removed
        // the ledger, the mark the record kept of it (fenced with the record, which the
        // reshard rewrites at the version it read).
        let (mark, ledger_version) = match view.get(&paths.ledger(&old)) {
            Some(ledger) => {
                let Ok(started) = Ledger::parse(&paths.ledger(&old), &ledger.data) else {
                    continue;
                };
                (started.last_fire_ms, Some(ledger.version))
            }
            None if !super::garbage::is_live(view, paths, &old) => {
                (record.departed.get(&old).copied(), None)
            }
            None => continue,
        };
        if mark.is_none_or(|last| last >= fire_ms) {
            continue;
        }
        if let Some(version) = ledger_version.filter(|_| !fenced.contains(&old)) {
            owed.ops.push(TxnOp::check(paths.ledger(&old), Some(version)));
            fenced.push(old);
        }
        owed.ops.push(mark_op);
        owed.catch_ups.insert(item, fire_ms);
    }
    owed
}

/// An item that no assignment had at `fire_ms`, which the old assignment's owners ran
/// without it: the new one's owner catches it up (unless it is disabled, runs, or a misfire
/// marker owes it a catch-up already). The marker is created in the reshard's transaction,
/// after the item's node.
fn owe_unowned(
    view: &View,
    paths: &JobPaths,
    assignment: &Assignment,
    item: u32,
    fire_ms: i64,
    owed: &mut OwedOnReshard,
) {
    let given = assignment.iter().any(|(_, items)| items.contains(&item));
    if let Some(op) = misfire_op(view, paths, item, fire_ms).filter(|_| given) {
        owed.ops.push(op);
        owed.catch_ups.insert(item, fire_ms);
    }
}

/// The op that marks `item` misfired for `fire_ms`, unless it is disabled, runs, or a misfire
/// marker owes it a catch-up already, which answers this fire too. A marker that names a
/// later fire is moved back to this one: the marks of a misfire while a reshard was pending
/// (every item, for a fire that runs under the new assignment) are settled by that fire's own
/// run, which would take this older debt with it (2 × 4 `failover` 2,136,335,092, for an
/// item a count change added).
fn misfire_op(view: &View, paths: &JobPaths, item: u32, fire_ms: i64) -> Option<TxnOp> {
    let misfire = paths.item_node(item, ItemNode::Misfire);
    let later_mark =
        super::detail::read(view, paths, Detailed::Misfire(item)).and_then(|(m, owed)| {
            let owed = super::records::parse_time("", owed, "a misfire marker").ok();
            owed.filter(|&owed| owed > fire_ms).map(|_| m.version)
        });
    let marked = [ItemNode::Disabled, ItemNode::Running]
        .into_iter()
        .any(|leaf| view.exists(&paths.item_node(item, leaf)))
        || (view.exists(&misfire) && later_mark.is_none());
    if marked {
        return None;
    }
    Some(match later_mark {
        Some(version) => TxnOp::set(misfire, fire_ms.to_string(), Some(version)),
        None => TxnOp::create(misfire, fire_ms.to_string(), CreateMode::Persistent),
    })
}

/// What [`owed_on_reshard`] found: the ops, and the catch-up each item was given (by fire).
#[derive(Debug, Default)]
pub struct OwedOnReshard {
    pub ops: Vec<TxnOp>,
    pub catch_ups: std::collections::BTreeMap<u32, i64>,
}

/// The op that records the reshard being committed: its raise time and the assignment it
/// makes (see [`owed_on_reshard`]).
///
/// A flag without a readable time (empty, as ElasticJob writes it, or garbage) is recorded as
/// raised at `unknown_raise_ms`, just before the fire the reshard is made for: the fires from
/// that one on run under the new assignment. Left unrecorded, the last record would go on
/// naming the owners before this reshard for every later fire, and a fire handled late would
/// mark the misfires of the items this reshard moved on nobody.
pub fn record_assigned(
    view: &View,
    paths: &JobPaths,
    assignment: &Assignment,
    unknown_raise_ms: i64,
    made_ms: i64,
    caught_up: std::collections::BTreeMap<u32, i64>,
    ledgers_kept: bool,
) -> TxnOp {
    let raised_ms = super::detail::flag_time(view, paths).flatten().unwrap_or(unknown_raise_ms);
    let owners = assignment
        .iter()
        .flat_map(|(id, items)| items.iter().map(move |&n| (n, id.to_owned())))
        .collect();
    let mut earlier = Vec::new();
    let mut departed = std::collections::BTreeMap::new();
    if let Some(last) = read_assigned(view, paths) {
        // Consumed by this reshard (`owed_on_reshard`) for every instance it moves items away
        // from; kept for one it leaves items with (its departure not shown here yet), unless
        // it has a ledger again: it came back under its id, and the ledger its registration
        // wrote speaks for it from then on (2 × 1 `chaos` 4,231,656,484: a mark kept from an
        // expiry outlived the comeback, and when it left again, with failover off, which
        // writes no ledger, a reshard owed a fire it had run).
        departed = last.departed;
        departed.retain(|id, _| {
            assignment.iter().any(|(owner, items)| owner == id && !items.is_empty())
                && !view.exists(&paths.ledger(id))
        });
        earlier.push(Section {
            raised_ms: last.raised_ms,
            made_ms: last.made_ms,
            owners: last.owners,
            caught_up: last.caught_up,
        });
        earlier.extend(last.earlier);
    }
    // An owner without a ledger (still registering: its node is there, its ledger not yet;
    // or a leaver) that goes without ever writing one has no mark to count this
    // assignment's fires from, and the reshard that moves its items away would owe nothing:
    // nothing of this assignment ran there before its raise (3 × 2 `failover` seed
    // 2,696,810,239: an instance given an item while its registration's ledger was on a slow
    // link crashed; three fires went unrun). Its ledger, once written, speaks instead.
    // Only while failover and misfire keep ledgers: without them no owner has one, and a
    // mark from then would owe fires it ran once failover is on again.
    for (id, items) in assignment.iter().filter(|_| ledgers_kept) {
        if !items.is_empty() && !view.exists(&paths.ledger(id)) {
            departed.entry(id.to_owned()).or_insert(raised_ms);
        }
    }
    // A live instance's ledger counts the fires it missed since its mark (a restart, a crash
    // its departure shows): who owned an item at each of them is the record's to say. It
    // once kept one reshard back, and a restart two reshards after a fire its crash missed
    // took the item for its own then and queued that fire again, after the first reshard's
    // catch-up had run it. Kept: every earlier assignment back to the one the oldest mark
    // fell under (and a bound, for ledgers no instance will come back to).
    let oldest_mark = view
        .children(&paths.ledgers())
        .iter()
        .filter_map(|id| {
            let path = paths.ledger(id);
            Ledger::parse(&path, &view.get(&path)?.data).ok()?.last_fire_ms
        })
        .min();
    // Without ledgers (failover turned off since) nothing counts missed fires: one earlier
    // assignment is kept, for a fire handled late. The record's size grows with the items
    // times the assignments kept; instances that fire move their marks on, so it stays at a
    // few assignments unless one is down.
    let reach = match oldest_mark {
        Some(mark) => earlier
            .iter()
            .position(|section| section.raised_ms < mark)
            .map_or(earlier.len(), |covering| covering + 1),
        None => 1,
    };
    earlier.truncate(reach.min(MAX_EARLIER_ASSIGNMENTS));
    let made_ms = Some(made_ms);
    let data = Assigned { raised_ms, made_ms, owners, caught_up, departed, earlier }.encode();
    let path = paths.assigned();
    // At the version the view shows: a write this reshard has not seen (an operator's, garbage
    // nobody reported yet) fails the commit rather than being erased unseen.
    if let Some(node) = view.get(&path) {
        TxnOp::set(path, data, Some(node.version))
    } else {
        TxnOp::create(path, data, CreateMode::Persistent)
    }
}

/// How many earlier assignments the record keeps at most.
const MAX_EARLIER_ASSIGNMENTS: usize = 16;

/// The record of the assignments, if it exists and reads (garbage is no record: see
/// [`owed_on_reshard`]; the leader reports it and deletes it).
pub fn read_assigned(view: &View, paths: &JobPaths) -> Option<Assigned> {
    let path = paths.assigned();
    view.get(&path).and_then(|node| Assigned::parse(&path, &node.data).ok())
}

/// The raise time of the reshard that made the current assignment, as recorded: fires after
/// it run under it.
pub fn assigned_since(view: &View, paths: &JobPaths) -> Option<i64> {
    let path = paths.assigned();
    view.derived(&path, |node| node.and_then(|node| Assigned::raised_ms(&path, &node.data).ok()))
}

/// The record of the last reshard's assignment (and the one before), if readable.
pub fn assigned_record(view: &View, paths: &JobPaths) -> Option<Assigned> {
    read_assigned(view, paths)
}

/// The transaction that queues `orphans` of `dead` and removes its ledger, noting in the
/// record of the assignments what the ledger and the missed fires counted (up to
/// `counted_until`, when counted) accounted for. The parent `leader/failover/items` must
/// exist. It fails ([`is_lost_race`]) when another survivor queued them first, or a taker
/// already claimed one: nothing more is needed then.
pub fn queue(
    view: &View,
    paths: &JobPaths,
    dead: &str,
    orphans: &[Orphan],
    total: u32,
    counted_until: Option<i64>,
) -> Vec<TxnOp> {
    let mut ops = Vec::new();
    // Items queued (by this transaction or before it), with the fire their entry runs.
    let mut queued: Vec<(u32, i64)> = Vec::new();
    // Markers `dead` left on items beyond the count (it was reduced while they ran): nothing
    // runs them again, but a marker left there would block the item for good once the count
    // grows back.
    for name in view.children(&paths.sharding()) {
        let Ok(item) = name.parse::<u32>() else { continue };
        let running = paths.item_node(item, ItemNode::Running);
        if item >= total && running_owner(view, paths, item).as_deref() == Some(dead) {
            let version = view.get(&running).map(|n| n.version);
            ops.push(TxnOp::delete(running, version));
        }
    }
    for orphan in orphans {
        // An item queued already (interrupted) that also missed a later fire: the later fire
        // is owed as a misfire, caught up by the item's owner once the failover run ended.
        // Not the fire the entry runs (an interrupted run whose fire the ledger did not say
        // owes the latest fire due, which may be the very one missed): it would run twice.
        if let Some(&(_, entry_fire)) = queued.iter().find(|(n, _)| *n == orphan.item) {
            if orphan.fire_ms <= entry_fire {
                continue;
            }
            owe_misfire(&mut ops, view, paths, orphan.item, orphan.fire_ms, Existing::Replace);
            continue;
        }
        // A missed fire of an item queued already for an earlier fire (another instance's
        // miss or interruption): that entry's taker runs the earlier fire, and this one is
        // owed as a misfire, caught up by the item's owner after it (creating a second entry
        // failed the whole transaction, and every other orphan in it was lost).
        let existing = super::detail::read(view, paths, Detailed::Entry(orphan.item))
            .map(|(node, data)| (node.version, FailoverEntry::parse("", data).ok()));
        // Queued for this very instance already (by the survivors, or an earlier try). Not
        // an entry for a fire we missed when our run of the item was interrupted since: that
        // entry's claim waits for our marker to go, which only a re-run of the interrupted
        // run removes, so the run takes the entry over below, as another instance's
        // (chaos 581,922,074: a restart under the same id left the item blocked for good).
        let own_entry = existing
            .as_ref()
            .and_then(|(_, e)| e.as_ref())
            .filter(|e| e.dead == dead)
            .filter(|e| !(e.why == Orphaned::Missed && orphan.why == Orphaned::Interrupted));
        if let Some(entry) = own_entry {
            queued.push((orphan.item, entry.fire_ms));
            continue;
        }
        if let (Orphaned::Missed, Some((version, entry))) = (orphan.why, existing.clone()) {
            queued.push((orphan.item, entry.as_ref().map_or(orphan.fire_ms, |e| e.fire_ms)));
            ops.push(TxnOp::check(paths.failover_item(orphan.item), Some(version)));
            if entry.is_none_or(|e| e.fire_ms < orphan.fire_ms) {
                owe_misfire(&mut ops, view, paths, orphan.item, orphan.fire_ms, Existing::Keep);
            }
            continue;
        }
        queued.push((orphan.item, orphan.fire_ms));
        let owner = paths.item_node(orphan.item, ItemNode::Instance);
        if let Some(version) = view.get(&owner).map(|n| n.version) {
            ops.push(TxnOp::check(owner, Some(version)));
        }
        let entry = FailoverEntry {
            fire_ms: orphan.fire_ms,
            rank: orphan.rank,
            why: orphan.why,
            dead: dead.to_owned(),
        };
        let path = paths.failover_item(orphan.item);
        ops.push(mark_failovering(view, paths, orphan.item, dead));
        match existing {
            None => ops.push(TxnOp::create(path, entry.encode(), CreateMode::Persistent)),
            // An interrupted run of an item queued already for another instance's missed
            // fire (or for garbage): that entry's claim waits for our marker to go, which
            // only a re-run of ours removes. Ours takes the entry; the missed fire is owed as
            // a misfire, caught up by the item's owner after the re-run (a second entry
            // failed the whole transaction, every time, and the item was blocked for good).
            Some((version, other)) => {
                ops.push(TxnOp::set(path, entry.encode(), Some(version)));
                if let Some(missed) = other.filter(|e| e.why == Orphaned::Missed) {
                    let (item, fire) = (orphan.item, missed.fire_ms);
                    owe_misfire(&mut ops, view, paths, item, fire, Existing::Keep);
                }
            }
        }
    }
    if let Some(ledger) = view.get(&paths.ledger(dead)) {
        ops.push(TxnOp::delete(paths.ledger(dead), Some(ledger.version)));
        // What the ledger accounted for goes into the record, with what this queue counted.
        let mark = ledger_of(view, paths, dead).and_then(Result::ok).and_then(|l| l.last_fire_ms);
        if let Some(op) = mark.max(counted_until).and_then(|m| note_departed(view, paths, dead, m))
        {
            ops.push(op);
        }
    } else if orphans.iter().any(|o| o.why == Orphaned::Missed) {
        // Missed fires counted from the record's mark (`left_by`): the mark moves past them,
        // or the reshard that moves the items away would owe them again. Fenced with the
        // record: a reshard committed meanwhile fails this, and it is computed again.
        if let Some(op) = counted_until.and_then(|m| note_departed(view, paths, dead, m)) {
            ops.push(op);
        }
    }
    ops
}

/// The mark the record of the assignments keeps for `id` ([`Assigned::departed`]): its fires
/// up to it are accounted for (started, or queued as missed), those after it owed if it
/// missed them.
pub fn departed_mark(view: &View, paths: &JobPaths, id: &str) -> Option<i64> {
    read_assigned(view, paths).and_then(|record| record.departed.get(id).copied())
}

/// The op that notes in the record of the assignments that `id` left with its fires up to
/// `mark` accounted for, as its ledger goes (see [`Assigned::departed`]); `None` without a
/// record that reads (no reshard owes catch-ups then). At the version the view shows: a
/// reshard committed meanwhile fails it, and it is computed again on the view that shows it.
pub fn note_departed(view: &View, paths: &JobPaths, id: &str, mark: i64) -> Option<TxnOp> {
    let path = paths.assigned();
    let node = view.get(&path)?;
    let mut record = Assigned::parse(&path, &node.data).ok()?;
    let noted = record.departed.entry(id.to_owned()).or_insert(mark);
    *noted = (*noted).max(mark);
    Some(TxnOp::set(path, record.encode(), Some(node.version)))
}

/// The op that drops the departed instances' ledger marks from the record of the
/// assignments, if it keeps any: failover was turned off, and they go with the ledgers (the
/// leader clears both), or a reshard after it is turned on again would read an instance's
/// mark from before it came back, and owe a fire that instance ran since with no ledger to
/// say so (2 × 1 `chaos` 4,231,657,252).
pub fn forget_departed(view: &View, paths: &JobPaths) -> Option<TxnOp> {
    let path = paths.assigned();
    let node = view.get(&path)?;
    let mut record = Assigned::parse(&path, &node.data).ok()?;
    if record.departed.is_empty() {
        return None;
    }
    record.departed.clear();
    Some(TxnOp::set(path, record.encode(), Some(node.version)))
}

/// A queue or claim transaction that failed because another instance got there first.
pub fn is_lost_race(e: &RegistryError) -> bool {
    matches!(
        e.transaction_failure(),
        Some((
            _,
            RegistryError::NodeExists { .. }
                | RegistryError::BadVersion { .. }
                | RegistryError::NoNode { .. }
        ))
    )
}

/// The op that writes `sharding/{item}/failovering`: the departed owner's id while the item's
/// failover is queued, as ElasticJob writes it (its tools read it; shardcron reads its own
/// entry). It goes with the entry: every removal of an entry removes it too.
fn mark_failovering(view: &View, paths: &JobPaths, item: u32, dead: &str) -> TxnOp {
    let path = paths.item_node(item, ItemNode::Failovering);
    match view.get(&path) {
        Some(node) => TxnOp::set(path, dead.as_bytes(), Some(node.version)),
        None => TxnOp::create(path, dead.as_bytes(), CreateMode::Persistent),
    }
}

/// The removal of queue entry `item` (at `version`, or any) and of its `failovering` node,
/// if the view shows one.
pub fn remove_entry(view: &View, paths: &JobPaths, item: u32, version: Option<u64>) -> Vec<TxnOp> {
    let mut ops = vec![TxnOp::delete(paths.failover_item(item), version)];
    let failovering = paths.item_node(item, ItemNode::Failovering);
    if let Some(node) = view.get(&failovering) {
        ops.push(TxnOp::delete(failovering, Some(node.version)));
    }
    ops
}

/// The removal of the entry of an item a count change removed since it was queued: its
/// re-run is owed no more (GUARANTEES.md, section 2), and the departed instance's `running`
/// marker on it goes too (left, it would hold the item back for good once the count grows
/// again, as [`queue`] says of the markers it finds beyond the count).
pub fn drop_removed_item(
    view: &View,
    paths: &JobPaths,
    item: u32,
    entry: &FailoverEntry,
) -> Vec<TxnOp> {
    let version = view.get(&paths.failover_item(item)).map(|n| n.version);
    let mut ops = remove_entry(view, paths, item, version);
    let running = paths.item_node(item, ItemNode::Running);
    if let Some(node) = view.get(&running).filter(|n| n.text().trim() == entry.dead) {
        ops.push(TxnOp::delete(running, Some(node.version)));
    }
    ops
}

/// Queue entries by item.
pub type Entries = Vec<(u32, FailoverEntry)>;

/// The queue as the view shows it, ascending by item; unreadable entries with their garbage.
pub fn queued(view: &View, paths: &JobPaths) -> (Entries, Vec<(u32, Garbage)>) {
    let mut entries = Vec::new();
    let mut garbage = Vec::new();
    for name in view.children(&paths.failover_items()) {
        let Ok(item) = name.parse::<u32>() else { continue };
        let Some((_, data)) = super::detail::read(view, paths, Detailed::Entry(item)) else {
            continue;
        };
        match FailoverEntry::parse(&paths.detail(Detailed::Entry(item)), data) {
            Ok(entry) => entries.push((item, entry)),
            Err(g) => garbage.push((item, g)),
        }
    }
    (entries, garbage)
}

/// The queued items `me` should claim: dealt round-robin over `eligible` by their rank.
pub fn share_of(
    queue: &[(u32, FailoverEntry)],
    eligible: &[String],
    me: &str,
) -> Vec<(u32, FailoverEntry)> {
    queue.iter().filter(|(_, e)| claimer_of(e, eligible) == Some(me)).cloned().collect()
}

/// The instance whose share `entry` is in ([`share_of`]), if any is eligible.
pub fn claimer_of<'a>(entry: &FailoverEntry, eligible: &'a [String]) -> Option<&'a str> {
    let seats = eligible.len() as u64;
    let index = entry.rank.checked_rem(seats)?;
    eligible.get(usize::try_from(index).ok()?).map(String::as_str)
}

/// A claim as decided from the view.
#[derive(Debug, Clone)]
pub enum Claim {
    /// Take the item: the transaction, and the index of its `running` op (whose resulting
    /// version the taker's finish expects).
    Take { ops: Vec<TxnOp>, running_op: usize },
    /// The entry is stale (an interrupted item whose marker no longer names the dead
    /// instance: its owner finished it after all, or someone took it): remove it only.
    Drop(Vec<TxnOp>),
    /// A missed fire of an item that a live instance is running now (a later fire): the
    /// catch-up waits for that run to end, or two runs of the item would overlap.
    Wait,
}

/// Decides the claim of queued `item` (entry `entry`) for `me`, recording the item in
/// `ledger` (`me`'s ledger as the claims of the same transaction leave it): a `Take`'s ops
/// leave the ledger's write to the caller, one for every claim of the transaction.
pub fn claim(
    view: &View,
    paths: &JobPaths,
    item: u32,
    entry: &FailoverEntry,
    me: &str,
    ledger: &mut Ledger,
) -> Claim {
    let queue_entry = paths.failover_item(item);
    let entry_version = view.get(&queue_entry).map(|n| n.version);
    let running = paths.item_node(item, ItemNode::Running);
    let marker = view.get(&running);
    let take_marker = match (entry.why, marker) {
        // The marker still names the dead instance, or names nobody alive (garbage replaced
        // it, or the taker it names vanished too): no run of it goes on.
        (Orphaned::Interrupted, Some(node))
            if node.text().trim() == entry.dead
                || !super::garbage::names_live(view, paths, &node.data) =>
        {
            if node.ephemeral {
                // Written while failover was off, by a session that may still linger: a
                // write would leave it that session's, and its end would delete the taker's
                // marker under the taker's run. Replaced by the taker's own, fenced the same.
                vec![
                    TxnOp::delete(running.clone(), Some(node.version)),
                    TxnOp::create(running, me.as_bytes(), CreateMode::Persistent),
                ]
            } else {
                vec![TxnOp::set(running, me.as_bytes(), Some(node.version))]
            }
        }
        (Orphaned::Missed, None) => {
            vec![TxnOp::create(running, me.as_bytes(), CreateMode::Persistent)]
        }
        (Orphaned::Missed, Some(node)) if view.exists(&paths.instance(node.text().trim())) => {
            return Claim::Wait;
        }
        _ => return Claim::Drop(remove_entry(view, paths, item, entry_version)),
    };
    // A taker's `failover` marker still there: the session of a taker that was gone before
    // its re-run ended lingers (the marker is ephemeral and goes with it). Creating ours would
    // fail, and with it every other claim of the transaction, each time (3 × 2 `lease` seed
    // 1,215: a survivor's claim of its own share failed on a stolen entry's, and it ran its
    // catch-ups first, 25 s): the claim waits for the marker to go.
    if view.exists(&paths.item_node(item, ItemNode::Failover)) {
        return Claim::Wait;
    }
    let owner = paths.item_node(item, ItemNode::Instance);
    ledger.running.insert(item, entry.fire_ms);
    // The op that leaves the taker's marker, whose result gives its version.
    let running_op = 1 + take_marker.len();
    let mut ops = vec![
        TxnOp::delete(queue_entry, entry_version),
        // Rewritten as it is: the write advances the item's fencing token past every run
        // of the dead owner, while the assignment stays the strategy's (the reshard the
        // departure asked for moves the item for the fires to come; a claimer that took
        // the item over would keep it against the strategy once that reshard is done).
        // Fenced on the version seen: a reshard committed meanwhile is not undone by a
        // rewrite of the owner it replaced (the claim fails and is decided again).
        if let Some(node) = view.get(&owner) {
            TxnOp::set(owner, node.data.clone(), Some(node.version))
        } else {
            TxnOp::create(owner, me.as_bytes(), CreateMode::Persistent)
        },
    ];
    ops.extend(take_marker);
    ops.push(TxnOp::create(
        paths.item_node(item, ItemNode::Failover),
        me.as_bytes(),
        CreateMode::Ephemeral,
    ));
    // A misfire marker owing this very fire is settled by this run, as a scheduled start
    // settles one naming its fire: left, the owner's catch-up would run the fire again (an
    // interrupted run whose fire the ledger no longer said takes the latest fire due, which
    // the owner, blocked by the run's marker, may have marked missed: chaos 1,808,656,480).
    if let Some((version, Some(owed))) = misfire_mark(view, paths, item) {
        if owed == entry.fire_ms {
            ops.push(TxnOp::delete(paths.item_node(item, ItemNode::Misfire), Some(version)));
        }
    }
    // The entry goes: its `failovering` node with it (last: `running_op` counts from the
    // front).
    ops.extend(remove_entry(view, paths, item, entry_version).into_iter().skip(1));
    Claim::Take { ops, running_op }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_assignment_record_reads_back_and_answers_by_fire_time() {
        let owners = |pairs: &[(u32, &str)]| {
            pairs
                .iter()
                .map(|&(n, id)| (n, id.to_owned()))
                .collect::<std::collections::BTreeMap<_, _>>()
        };
        let section = |raised_ms: i64, owners| Section {
            raised_ms,
            made_ms: None,
            owners,
            caught_up: std::collections::BTreeMap::new(),
        };
        let record = Assigned {
            raised_ms: 100,
            made_ms: Some(130),
            owners: owners(&[(0, "b@-@1"), (1, "a@-@1")]),
            caught_up: [(1, 45)].into_iter().collect(),
            departed: [("c@-@1".to_owned(), 95)].into_iter().collect(),
            earlier: vec![
                Section { made_ms: Some(60), ..section(50, owners(&[(0, "a@-@1"), (1, "a@-@1")])) },
                Section {
                    caught_up: [(0, 15)].into_iter().collect(),
                    ..section(20, owners(&[(0, "c@-@1")]))
                },
            ],
        };
        let read = Assigned::parse("/a", record.encode().as_bytes()).ok();
        assert_eq!(read.as_ref(), Some(&record));
        assert_eq!(record.owner_at(0, 101), Some(Some("b@-@1")));
        assert_eq!(record.owner_at(0, 100), Some(Some("a@-@1")));
        assert_eq!(record.owner_at(2, 100), Some(None));
        assert_eq!(record.owner_at(0, 50), Some(Some("c@-@1")));
        assert_eq!(record.owner_at(1, 50), Some(None));
        assert_eq!(record.owner_at(0, 20), None, "before the records: not known");
        assert!(record.caught_up(1, 45) && record.caught_up(0, 15));
        assert!(!record.caught_up(0, 45) && !record.caught_up(1, 15));
        // Fires every 10 ms: 110 and 120 were overtaken before the reshard made at 130; 130
        // itself waited for it and ran under it; 55 did before the reshard made at 60.
        assert_eq!(record.overtaken(110, Some(120)), Some(100));
        assert_eq!(record.overtaken(120, Some(130)), Some(100));
        assert_eq!(record.overtaken(130, Some(140)), None);
        assert_eq!(record.overtaken(55, Some(65)), None);
        assert_eq!(record.overtaken(51, Some(55)), Some(50));
        assert_eq!(record.overtaken(25, Some(30)), None, "not known when that one was made");
        assert_eq!(record.overtaken(110, None), None, "a fire no other follows");
        assert!(Assigned::parse("/a", b"garbage").is_err());
        assert!(Assigned::parse("/a", b"100\nmade soon").is_err(), "a commit time not a time");
        assert!(Assigned::parse("/a", b"100\n0").is_err(), "an item line without an owner");
    }

    #[test]
    fn a_queue_writes_each_misfire_marker_once_with_the_earliest_fire() {
        let marker = "/j/sharding/0/misfire";
        let fire = |ops: &[TxnOp]| -> Vec<(String, Vec<u8>)> {
            ops.iter()
                .filter_map(|op| match op {
                    TxnOp::Create { path, data, .. } | TxnOp::Set { path, data, .. } => {
                        Some((path.clone(), data.clone()))
                    }
                    _ => None,
                })
                .collect()
        };
        // An entry's takeover owes 80 s, the interrupted instance's own miss 90 s: one create.
        let mut ops = Vec::new();
        once_per_marker(&mut ops, TxnOp::create(marker, "80000", CreateMode::Persistent));
        once_per_marker(&mut ops, TxnOp::create(marker, "90000", CreateMode::Persistent));
        assert_eq!(fire(&ops), vec![(marker.to_owned(), b"80000".to_vec())]);
        // The other order keeps the earlier fire too.
        let mut ops = Vec::new();
        once_per_marker(&mut ops, TxnOp::create(marker, "90000", CreateMode::Persistent));
        once_per_marker(&mut ops, TxnOp::create(marker, "80000", CreateMode::Persistent));
        assert_eq!(fire(&ops), vec![(marker.to_owned(), b"80000".to_vec())]);
        // A check of the marker after a write of it would fail against that write: dropped.
        once_per_marker(&mut ops, TxnOp::check(marker, Some(3)));
        assert_eq!(ops.len(), 1);
        // Another item's marker is its own.
        once_per_marker(
            &mut ops,
            TxnOp::create("/j/sharding/1/misfire", "90000", CreateMode::Persistent),
        );
        assert_eq!(ops.len(), 2);
    }

    fn e(rank: u64) -> FailoverEntry {
        FailoverEntry { fire_ms: 10, rank, why: Orphaned::Interrupted, dead: "x".into() }
    }

    #[test]
    fn shares_are_dealt_by_rank_and_stay_put_as_the_queue_empties() {
        let eligible = vec!["a".to_owned(), "b".to_owned()];
        let queue = [(1, e(0)), (3, e(1)), (5, e(2))];
        let items = |share: Vec<(u32, FailoverEntry)>| {
            share.into_iter().map(|(n, _)| n).collect::<Vec<_>>()
        };
        assert_eq!(items(share_of(&queue, &eligible, "a")), vec![1, 5]);
        assert_eq!(items(share_of(&queue, &eligible, "b")), vec![3]);
        // b claimed item 3: a's share does not change.
        assert_eq!(items(share_of(&[(1, e(0)), (5, e(2))], &eligible, "a")), vec![1, 5]);
        assert!(share_of(&queue, &eligible, "c").is_empty(), "not eligible, no share");
    }
}
