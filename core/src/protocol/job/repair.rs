//! Garbage in the registry, and nodes a running job needs deleted by hand: who reports what,
//! and who repairs it.
//!
//! Every node the job reads goes through its parser ([`crate::protocol::garbage`]). A node
//! that does not read (or names no live instance where one must) is reported once per change
//! of it with a `registry_garbage` event, read the safe way, and repaired by whoever owns it:
//!
//! | node | safe reading | repaired by |
//! |---|---|---|
//! | `config` | the last good config stays (`config_rejected`) | the leader writes it back |
//! | `instances/{id}` | membership is the node's name | the instance rewrites it |
//! | `servers/{ip}` | enabled (as ElasticJob reads it) | its instances rewrite it (ENABLED) |
//! | `sharding/{n}/instance` | nobody owns the item | the leader reshards at once |
//! | `sharding/{n}/running` | running, an unknown run | its holder rewrites it; after its run, removes it; a departed holder's is failed over (by its ledger; with the ledger garbage too, as the item owner's run), and reported by whoever queues it |
//! | `sharding/{n}/misfire` | owes the latest fire | the catch-up settles it |
//! | `leader/election/instance` | no leader acts | the leader rewrites it |
//! | `leader/sharding/necessary` | a reshard is pending (holding every fire) | the leader stamps it with the time |
//! | `leader/failover/items/{n}` | no entry | any instance with failover rewrites it (or drops it) |
//! | `shardcron/ledger/{id}` | an empty ledger | its instance rewrites it |
//! | `shardcron/assigned` | no record | the leader writes it again from the owner nodes |
//!
//! The leader reports garbage in every node it reads, its own or not, so that each corruption
//! is reported while the job has a leader; an instance reports what it repairs. A new leader,
//! and an instance whose view was replaced, audit every node once.

use super::{Ctx, JobProtocol, Next, Pending, Reply, Request};
use crate::config::store;
use crate::layout::{ItemNode, JobNode};
use crate::protocol::failover::Orphan;
use crate::protocol::garbage::{self, names_live};
use crate::protocol::records::{
    parse_owner, Assigned, FailoverEntry, Garbage, Ledger, Orphaned, ServerStatus, MISSING,
};
use crate::protocol::{execution, failover, sharding};
use crate::registry::{CreateMode, RegistryError, TxnOp, TxnResult};

/// A repair this instance owes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Repair {
    /// Write the config this job runs with over a missing or unreadable `config`.
    Config,
    /// Rewrite our instance node.
    Instance,
    /// Write our server node (ENABLED) over garbage, or again after a deletion.
    Server,
    /// Rewrite the leader node we hold.
    Leader,
    /// Rewrite the `running` marker of an item we hold, or remove one our finished run left.
    Marker(u32),
    /// Rewrite (or drop) an unreadable failover queue entry.
    Entry(u32),
    /// Stamp an unreadable reshard flag with the time (the leader; it stays raised).
    Flag,
    /// Rewrite our ledger.
    Ledger,
    /// Remove an unreadable assignment record.
    Assigned,
}

impl JobProtocol {
    /// Looks at a node that changed (or that an audit visits) for garbage: reports it and owes
    /// the repair, when this instance is the one to act.
    pub(super) fn notice_garbage(&mut self, node: &JobNode, ctx: &Ctx<'_>) {
        self.look_at(node, ctx, true);
    }

    /// [`Self::notice_garbage`] for a node that `changed`, or that an audit visits.
    fn look_at(&mut self, node: &JobNode, ctx: &Ctx<'_>, changed: bool) {
        if !self.registration.registered() {
            return;
        }
        // A node reported missing that is back, or reported and gone since: what it holds
        // next is a new change (versions start again with a new node).
        // Looked at (and parsed) only while something is reported: every change passes here.
        let path =
            (!self.seldom().reported.is_empty()).then(|| garbage::path_of(&self.paths, node));
        if let Some(path) = path.flatten() {
            let readable = || {
                ctx.view.exists(&path)
                    && garbage::unreadable(ctx.view, &self.paths, node).is_none()
                    && !matches!(node, JobNode::Config)
            };
            let missing = self.seldom().reported.get(&path).map(|(_, v)| v == MISSING);
            if missing.is_some_and(|m| m == ctx.view.exists(&path) || (!m && readable())) {
                if let Some(seldom) = self.seldom_if() {
                    seldom.reported.remove(&path);
                }
            }
        }
        // Asked only where it decides something: every change passes here.
        let leader = || self.is_leader(ctx);
        let view = ctx.view;
        match node {
            JobNode::Instance(id) if *id == *self.me => {
                if let Some(g) = garbage::unreadable(view, &self.paths, node) {
                    self.report_once(&g, ctx);
                    self.seldom_mut().repairs.insert(Repair::Instance);
                }
            }
            JobNode::Server(ip) if *ip == *self.ip => {
                let path = self.paths.server(ip);
                let problem = match view.get(&path) {
                    // Registration made sure of it, and the view has not shown it yet.
                    None if self.registration.ensured(&path) => None,
                    None => {
                        Some(Garbage::missing(&path, "the server node is missing; written again"))
                    }
                    Some(_) => garbage::unreadable(view, &self.paths, node),
                };
                if let Some(g) = problem {
                    self.report_once(&g, ctx);
                    self.seldom_mut().repairs.insert(Repair::Server);
                }
            }
            JobNode::Item(n, ItemNode::Instance) => self.on_owner_change(*n, ctx, changed),
            JobNode::Item(n, ItemNode::Running) => self.on_marker_change(*n, ctx),
            JobNode::LeaderInstance => {
                let path = self.paths.leader_instance();
                let Some(holder) = view.get(&path) else {
                    self.leader_seen = None;
                    return;
                };
                if names_live(view, &self.paths, &holder.data) {
                    self.leader_seen = Some(holder.text().trim().to_owned());
                    return;
                }
                // Only the leader itself knows the node is its own (an ephemeral of its
                // session): the last id the node held is ours.
                if self.leader_seen.as_deref() == Some(&*self.me) {
                    let g = garbage::unreadable(view, &self.paths, node).unwrap_or_else(|| {
                        Garbage::new(&path, &holder.data, "the leader node names no live instance")
                    });
                    self.report_once(&g, ctx);
                    self.seldom_mut().repairs.insert(Repair::Leader);
                }
            }
            JobNode::ShardingNecessary => {
                if !leader() {
                    return;
                }
                if let Some(g) = garbage::unreadable(view, &self.paths, node) {
                    self.report_once(&g, ctx);
                    self.seldom_mut().repairs.insert(Repair::Flag);
                } else if !sharding::pending(view, &self.paths)
                    && !self.static_assignment(ctx)
                    && !self.assignment_is_strategy(ctx)
                {
                    // The flag went without a reshard that made the strategy's assignment (an
                    // operator deleted it): ask again.
                    self.owe_flag(true);
                }
            }
            JobNode::FailoverItem(n) => {
                if let Some(g) = garbage::unreadable(view, &self.paths, node) {
                    if leader() || self.failover_enabled() {
                        self.report_once(&g, ctx);
                    }
                    if self.failover_enabled() {
                        self.seldom_mut().repairs.insert(Repair::Entry(*n));
                    }
                }
            }
            JobNode::Ledger(id) => {
                if let Some(g) = garbage::unreadable(view, &self.paths, node) {
                    let mine = *id == *self.me;
                    if mine || leader() {
                        self.report_once(&g, ctx);
                    }
                    if mine && self.failover_enabled() {
                        self.seldom_mut().repairs.insert(Repair::Ledger);
                    }
                }
            }
            JobNode::Assigned => {
                if let Some(g) = garbage::unreadable(view, &self.paths, node) {
                    if leader() {
                        self.report_once(&g, ctx);
                        self.seldom_mut().repairs.insert(Repair::Assigned);
                    }
                }
            }
            // Only the leader reports these: the others do not parse them.
            JobNode::Server(_) | JobNode::Item(_, ItemNode::Misfire) | JobNode::Instance(_)
                if leader() =>
            {
                if let Some(g) = garbage::unreadable(view, &self.paths, node) {
                    self.report_once(&g, ctx);
                }
            }
            _ => {}
        }
    }

    /// Looks at every node the job reads (after the view was replaced, a registration, or a
    /// won election).
    pub(super) fn audit(&mut self, ctx: &Ctx<'_>) {
        for node in garbage::read_nodes(ctx.view, &self.paths) {
            self.look_at(&node, ctx, false);
        }
        self.look_at(&JobNode::Server(self.ip.to_string()), ctx, false);
        for n in 0..self.total() {
            self.on_owner_change(n, ctx, false);
        }
        // Only garbage: a config missing from the view may not have reached it yet (it was
        // published before the job's watch began); a deletion is noticed as such.
        if self.is_leader(ctx) && ctx.view.exists(&self.paths.config()) {
            self.check_config(ctx);
        }
    }

    /// An owner node changed (or is missing): if it names no live instance (an operator's or
    /// a tool's write, garbage, a deletion) the leader has it resharded at once, not at the
    /// next reconcile. An audit (`changed` false) does not report the id of an instance that
    /// left: a departure leaves those until its reshard.
    pub(super) fn on_owner_change(&mut self, n: u32, ctx: &Ctx<'_>, changed: bool) {
        // Before the first reshard there are no owner nodes; with a reshard pending, its
        // commit writes every one of them.
        let sharded = ctx.view.has_child_nodes(&self.paths.sharding());
        if n >= self.total() || !sharded || !self.is_leader(ctx) {
            return;
        }
        // A narrow watch (issue #15) covers the owner nodes below the count it was made for:
        // those of a count grown since are looked at once it covers them (its resync).
        if !ctx.view.covers(&self.paths.item_node(n, ItemNode::Instance)) {
            return;
        }
        let pending = sharding::pending(ctx.view, &self.paths);
        let owner_node = ctx.view.exists(&self.paths.item_node(n, ItemNode::Instance));
        // Not there yet: an item never assigned (a count grown, its reshard to come), or one
        // the pending reshard creates.
        if !owner_node && (pending || !ctx.view.exists(&self.paths.item(n))) {
            return;
        }
        if let Some(g) = garbage::owner_problem(ctx.view, &self.paths, n) {
            // A valid id of an instance that left, under static sharding, waits for it to come
            // back (that is what static sharding asks for); anything else is resharded.
            let owner = ctx.view.get(&g.path).map(|o| o.data.clone()).unwrap_or_default();
            let dead = crate::protocol::records::parse_owner(&g.path, &owner).ok().flatten();
            let dead_id = dead.is_some();
            if let Some(id) = dead.filter(|_| self.static_assignment(ctx)) {
                if self.assigned_by_reshard(n, &id, ctx) {
                    return;
                }
                // An id no reshard gave the item (an operator's or a tool's write): nobody
                // will come back under it, and waiting would leave the item unrun for good,
                // unreported (`garbage` seed 3,424,951,518, two instances of a static job: an
                // id of an instance that never was). Garbage, resharded as a count change is.
                let g = Garbage::new(
                    &g.path,
                    &owner,
                    "the owner is an instance no reshard gave the item; the job is resharded",
                );
                // Reported once: the raise makes the reshard pending, whose commit rewrites the
                // node (an id that parses reads as mended to `look_at`, which forgets reports).
                if !pending {
                    self.report_once(&g, ctx);
                }
                self.owe_flag(!pending);
                return;
            }
            // A departure leaves the id of an instance that left until its reshard (and a
            // failover claim rewrites the node as it is meanwhile): routine, not garbage.
            if !dead_id || (changed && !pending) {
                self.report_once(&g, ctx);
            }
            // With a reshard pending, its commit rewrites the node.
            self.owe_flag(!pending);
        }
    }

    /// Whether `id`, in the owner node of item `n`, is the owner the last reshard gave it, as
    /// the record of the assignments says; without a readable record (failover never on, a
    /// layout ElasticJob wrote), whether its server ever registered with the job.
    fn assigned_by_reshard(&self, n: u32, id: &str, ctx: &Ctx<'_>) -> bool {
        match failover::read_assigned(ctx.view, &self.paths) {
            Some(record) => record.owners.get(&n).is_some_and(|owner| owner == id),
            None => ctx.view.exists(&self.paths.server(crate::instance::ip_of(id))),
        }
    }

    /// Owner nodes below the count found empty as a reshard starts (an empty owner node is
    /// what a reshard writes beyond the count, never below it): garbage the reshard's commit
    /// writes over, reported now or never. An item the last reshard gave no owner (the count
    /// grew since) is new, not emptied.
    pub(super) fn emptied_owners(
        &self,
        start: &sharding::ReshardStart,
        ctx: &Ctx<'_>,
    ) -> Vec<Garbage> {
        let record = failover::read_assigned(ctx.view, &self.paths);
        let total = self.total();
        start
            .existing
            .iter()
            .filter(|&(&n, &there)| there && n < total)
            .filter(|&(n, _)| record.as_ref().is_none_or(|r| r.owners.contains_key(n)))
            .filter_map(|(&n, _)| {
                let path = self.paths.item_node(n, ItemNode::Instance);
                let node = ctx.view.get(&path).filter(|node| node.data.is_empty())?;
                let reason = "the owner node of an item below the count is empty; the item is \
                              resharded";
                Some(Garbage::new(&path, &node.data, reason))
            })
            .collect()
    }

    /// A `running` marker changed: the holder rewrites one that no longer names it (and no
    /// other live instance, which would be a failover taker's); a marker our finished run
    /// lost to garbage is removed; the leader reports what it cannot read.
    fn on_marker_change(&mut self, n: u32, ctx: &Ctx<'_>) {
        let path = self.paths.item_node(n, ItemNode::Running);
        let Some(marker) = ctx.view.get(&path) else {
            if let Some(seldom) = self.seldom_if() {
                seldom.lost_markers.remove(&n);
            }
            return;
        };
        if marker.data == self.me.as_bytes() {
            return;
        }
        if names_live(ctx.view, &self.paths, &marker.data) {
            // Taken over by a live instance: not ours any more.
            if let Some(seldom) = self.seldom_if() {
                seldom.lost_markers.remove(&n);
            }
            return;
        }
        let node = JobNode::Item(n, ItemNode::Running);
        let g = garbage::unreadable(ctx.view, &self.paths, &node).unwrap_or_else(|| {
            Garbage::new(&path, &marker.data, "the running marker names no live instance")
        });
        let ours = self.held_items().contains(&n) || self.seldom().lost_markers.contains(&n);
        // A marker naming an instance that left is an orphan waiting for failover, not
        // garbage, unless we hold it.
        let unreadable = garbage::unreadable(ctx.view, &self.paths, &node).is_some();
        if ours || (unreadable && self.is_leader(ctx)) {
            self.report_once(&g, ctx);
        }
        if ours {
            self.seldom_mut().repairs.insert(Repair::Marker(n));
        }
    }

    /// The leader's look at the config node: missing or unreadable, it writes its own back.
    pub(super) fn check_config(&mut self, ctx: &Ctx<'_>) {
        let path = self.paths.config();
        match ctx.view.get(&path) {
            None => {
                let g = Garbage::missing(
                    &path,
                    "the config node is missing; the leader writes it again",
                );
                self.report_once(&g, ctx);
                self.seldom_mut().repairs.insert(Repair::Config);
            }
            Some(node) => {
                if self.runs_with_stored(&node.data) {
                    return;
                }
                if store::parse_stored(self.job(), &node.data, &self.settings.known).is_err() {
                    self.seldom_mut().repairs.insert(Repair::Config);
                }
            }
        }
    }

    fn assignment_is_strategy(&self, ctx: &Ctx<'_>) -> bool {
        garbage::assignment_is_strategy(
            ctx.view,
            &self.paths,
            self.job(),
            self.config.job_sharding_strategy_type.as_deref(),
            &self.settings.strategies,
            self.total(),
        )
    }

    /// Reports garbage over the running markers of the interrupted runs in `orphans`, which
    /// this instance queues for failover and so repairs: their holder, gone, never will, and
    /// the leader does not read others' markers (3 × 2 `garbage` seed 3,401,235,278).
    pub(super) fn report_garbled_markers(&mut self, orphans: &[Orphan], ctx: &Ctx<'_>) {
        for orphan in orphans.iter().filter(|o| o.why == Orphaned::Interrupted) {
            let marker = JobNode::Item(orphan.item, ItemNode::Running);
            if let Some(g) = garbage::unreadable(ctx.view, &self.paths, &marker) {
                self.report_once(&g, ctx);
            }
        }
    }

    /// Reports garbage once per change of its node (per version and value).
    pub(super) fn report_once(&mut self, garbage: &Garbage, ctx: &Ctx<'_>) {
        let version = ctx.view.get(&garbage.path).map(|n| n.version);
        let seen = (version, garbage.value.clone());
        if self.seldom().reported.get(&garbage.path) != Some(&seen) {
            self.seldom_mut().reported.insert(garbage.path.clone(), seen);
            self.report_garbage(garbage);
        }
    }

    /// The next repair still needed, as a request; repairs the view shows are no longer
    /// needed are dropped.
    pub(super) fn repair_next(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        while let Some(repair) = self.seldom_if().and_then(|s| s.repairs.pop_first()) {
            if let Some(request) = self.repair_request(repair, ctx) {
                return Some(Next::Request(Pending::Repair(repair), request));
            }
        }
        None
    }

    /// The removal of a marker our finished run lost to garbage, each tried once (a leave
    /// retries nothing: it has a deadline).
    pub(super) fn lost_marker_repair_next(&mut self, ctx: &Ctx<'_>) -> Option<Next> {
        while let Some(&n) = self.seldom().lost_markers.first() {
            let request = self.repair_request(Repair::Marker(n), ctx);
            if let Some(seldom) = self.seldom_if() {
                seldom.lost_markers.remove(&n);
            }
            if let Some(request) = request {
                return Some(Next::Request(Pending::Repair(Repair::Marker(n)), request));
            }
        }
        None
    }

    fn repair_request(&self, repair: Repair, ctx: &Ctx<'_>) -> Option<Request> {
        let view = ctx.view;
        let set = |path: String, data: Vec<u8>, version| {
            Some(Request::Txn(vec![TxnOp::set(path, data, Some(version))]))
        };
        match repair {
            Repair::Config => {
                if !self.is_leader(ctx) {
                    return None;
                }
                let yaml = self.config.to_yaml().ok()?.into_bytes();
                let path = self.paths.config();
                match view.get(&path) {
                    None => {
                        Some(Request::Create { path, data: yaml, mode: CreateMode::Persistent })
                    }
                    Some(node) => store::parse_stored(self.job(), &node.data, &self.settings.known)
                        .is_err()
                        .then(|| set(path, yaml, node.version))
                        .flatten(),
                }
            }
            Repair::Instance => {
                let node = JobNode::Instance(self.me.to_string());
                let path = self.paths.instance(&self.me);
                let current = view.get(&path)?;
                garbage::unreadable(view, &self.paths, &node)?;
                set(path, self.instance_data(), current.version)
            }
            Repair::Server => {
                let path = self.paths.server(&self.ip);
                match view.get(&path) {
                    None => Some(Request::Create {
                        path,
                        data: b"ENABLED".to_vec(),
                        mode: CreateMode::Persistent,
                    }),
                    Some(node) => ServerStatus::parse(&path, &node.data)
                        .is_err()
                        .then(|| set(path, b"ENABLED".to_vec(), node.version))
                        .flatten(),
                }
            }
            Repair::Leader => {
                let path = self.paths.leader_instance();
                let node = view.get(&path)?;
                let foreign =
                    node.data != self.me.as_bytes() && !names_live(view, &self.paths, &node.data);
                (self.leader_seen.as_deref() == Some(&*self.me) && foreign)
                    .then(|| set(path, self.me.as_bytes().to_vec(), node.version))
                    .flatten()
            }
            Repair::Marker(n) => {
                let path = self.paths.item_node(n, ItemNode::Running);
                let node = view.get(&path)?;
                if node.data == self.me.as_bytes() || names_live(view, &self.paths, &node.data) {
                    return None;
                }
                if self.held_items().contains(&n) {
                    set(path, self.me.as_bytes().to_vec(), node.version)
                } else if self.seldom().lost_markers.contains(&n) {
                    Some(Request::Txn(vec![TxnOp::delete(path, Some(node.version))]))
                } else {
                    None
                }
            }
            Repair::Entry(n) => {
                let path = self.paths.failover_item(n);
                let node = view.get(&path)?;
                garbage::unreadable(view, &self.paths, &JobNode::FailoverItem(n))?;
                // The entry stood for an interrupted run if the item's marker outlived it:
                // queued again for the latest fire (which fire it owed is lost with the entry).
                // A marker naming a live instance is that instance's to judge: a leftover of
                // an earlier session of it, or its run going on.
                // The fires the departed owner missed after the entry's went to the item's
                // misfire marker with it: the entry's fire came before the one the marker
                // owes, or the failover and the catch-up would both run that one.
                let owed = execution::misfired(view, &self.paths, &[n])
                    .into_iter()
                    .find_map(|(_, owed)| owed.ok().flatten());
                let by = owed.map_or(ctx.now_ms, |fire| ctx.now_ms.min(fire - 1));
                let entry = |dead: String| FailoverEntry {
                    fire_ms: self.latest_fire_by(by),
                    rank: 0,
                    why: Orphaned::Interrupted,
                    dead,
                };
                let marker = view.get(&self.paths.item_node(n, ItemNode::Running));
                let named = execution::running_owner(view, &self.paths, n);
                match marker {
                    Some(m) if names_live(view, &self.paths, &m.data) => {
                        if named.as_deref() != Some(&*self.me) {
                            None
                        } else if self.held_items().contains(&n) {
                            let ops =
                                failover::remove_entry(view, &self.paths, n, Some(node.version));
                            Some(Request::Txn(ops))
                        } else {
                            set(path, entry(self.me.to_string()).encode(), node.version)
                        }
                    }
                    Some(_) if n < self.total() => {
                        let dead =
                            named.filter(|m| !m.is_empty() && !m.contains(char::is_whitespace));
                        set(
                            path,
                            entry(dead.unwrap_or_else(|| "unknown".to_owned())).encode(),
                            node.version,
                        )
                    }
                    _ => {
                        let ops = failover::remove_entry(view, &self.paths, n, Some(node.version));
                        Some(Request::Txn(ops))
                    }
                }
            }
            Repair::Flag => {
                let path = self.paths.sharding_necessary();
                let node = view.get(&path)?;
                if !self.is_leader(ctx) {
                    return None;
                }
                garbage::unreadable(view, &self.paths, &JobNode::ShardingNecessary)?;
                set(path, ctx.now_ms.to_string().into_bytes(), node.version)
            }
            Repair::Ledger => {
                if !self.failover_enabled() {
                    return None;
                }
                let path = self.paths.ledger(&self.me);
                let node = view.get(&path)?;
                garbage::unreadable(view, &self.paths, &JobNode::Ledger(self.me.to_string()))?;
                set(path, self.rebuilt_ledger(ctx).encode(), node.version)
            }
            Repair::Assigned => {
                let path = self.paths.assigned();
                let node = view.get(&path)?;
                garbage::unreadable(view, &self.paths, &JobNode::Assigned)?;
                set(path, self.rebuilt_assigned(ctx).encode().into_bytes(), node.version)
            }
        }
    }

    /// The record of the assignments rebuilt over garbage: the owner nodes as they are now,
    /// for the fires from now on. What it said of the fires before is lost (a reshard owes no
    /// catch-up of them, as with no record), but not who owns each item now: a departure
    /// reads it for an item whose owner node garbage replaces later (5 × 3 `garbage` seed
    /// 3,401,134,761: the record removed, then garbage over the owner node of an item whose
    /// owner had crashed; the fire it missed was owed by nobody).
    fn rebuilt_assigned(&self, ctx: &Ctx<'_>) -> Assigned {
        let owners = (0..self.total())
            .filter_map(|n| {
                let path = self.paths.item_node(n, ItemNode::Instance);
                let owner = parse_owner(&path, &ctx.view.get(&path)?.data).ok()??;
                Some((n, owner))
            })
            .collect();
        // Recorded as made just now, but before a reshard asked for and not made yet: that
        // raise is not answered (a record raised after it would read as its answer, and the
        // fires after it would not wait for the reshard: 2 × 1 `garbage` seed 3,577,481,010).
        let pending = sharding::flag_time(ctx.view, &self.paths).flatten();
        let raised_ms = pending.map_or(ctx.now_ms - 1, |raised| raised.min(ctx.now_ms) - 1);
        Assigned {
            raised_ms,
            made_ms: None,
            owners,
            caught_up: Default::default(),
            departed: Default::default(),
            earlier: Vec::new(),
        }
    }

    /// Our ledger as this process knows it: the items it holds with their fires; the last
    /// fire started is unknown, so nothing before now is owed if we vanish.
    fn rebuilt_ledger(&self, ctx: &Ctx<'_>) -> Ledger {
        let mut ledger = Ledger { last_fire_ms: Some(ctx.now_ms - 1), ..Ledger::default() };
        if let Some(flight) = &self.in_flight {
            for held in &flight.held {
                ledger.running.insert(held.item, flight.fire_ms);
            }
        }
        for (&fire_ms, held) in &self.seldom().backlog {
            for h in held {
                ledger.running.insert(h.item, fire_ms);
            }
        }
        ledger
    }

    pub(super) fn on_repair_reply(&mut self, repair: Repair, result: Result<Reply, RegistryError>) {
        match result {
            // Repaired: what the node holds next is a new change, whatever its version (every
            // successful write forgets the garbage reported where it wrote: `note_writes`).
            Ok(Reply::Txn(results)) => {
                if repair == Repair::Leader {
                    self.was_leader = true;
                }
                if let (Repair::Marker(n), Some(TxnResult::Set { version })) =
                    (repair, results.first())
                {
                    self.rewrote_marker(n, *version);
                }
                if let Repair::Marker(n) = repair {
                    if matches!(results.first(), Some(TxnResult::Deleted)) {
                        if let Some(seldom) = self.seldom_if() {
                            seldom.lost_markers.remove(&n);
                        }
                    }
                }
            }
            Ok(_) => {}
            // Someone else changed the node first: the view will show what, and the change is
            // looked at again then.
            Err(e) if e.transaction_failure().is_some() || e.is_node_exists() => {}
            Err(e) => {
                self.seldom_mut().repairs.insert(repair);
                self.failed(&e);
            }
        }
    }

    /// Reports garbage in the reshard flag before a raise writes over it.
    pub(super) fn report_flag_garbage(&mut self, ctx: &Ctx<'_>) {
        if let Some(g) = garbage::unreadable(ctx.view, &self.paths, &JobNode::ShardingNecessary) {
            self.report_once(&g, ctx);
        }
    }

    /// Our marker of item `n` is ours again at `version`: what finishes it expects that one.
    fn rewrote_marker(&mut self, n: u32, version: u64) {
        let flight = self.in_flight.iter_mut().flat_map(|f| f.held.iter_mut());
        let backlog = self.seldom.iter_mut().flat_map(|s| s.backlog.values_mut()).flatten();
        for held in flight.chain(self.finishing.iter_mut()).chain(backlog) {
            if held.item == n {
                held.version = version;
            }
        }
    }
}
