//! What a job needs its instance to watch (issue #15): the protocol declares it, the runtime
//! watches it.
//!
//! A job's steady state needs none of the other instances' per-fire writes (their `running`
//! markers and ledgers), so it watches a *narrow* scope: the config, servers, instances, the
//! `leader` subtree (election, reshard flag, failover queue), shardcron's details of those, the
//! per-item nodes every instance reads (`sharding/{n}/{instance,disabled,failover,failovering,
//! misfire}`, below the item count), the `running` markers of the items this instance owns or
//! holds (it must see garbage written into them), its own ledger and trigger, and the
//! distribute-once records when listeners are registered.
//!
//! It watches the job's whole subtree (*wide*) only while something reads the others'
//! markers or ledgers: its registration (leftovers of an earlier session), the leader with a
//! reshard flag raised (`any_running`, `owed_on_reshard`), a departure to handle, a failover
//! entry queued (claims read the orphaned marker), failover turned off (queues and ledgers are
//! cleared), a new leader's garbage audit. Each trigger is itself in the narrow scope: the flag
//! and the queue in `leader`, departures in `instances`.
//!
//! While the scope it needs is not what the view covers yet, the job waits (`scope_ready`):
//! the runtime swaps its watch and delivers the new scope's snapshot as a resync, as after a
//! reconnect. The view records reads outside the scope it covers, so a missing widening shows
//! up (in the simulator, as a failure) instead of a decision on stale data.

use super::{Ctx, JobProtocol};
use crate::layout::{Digits, GuaranteeStage, ItemNode, JobNode, JobPaths};
use crate::protocol::records::ServerStatus;
use crate::protocol::view::View;
use crate::protocol::{election, garbage};
use crate::registry::WatchScope;

/// The scope a job needs, in the terms it decides it in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobScope {
    /// The job's whole subtree.
    Wide,
    /// The narrow scope of a job of `total` items, with the `running` markers of these items
    /// (ascending).
    Narrow { total: u32, markers: Vec<u32> },
}

impl JobScope {
    /// Whether a view granted `self` covers what `other` needs.
    fn includes(&self, other: &JobScope) -> bool {
        match (self, other) {
            (JobScope::Wide, _) => true,
            (JobScope::Narrow { .. }, JobScope::Wide) => false,
            (
                JobScope::Narrow { total: all, markers: mine },
                JobScope::Narrow { total, markers },
            ) => all >= total && markers.iter().all(|n| mine.binary_search(n).is_ok()),
        }
    }
}

/// The scope last found covered by the view, with the view's scope generation then; and,
/// while the job waits for the view to cover it, the registry scope built for the job scope
/// it waits for (every change of the process's watch has each waiting job check again).
#[derive(Debug, Default)]
pub(super) struct Granted {
    covered: Option<(u64, JobScope)>,
    built: Option<Box<(JobScope, WatchScope)>>,
    /// What `scope` last read in the view ([`JobProtocol::view_facts`]), with the view's
    /// shape revision and the item count it was read at. A lock only because `scope` reads
    /// the view through `&self`; nothing else takes it.
    facts: parking_lot::Mutex<ViewFacts>,
}

/// What the view says about the scope a job needs, and the view's shape revision and item
/// count it was read at: every step asks several times (the protocol before each decision,
/// the runtime after it), and the view seldom changed in between.
#[derive(Debug, Default)]
struct ViewFacts {
    /// `None` until first read.
    at: Option<(u64, u32)>,
    /// The items whose owner node names this instance.
    owned: Vec<u32>,
    /// The leader node names this instance (its text trimmed).
    leading: bool,
    /// The leader node's text is exactly this instance's id: it leads.
    leader_exact: bool,
    /// A reshard is asked for or under way (the `necessary` or `processing` flag shows).
    flagged: bool,
    /// The leader node shows.
    led: bool,
    /// This instance's server node says `DISABLED` (`JobProtocol::server_disabled`).
    server_disabled: bool,
    /// The failover queue holds entries.
    queued: bool,
    /// The enabled items this instance owns ([`JobProtocol::my_items`]), once asked at this
    /// revision: owner nodes and `disabled` markers are not execution records, so the
    /// revision covers them, and every fire and idle look asks.
    my_items: Option<Vec<u32>>,
}

/// The per-item nodes every instance reads.
const ITEM_NODES: [ItemNode; 5] = [
    ItemNode::Instance,
    ItemNode::Disabled,
    ItemNode::Failover,
    ItemNode::Failovering,
    ItemNode::Misfire,
];

impl JobProtocol {
    /// The scope this job needs now, from its state and the view. Reads the view without the
    /// scope check (`View::peek`): it may look at a node before the watch covers it, to ask
    /// for it.
    pub fn scope(&self, view: &View) -> JobScope {
        let leaving = self.stop.as_ref().is_some_and(|stop| stop.is_leaving());
        if leaving {
            return JobScope::Wide;
        }
        let facts = self.view_facts(view);
        if self.stop.is_none() && self.needs_wide(&facts) {
            return JobScope::Wide;
        }
        let mut markers = facts.owned.clone();
        markers.extend(self.held_item_iter());
        markers.extend(self.seldom().lost_markers.iter().copied());
        markers.extend(self.seldom().stray_failover.iter().copied());
        markers.sort_unstable();
        markers.dedup();
        JobScope::Narrow { total: self.total(), markers }
    }

    /// Whether [`Self::scope`] is `scope` now, without building it: the runtime asks after
    /// every step, and the answer is nearly always yes (a built scope is an allocation and a
    /// sort, a twentieth of a simulated cluster's time).
    pub fn scope_is(&self, view: &View, scope: &JobScope) -> bool {
        let facts = self.view_facts(view);
        if self.wide_now(&facts) {
            return *scope == JobScope::Wide;
        }
        let JobScope::Narrow { total, markers } = scope else { return false };
        *total == self.total()
            && self.markers_within(&facts, |n| markers.binary_search(&n).is_ok())
            && markers.iter().all(|n| {
                facts.owned.binary_search(n).is_ok()
                    || self.seldom().lost_markers.contains(n)
                    || self.seldom().stray_failover.contains(n)
                    || self.held_item_iter().any(|h| h == *n)
            })
    }

    /// Whether a view granted `granted` covers [`Self::scope`] now, without building it (the
    /// protocol asks before each decision).
    fn scope_within(&self, view: &View, granted: &JobScope) -> bool {
        let JobScope::Narrow { total: all, markers: mine } = granted else { return true };
        let facts = self.view_facts(view);
        !self.wide_now(&facts)
            && *all >= self.total()
            && self.markers_within(&facts, |n| mine.binary_search(&n).is_ok())
    }

    /// Whether [`Self::scope`] is wide now.
    fn wide_now(&self, facts: &ViewFacts) -> bool {
        self.stop.as_ref().is_some_and(|stop| stop.is_leaving())
            || (self.stop.is_none() && self.needs_wide(facts))
    }

    /// Whether every item whose `running` marker a narrow [`Self::scope`] holds is in `has`.
    fn markers_within(&self, facts: &ViewFacts, has: impl Fn(u32) -> bool) -> bool {
        facts.owned.iter().all(|&n| has(n))
            && self.held_item_iter().all(&has)
            && self.seldom().lost_markers.iter().all(|&n| has(n))
            && self.seldom().stray_failover.iter().all(|&n| has(n))
    }

    /// What the view says about the scope this job needs, read again only when the job's
    /// nodes in the view (its scope included) or the item count changed since the last read.
    /// The markers and ledgers every fire writes are not among what it reads, so their changes
    /// do not count, nor do the other jobs' changes ([`View::shape_revision_of`]): a fire's
    /// later steps find the facts its first step read.
    fn view_facts(&self, view: &View) -> parking_lot::MutexGuard<'_, ViewFacts> {
        let key = Some((view.shape_revision_of(self.paths.root()), self.total()));
        let mut facts = self.granted.facts.lock();
        if facts.at == key {
            return facts;
        }
        // One path buffer for the owner nodes, not one allocation per item.
        let mut path = self.paths.sharding();
        path.push('/');
        let base = path.len();
        let owned: Vec<u32> = (0..self.total())
            .filter(|&n| {
                path.truncate(base);
                path.push_str(Digits::of(n).as_str());
                path.push_str("/instance");
                view.peek(&path).is_some_and(|owner| owner.text().trim() == &*self.me)
            })
            .collect();
        let (led, leading, leader_exact) = match election::leader_text(view, &self.paths) {
            Some(text) => (true, text.trim() == &*self.me, text == *self.me),
            None => (false, false, false),
        };
        let flagged = view.peek(&self.paths.sharding_necessary()).is_some()
            || view.peek(&self.paths.sharding_processing()).is_some();
        let queued = view.peek_has_children(&self.paths.failover_items());
        let server = self.paths.server(&self.ip);
        // Garbage reads as enabled, as ElasticJob reads it (reported, and rewritten by us).
        let server_disabled = view
            .peek(&server)
            .is_some_and(|n| ServerStatus::parse(&server, &n.data) == Ok(ServerStatus::Disabled));
        *facts = ViewFacts {
            at: key,
            owned,
            leading,
            leader_exact,
            flagged,
            led,
            server_disabled,
            queued,
            my_items: None,
        };
        facts
    }

    /// Whether this instance leads the job, from the facts read at this shape revision: the
    /// audit of every changed node asks it (a path built and looked up each time was a
    /// twentieth of a simulated cluster's time).
    pub(super) fn is_leader(&self, ctx: &Ctx<'_>) -> bool {
        self.view_facts(ctx.view).leader_exact
    }

    /// Whether the view shows a leader, from the facts (every step's look at leadership
    /// asks).
    pub(super) fn led(&self, view: &View) -> bool {
        self.view_facts(view).led
    }

    /// Whether a reshard flag (`necessary` or `processing`) shows, from the facts: without
    /// one no fire waits for a reshard, which every fire asks in three places.
    pub(super) fn flag_up(&self, view: &View) -> bool {
        self.view_facts(view).flagged
    }

    /// Whether this instance's server is disabled for the job, from the facts (the fire
    /// and the look at leadership ask at every step). Garbage in the server node reads as
    /// enabled, as ElasticJob reads it (reported, and rewritten by us).
    pub(super) fn server_disabled(&self, ctx: &Ctx<'_>) -> bool {
        self.view_facts(ctx.view).server_disabled
    }

    /// `compute` of the enabled items this instance owns, read once per shape revision.
    pub(super) fn cached_items(&self, view: &View, compute: impl FnOnce() -> Vec<u32>) -> Vec<u32> {
        let mut facts = self.view_facts(view);
        facts.my_items.get_or_insert_with(compute).clone()
    }

    /// Whether anything this job owes reads the other instances' markers or ledgers.
    fn needs_wide(&self, facts: &ViewFacts) -> bool {
        !self.registration.done()
            || (facts.leading && facts.flagged)
            || (facts.leading && self.audit_owed && self.audit_wide)
            || !self.departed.is_empty()
            || facts.queued
            || self.clear_queue_owed
            || self.own_markers_owed
    }

    /// The registry scope of `scope`, for the runtime's watch.
    pub fn watch_scope(&self, scope: &JobScope) -> WatchScope {
        match scope {
            JobScope::Wide => WatchScope::subtree(self.paths.root()),
            JobScope::Narrow { total, markers } => {
                narrow_scope(&self.paths, &self.me, *total, markers, self.settings.once_listeners)
            }
        }
    }

    /// Whether the view covers the scope the job needs now; when not, the job waits for the
    /// runtime to widen its watch (the new scope's snapshot comes as a resync).
    pub(super) fn scope_ready(&mut self, view: &View) -> bool {
        if !view.is_scoped() {
            return true;
        }
        let generation = view.scope_generation();
        if let Some((seen, granted)) = &self.granted.covered {
            // Only a removal from the scope under this job's root can uncover what was
            // covered: the other jobs' changes of the process's watch leave it covered.
            if view.narrowed_at(self.paths.root()) <= *seen {
                let within = self.scope_within(view, granted);
                debug_assert_eq!(within, granted.includes(&self.scope(view)));
                if within {
                    return true;
                }
            }
        }
        let wanted = self.scope(view);
        let ready = match self.granted.built.as_deref() {
            Some((built, scope)) if *built == wanted => view.includes(scope),
            _ => {
                let scope = self.watch_scope(&wanted);
                let ready = view.includes(&scope);
                self.granted.built = Some(Box::new((wanted.clone(), scope)));
                ready
            }
        };
        if ready {
            self.granted.covered = Some((generation, wanted));
            // Kept only while the job waits for it: a narrow scope is a few dozen paths per
            // job (some 250 bytes of every job held for nothing in the steady state).
            self.granted.built = None;
        }
        ready
    }
}

impl JobProtocol {
    /// A change the watch delivered: acted on once the view covers the job's scope (until
    /// then the job looks at everything again when it does), and only while the node is in
    /// the scope (a node that left it with a narrowing may be gone from the view).
    pub(super) fn on_change_in_scope(&mut self, node: JobNode, ctx: &Ctx<'_>) {
        if !self.scope_ready(ctx.view) {
            self.resync_deferred = true;
            return;
        }
        let detailed = match &node {
            JobNode::Detail(of) => Some(*of),
            node => node.detailed(),
        };
        let covered = match detailed {
            // Read together: ElasticJob's node and shardcron's detail of it.
            Some(of) => {
                ctx.view.covers(&self.paths.detailed(of)) && ctx.view.covers(&self.paths.detail(of))
            }
            None => garbage::path_of(&self.paths, &node).is_none_or(|path| ctx.view.covers(&path)),
        };
        if !covered {
            return;
        }
        self.on_change(node, ctx);
    }

    /// The view was replaced: looked at once it covers the job's scope.
    pub(super) fn on_resync_in_scope(&mut self, ctx: &Ctx<'_>) {
        if self.scope_ready(ctx.view) {
            self.resync_deferred = false;
            self.on_resync(ctx);
        } else {
            self.resync_deferred = true;
        }
    }
}

/// The narrow scope of the job at `paths` for instance `me` (see the module documentation).
pub fn narrow_scope(
    paths: &JobPaths,
    me: &str,
    total: u32,
    markers: &[u32],
    once_listeners: bool,
) -> WatchScope {
    let root = paths.root();
    // Not the job's root itself: nothing reads it, and on ZooKeeper, which keeps one watch
    // per path and client, a node watch on it would take the place of the whole subtree's
    // recursive watch while both scopes are open (a swap from wide to narrow).
    let mut subtrees = vec![
        paths.config(),
        paths.servers(),
        paths.instances(),
        format!("{root}/leader"),
        paths.detail_dirs()[0].clone(),
        paths.detail_dirs()[1].clone(),
        paths.detail(crate::layout::Detailed::Flag),
        paths.assigned(),
    ];
    let mut nodes = vec![
        format!("{root}/shardcron"),
        paths.ledgers(),
        paths.ledger(me),
        paths.triggers(),
        paths.trigger(me),
        paths.sharding(),
    ];
    if once_listeners {
        for stage in [GuaranteeStage::Started, GuaranteeStage::Completed] {
            subtrees.push(paths.guarantee_stage(stage));
        }
        nodes.push(format!("{root}/guarantee"));
    }
    for n in 0..total {
        if markers.binary_search(&n).is_ok() {
            continue;
        }
        nodes.push(paths.item(n));
        for leaf in ITEM_NODES {
            nodes.push(paths.item_node(n, leaf));
        }
    }
    // An item whose marker the job watches is watched whole: every node ElasticJob writes
    // under it is in the scope then, and one subtree entry (one recursive watch on ZooKeeper,
    // one entry in the runtime's bookkeeping) takes the place of seven.
    subtrees.extend(markers.iter().map(|&n| paths.item(n)));
    // Sorted once: a job of many items has hundreds of entries.
    WatchScope::of_entries(subtrees, nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_narrow_scope_leaves_out_the_others_per_fire_writes() {
        let paths = JobPaths::new("j");
        let scope = narrow_scope(&paths, "me", 3, &[1], false);
        for covered in [
            "/j/config",
            "/j/instances/other",
            "/j/servers/10.0.0.1",
            "/j/leader/sharding/necessary",
            "/j/leader/failover/items/2",
            "/j/shardcron/necessary",
            "/j/shardcron/misfire/2",
            "/j/shardcron/failover/0",
            "/j/shardcron/assigned",
            "/j/shardcron/ledger/me",
            "/j/trigger/me",
            "/j/sharding/2/misfire",
            "/j/sharding/0/instance",
            "/j/sharding/1/running",
        ] {
            assert!(scope.covers(covered), "{covered}");
        }
        for outside in [
            "/j/sharding/0/running",
            "/j/sharding/3/instance",
            "/j/shardcron/ledger/other",
            "/j/trigger/other",
            "/j/guarantee/started/0",
            "/k/config",
        ] {
            assert!(!scope.covers(outside), "{outside}");
        }
        assert!(WatchScope::subtree("/j").includes(&scope));
        assert!(scope.subtrees().contains(&"/j/sharding/1".to_owned()), "a marked item whole");
        assert!(!scope.nodes().iter().any(|n| n.starts_with("/j/sharding/1")));
        assert!(narrow_scope(&paths, "me", 3, &[], true).covers("/j/guarantee/started/0"));
    }

    #[test]
    fn a_granted_scope_covers_what_it_includes() {
        let narrow = |total, markers: &[u32]| JobScope::Narrow { total, markers: markers.to_vec() };
        assert!(JobScope::Wide.includes(&narrow(3, &[0, 1])));
        assert!(!narrow(3, &[0, 1]).includes(&JobScope::Wide));
        assert!(narrow(3, &[0, 1]).includes(&narrow(3, &[1])));
        assert!(!narrow(3, &[1]).includes(&narrow(3, &[0, 1])));
        assert!(!narrow(2, &[1]).includes(&narrow(3, &[1])), "more items, more owner nodes");
    }
}
