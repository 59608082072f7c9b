//! The protocol's view of the namespace: plain data, fed by the process's one subtree watch and
//! by this process's own successful writes.
//!
//! Every decision the protocol takes reads this view, not the registry (no read per fire).
//! ElasticJob's cache could miss a process's own write for a moment after it (its issue #2194);
//! here a successful write is recorded at once as *pending*, and reads see it until the watch
//! delivers the change (or a later one) for the same path.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;

mod config_writes;

use crate::layout::is_execution_record;
use crate::path_map::PathMap;
use crate::registry::{
    path, Node, ScopeChange, ScopeIndex, TxnOp, TxnResult, Version, WatchEvent, WatchScope,
};

type FxBuild = std::hash::BuildHasherDefault<rustc_hash::FxHasher>;

/// What this process last wrote to a path, until the watch catches up.
#[derive(Debug, Clone)]
enum Pending {
    Present(Node),
    Absent,
}

/// The namespace as the watch shows it, overlaid with this process's unconfirmed writes.
#[derive(Debug, Default)]
pub struct View {
    /// Found by job, then path within it (every fire reads a few dozen nodes of 15 per job).
    view: PathMap,
    pending: BTreeMap<String, Pending>,
    /// Bumped on every change; decisions that lost a race compare it.
    revision: u64,
    /// Bumped on every change but those of execution records ([`is_execution_record`]),
    /// scope changes included.
    shape_revision: u64,
    /// Both counts per top-level node (a job's root, `/job`), for changes at or below it; a change of
    /// anything (a snapshot, a scope change) is counted in `everywhere`, which every job's
    /// [`View::revision_of`] and [`View::shape_revision_of`] include. The jobs of a process
    /// share the view, and each reads again what it derives from its own nodes at their
    /// changes, not at the other jobs'.
    by_top: HashMap<Box<str>, Revisions, FxBuild>,
    /// The counts when a change of anything was last counted.
    everywhere: Revisions,
    /// Whether a scope is in force; `false`: the watch feeding the view covers everything (a
    /// view fed by a watch of the whole namespace, as the protocol's transcripts feed it).
    scoped: bool,
    /// The entries of the scope in force, hashed: every read is checked against it, and a
    /// change of the scope updates it entry by entry (a process with many jobs watches tens of
    /// thousands of entries).
    index: ScopeIndex,
    /// Bumped whenever the scope changes, so that a job can tell a scope it checked is still
    /// the one in force without comparing scopes.
    scope_generation: u64,
    /// Per top-level node (a job's root), the scope generation that last removed an entry at
    /// or below it; and the last that removed one above them all (`/`) or replaced the scope.
    /// A scope is only ever uncovered by a removal, so a job's check that its scope is
    /// covered holds until one under its own root: the registrations and narrowings of the
    /// other jobs, one after the other, do not have every job check again.
    narrowed: HashMap<Box<str>, u64, FxBuild>,
    narrowed_everywhere: u64,
    /// Whether reads are checked against the scope (see [`View::audit_reads`]).
    audit: bool,
    /// Reads of paths outside `scope` (see [`View::take_strays`]).
    strays: Strays,
    /// Values derived from one node each (see [`View::derived`]), dropped when it changes.
    derived: parking_lot::Mutex<HashMap<Box<str>, Option<i64>, FxBuild>>,
    /// The values of config nodes the watch replaced (see [`View::replaced_configs`]).
    config_writes: config_writes::ConfigWrites,
}

/// The view's two change counts ([`View::revision`], [`View::shape_revision`]) at some change.
#[derive(Debug, Default, Clone, Copy)]
struct Revisions {
    any: u64,
    shape: u64,
}

/// Reads outside the scope, recorded by `&self` readers (the runners read under a shared
/// lock): the first few paths, and how many there were.
#[derive(Debug, Default)]
struct Strays {
    seen: parking_lot::Mutex<(u64, Vec<String>)>,
}

/// How many stray paths are kept (the count goes on).
const STRAYS_KEPT: usize = 16;

impl View {
    /// Applies a watch event, and tells whether what [`View::get`] shows for its path changed:
    /// the event of this process's own write, once recorded, only confirms what reads already
    /// saw. (Conservative: `true` whenever it cannot tell.) Takes the event, whose node then
    /// goes into the view as it is.
    pub fn apply_seen(&mut self, event: WatchEvent) -> bool {
        let confirms_own = match &event {
            WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                matches!(self.pending.get(path), Some(Pending::Present(mine))
                    if mine.version == node.version && mine.data == node.data
                        && mine.ephemeral == node.ephemeral)
            }
            WatchEvent::Deleted { path } => {
                matches!(self.pending.get(path), Some(Pending::Absent))
            }
            WatchEvent::Resync { .. } | WatchEvent::Rescoped { .. } => false,
        };
        if let WatchEvent::Rescoped { change, added } = event {
            self.rescope(&change, added);
            return true;
        }
        self.settle_pending(&event);
        match event {
            WatchEvent::Rescoped { .. } => {}
            WatchEvent::Resync { nodes } => {
                self.view.replace(nodes);
                self.changed(None);
            }
            WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                self.changed(Some(&path));
                self.log_replaced_config(&path);
                self.view.insert(&path, node);
            }
            WatchEvent::Deleted { path } => {
                self.changed(Some(&path));
                self.view.remove(&path);
            }
        }
        !confirms_own
    }

    /// Applies a watch event.
    pub fn apply(&mut self, event: &WatchEvent) {
        match event {
            WatchEvent::Rescoped { change, added } => {
                return self.rescope(change, added.clone());
            }
            WatchEvent::Resync { nodes } => self.view.replace(nodes.clone()),
            WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                self.log_replaced_config(path);
                self.view.insert(path, node.clone());
            }
            WatchEvent::Deleted { path } => self.view.remove(path),
        }
        self.settle_pending(event);
        self.changed(match event {
            WatchEvent::Created { path, .. }
            | WatchEvent::Changed { path, .. }
            | WatchEvent::Deleted { path } => Some(path),
            WatchEvent::Resync { .. } | WatchEvent::Rescoped { .. } => None,
        });
    }

    /// Counts a change of `path` (`None`: of anything).
    fn changed(&mut self, path: Option<&str>) {
        let derived = self.derived.get_mut();
        if !derived.is_empty() {
            match path {
                Some(path) => {
                    derived.remove(path);
                }
                None => derived.clear(),
            }
        }
        self.revision += 1;
        let shape = !path.is_some_and(is_execution_record);
        if shape {
            self.shape_revision += 1;
        }
        let now = Revisions { any: self.revision, shape: self.shape_revision };
        let Some(path) = path else {
            self.everywhere = now;
            return;
        };
        // The root node itself is no job's.
        let Some(top) = top_level(path) else { return };
        let revisions = match self.by_top.get_mut(top) {
            Some(revisions) => revisions,
            None => self.by_top.entry(top.into()).or_default(),
        };
        revisions.any = now.any;
        if shape {
            revisions.shape = now.shape;
        }
    }

    /// Drops the pending writes an event confirms (or a snapshot overrides).
    fn settle_pending(&mut self, event: &WatchEvent) {
        if self.pending.is_empty() {
            return;
        }
        // Events arrive in registry order, and the event of our own write arrives before any
        // later change: until it does, an event for the same path is older than our write and
        // must not hide it. So only what can come after our write confirms it.
        match event {
            // A snapshot is the registry's word on everything.
            WatchEvent::Resync { .. } => self.pending.clear(),
            WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } => {
                let caught_up = match self.pending.get(path) {
                    // Same version: ours, or an older incarnation of the node; the data tells.
                    Some(Pending::Present(mine)) => {
                        node.version > mine.version
                            || (node.version == mine.version && node.data == mine.data)
                    }
                    // A create or change arriving before our delete's event happened before it.
                    Some(Pending::Absent) => false,
                    None => false,
                };
                if caught_up {
                    self.pending.remove(path);
                }
            }
            WatchEvent::Deleted { path } => {
                // Confirms our delete; a deletion arriving before our create's event is older.
                if matches!(self.pending.get(path), Some(Pending::Absent)) {
                    self.pending.remove(path);
                }
            }
            // Settled by `rescope`, node by node.
            WatchEvent::Rescoped { .. } => {}
        }
    }

    /// Records the effect of a committed transaction: every create, set and delete of `ops`,
    /// with the versions `results` report.
    pub fn committed(&mut self, ops: &[TxnOp], results: &[TxnResult]) {
        for (op, result) in ops.iter().zip(results) {
            match (op, result) {
                (TxnOp::Create { data, mode, .. }, TxnResult::Created { path }) => {
                    self.wrote(path, data, 0, mode.is_ephemeral());
                }
                (TxnOp::Set { path, data, .. }, TxnResult::Set { version }) => {
                    let ephemeral = self.peek(path).is_some_and(|n| n.ephemeral);
                    self.wrote(path, data, *version, ephemeral);
                }
                (TxnOp::Delete { path, .. }, TxnResult::Deleted) => self.deleted(path),
                _ => {}
            }
        }
    }

    /// Records this process's successful create or set. A backend may deliver the write's own
    /// event before the write returns: if the view already shows it (or a later version), there
    /// is nothing left to wait for, and a pending record would outlive its confirmation.
    pub fn wrote(&mut self, path: &str, data: &[u8], version: Version, ephemeral: bool) {
        if self
            .view
            .get(path)
            .is_some_and(|n| n.version > version || (n.version == version && n.data == data))
        {
            self.pending.remove(path);
            self.changed(Some(path));
            return;
        }
        let node = Node { data: data.to_vec(), version, ephemeral };
        self.pending.insert(path.to_owned(), Pending::Present(node));
        self.changed(Some(path));
    }

    /// Records this process's successful delete (unless the view already shows it gone: the
    /// event came first).
    pub fn deleted(&mut self, path: &str) {
        if !self.view.contains_key(path) {
            self.pending.remove(path);
            self.changed(Some(path));
            return;
        }
        self.pending.insert(path.to_owned(), Pending::Absent);
        self.changed(Some(path));
    }

    /// The node at `path` as this process knows it.
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.note_read(path);
        self.peek(path)
    }

    /// Logs the value the watch showed for `path` before the event about to replace it, if
    /// `path` is a config node (see [`View::replaced_configs`]).
    fn log_replaced_config(&mut self, path: &str) {
        if !path.ends_with("/config") {
            return;
        }
        if let Some(old) = self.view.get(path) {
            self.config_writes.replaced(path, &old.data);
        }
    }

    /// The values the watch showed for the config node at `path` and then replaced, logged
    /// after number `after` ([`View::config_log_mark`]), oldest first: a job handed several
    /// changes of its config at once sees only the last in [`View::get`], and may need one
    /// before it (the last readable config, when the last is garbage).
    pub fn replaced_configs(
        &self,
        path: &str,
        after: u64,
    ) -> impl DoubleEndedIterator<Item = &[u8]> {
        self.note_read(path);
        self.config_writes.since(path, after)
    }

    /// The number of the last value [`View::replaced_configs`] logged, for any path.
    pub fn config_log_mark(&self) -> u64 {
        self.config_writes.last()
    }

    /// `derive` of the node at `path` (as [`View::get`] reads it), computed once per change of
    /// that node: every fire asks for the raise time of the assignment record, whose check
    /// reads every line of a record up to 17 assignments long (a twentieth of a simulated
    /// cluster's time went to it).
    pub fn derived(
        &self,
        path: &str,
        derive: impl FnOnce(Option<&Node>) -> Option<i64>,
    ) -> Option<i64> {
        self.note_read(path);
        if let Some(&value) = self.derived.lock().get(path) {
            return value;
        }
        let value = derive(self.peek(path));
        self.derived.lock().insert(path.into(), value);
        value
    }

    /// [`View::get`] without the scope check: for what asks what to watch (which may read a
    /// node before the watch covers it, to ask for it), never for a decision.
    pub fn peek(&self, path: &str) -> Option<&Node> {
        match self.pending.get(path) {
            Some(Pending::Present(node)) => Some(node),
            Some(Pending::Absent) => None,
            None => self.view.get(path),
        }
    }

    pub fn exists(&self, path: &str) -> bool {
        self.get(path).is_some()
    }

    /// The node's data as text, if it exists.
    pub fn text(&self, path: &str) -> Option<String> {
        self.get(path).map(|n| n.text().into_owned())
    }

    /// This process's unconfirmed writes strictly below `prefix` (a parent's path and `/`).
    fn pending_below<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a String, &'a Pending)> + 'a {
        self.pending
            .range::<str, _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(p, _)| p.starts_with(prefix))
    }

    /// Whether `parent` has any child, without listing them.
    pub fn has_children(&self, parent: &str) -> bool {
        self.note_read(parent);
        self.peek_has_children(parent)
    }

    /// [`View::has_children`] without the scope check (see [`View::peek`]).
    pub fn peek_has_children(&self, parent: &str) -> bool {
        let prefix = path::below(parent);
        let mut deleted = false;
        for (_, pending) in self.pending_below(&prefix) {
            match pending {
                Pending::Present(_) => return true,
                Pending::Absent => deleted = true,
            }
        }
        if deleted {
            self.view.any_below(parent, |p| !matches!(self.pending.get(p), Some(Pending::Absent)))
        } else {
            self.view.has_below(parent)
        }
    }

    /// The names of the direct children of `parent`, sorted.
    pub fn children(&self, parent: &str) -> Vec<String> {
        self.note_read(parent);
        self.list_children(parent)
    }

    /// Whether [`View::children`] lists any, without listing them: the leader asks at every
    /// change of an owner node whether the job was ever sharded.
    pub fn has_child_nodes(&self, parent: &str) -> bool {
        self.note_read(parent);
        let prefix = path::below(parent);
        if self.pending_below(&prefix).next().is_none() {
            return self.view.has_child_nodes(parent);
        }
        !self.list_children(parent).is_empty()
    }

    fn list_children(&self, parent: &str) -> Vec<String> {
        let prefix = path::below(parent);
        let mut names: Vec<String>;
        if self.pending_below(&prefix).next().is_none() {
            names = self.view.children(parent).into_iter().map(|(n, _)| n.to_owned()).collect();
        } else {
            names = self
                .view
                .children(parent)
                .into_iter()
                .filter(|(n, _)| {
                    let p = path::join(parent, n);
                    !matches!(self.pending.get(&p), Some(Pending::Absent))
                })
                .map(|(n, _)| n.to_owned())
                .collect();
            for (p, pending) in self.pending_below(&prefix) {
                let rest = &p[prefix.len()..];
                if matches!(pending, Pending::Present(_))
                    && !rest.contains('/')
                    && !names.iter().any(|n| n == rest)
                {
                    names.push(rest.to_owned());
                }
            }
        }
        names.sort();
        names
    }

    /// Changes so far; grows with every event and every recorded write.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// Changes so far but those of execution records (the `running` markers and ledgers
    /// every fire writes): for what reads none of them, which need not look again after a
    /// fire's own writes.
    pub fn shape_revision(&self) -> u64 {
        self.shape_revision
    }

    /// [`View::revision`] as far as the subtree of the top-level node `root` (a job's root,
    /// `/job`) shows: it moves with every change below it and every change of everything, not
    /// with the other jobs' changes.
    pub fn revision_of(&self, root: &str) -> u64 {
        self.revisions_of(root).any
    }

    /// [`View::shape_revision`] as far as the subtree of `root` shows (see
    /// [`View::revision_of`]).
    pub fn shape_revision_of(&self, root: &str) -> u64 {
        self.revisions_of(root).shape
    }

    fn revisions_of(&self, root: &str) -> Revisions {
        let own = top_level(root).and_then(|top| self.by_top.get(top)).copied().unwrap_or_default();
        Revisions {
            any: own.any.max(self.everywhere.any),
            shape: own.shape.max(self.everywhere.shape),
        }
    }

    /// What the watch feeding the view covers (`None`: everything). Built from the index:
    /// for tests and diagnostics, not for a step.
    pub fn scope(&self) -> Option<WatchScope> {
        self.scoped.then(|| self.index.scope())
    }

    /// Whether a scope is in force (`false`: the view is fed by a watch of everything).
    pub fn is_scoped(&self) -> bool {
        self.scoped
    }

    /// Bumped whenever the scope changes.
    pub fn scope_generation(&self) -> u64 {
        self.scope_generation
    }

    /// The last scope generation that removed an entry of the scope at or below `root` (a
    /// top-level path, such as a job's root), or above it; 0 if none did. A check at a later
    /// or equal generation that the scope covers something below `root` still holds.
    pub fn narrowed_at(&self, root: &str) -> u64 {
        let own = self.narrowed.get(root).copied().unwrap_or(0);
        own.max(self.narrowed_everywhere)
    }

    /// Records that generation `generation` removes the scope entries `removed`.
    fn note_narrowing(&mut self, removed: &WatchScope, generation: u64) {
        for at in removed.subtrees().iter().chain(removed.nodes()) {
            match top_level(at) {
                Some(root) => {
                    self.narrowed.insert(root.into(), generation);
                }
                None => self.narrowed_everywhere = generation,
            }
        }
    }

    /// Whether the watch covers `path`. A listing of a node's children counts as covered
    /// when the node itself is: the protocol lists directories whose covered children are
    /// all it needs (`sharding`'s items below the count, say).
    pub fn covers(&self, path: &str) -> bool {
        !self.scoped || self.index.covers(path)
    }

    /// Whether the watch covers everything `wanted` covers.
    pub fn includes(&self, wanted: &WatchScope) -> bool {
        !self.scoped
            || (wanted.subtrees().iter().all(|root| self.index.in_subtree(root))
                && wanted.nodes().iter().all(|node| self.index.covers(node)))
    }

    /// Checks every read from now on against the scope in force, and records those outside it
    /// ([`View::take_strays`]). A diagnostic of the protocol for the simulator and the tests:
    /// it costs a lookup of the path and its ancestors per read (some 6 % of a fire's CPU),
    /// which production does not pay.
    pub fn audit_reads(&mut self) {
        self.audit = true;
    }

    fn note_read(&self, path: &str) {
        if !self.audit || self.covers(path) {
            return;
        }
        let mut seen = self.strays.seen.lock();
        seen.0 += 1;
        if seen.1.len() < STRAYS_KEPT && !seen.1.iter().any(|p| p == path) {
            seen.1.push(path.to_owned());
        }
    }

    /// How many reads fell outside the scope since the last call, and the first few paths
    /// read (counted only once [`View::audit_reads`] was called). A read outside the scope sees a node the watch does not keep up to date: a
    /// protocol that needed it should have asked for a wider scope first.
    pub fn take_strays(&self) -> (u64, Vec<String>) {
        std::mem::take(&mut *self.strays.seen.lock())
    }

    /// The paths covered both by the scope in force and by `scope` whose node `nodes` (a new
    /// watch's snapshot of `scope`) shows otherwise than the watch in force did: what changed
    /// between the last event taken from the old watch and the snapshot, which no event will
    /// report. Sorted.
    pub fn differences(&self, nodes: &BTreeMap<String, Node>, scope: &WatchScope) -> Vec<String> {
        if !self.scoped {
            return Vec::new();
        }
        let mut out: Vec<String> = nodes
            .iter()
            .filter(|(path, node)| {
                self.index.covers(path) && self.view.get(path).is_none_or(|seen| seen != *node)
            })
            .map(|(path, _)| path.clone())
            .collect();
        let mut gone = |path: &str| {
            if self.view.get(path).is_some() && !nodes.contains_key(path) && scope.covers(path) {
                out.push(path.to_owned());
            }
        };
        for node in self.index.nodes() {
            gone(node);
        }
        let mut stack: Vec<String> = self.index.subtrees().map(str::to_owned).collect();
        while let Some(path) = stack.pop() {
            gone(&path);
            for (name, _) in self.view.children(&path) {
                stack.push(path::join(&path, name));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// The watch's scope was changed in place by `change` (its `Rescoped` event): the nodes
    /// no entry covers any more leave the view, the ones it adds (`added`, as the watch shows
    /// them at that point) come in, and everything both scopes cover stays as it is, kept up
    /// to date by the same watch. This process's pending writes outside the new scope are
    /// dropped (no event will confirm them); those on added nodes are settled against `added`
    /// as [`View::swap`] settles them against a snapshot. Costs what the change changes.
    pub fn rescope(&mut self, change: &ScopeChange, added: BTreeMap<String, Node>) {
        // Which pending writes the old scope covered (their events kept coming).
        let covered_before: Vec<bool> = self.pending.keys().map(|at| self.covers(at)).collect();
        let generation = self.scope_generation + 1;
        let was_scoped = self.scoped;
        let dropped = if self.scoped {
            self.note_narrowing(&change.remove, generation);
            self.reindex(change)
        } else {
            // Fed by a watch of everything so far: whatever the new scope leaves out goes.
            self.narrowed_everywhere = generation;
            self.index = ScopeIndex::of(&change.add);
            self.scoped = true;
            self.uncovered_below(vec![path::ROOT.to_owned()])
        };
        for at in &dropped {
            self.view.remove(at);
        }
        // The pending writes the new scope settles or leaves out, whose paths then read
        // otherwise: their jobs saw a change too.
        let mut settled: Vec<String> = Vec::new();
        if !self.pending.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            for ((at, mine), before) in pending.into_iter().zip(covered_before) {
                let keep = self.index.covers(&at)
                    && ((before && !added.contains_key(&at))
                        || settle_against(&mine, added.get(&at)));
                if keep {
                    self.pending.insert(at, mine);
                } else {
                    settled.push(at);
                }
            }
        }
        // What is derived from a node changes with what the view shows at its path: only
        // the paths the change dropped, added or settled (looking at every value derived
        // under the job's root instead made registering ten thousand jobs quadratic).
        let derived = self.derived.get_mut();
        if !derived.is_empty() {
            for at in dropped.iter().chain(&settled).chain(added.keys()) {
                derived.remove(at.as_str());
            }
        }
        for (at, node) in added {
            self.view.insert(&at, node);
        }
        self.scope_generation = generation;
        if was_scoped {
            self.changed_tops(change, &settled);
        } else {
            self.changed(None);
        }
    }

    /// Counts a scope change in force: the nodes it added or dropped lie under its entries,
    /// so only the top-level nodes of those, and of the pending writes it `settled`, saw
    /// anything change (the registrations of a process's jobs, one after the other, each
    /// widen and narrow the scope of one job). An entry at the root changes everything.
    fn changed_tops(&mut self, change: &ScopeChange, settled: &[String]) {
        let entries = [&change.add, &change.remove]
            .into_iter()
            .flat_map(|scope| scope.subtrees().iter().chain(scope.nodes()))
            .chain(settled);
        let mut tops: Vec<&str> = Vec::new();
        for entry in entries {
            let Some(top) = top_level(entry) else { return self.changed(None) };
            if !tops.contains(&top) {
                tops.push(top);
            }
        }
        let tops: Vec<String> = tops.into_iter().map(str::to_owned).collect();
        self.revision += 1;
        self.shape_revision += 1;
        let now = Revisions { any: self.revision, shape: self.shape_revision };
        for top in tops {
            self.by_top.insert(top.into(), now);
        }
    }

    /// Updates the index by `change`, entry by entry. Returns the nodes of the view no longer
    /// covered.
    fn reindex(&mut self, change: &ScopeChange) -> Vec<String> {
        self.index.apply(change);
        let mut dropped: Vec<String> = change
            .remove
            .nodes()
            .iter()
            .filter(|node| !self.index.covers(node) && self.view.contains_key(node))
            .cloned()
            .collect();
        let roots = change
            .remove
            .subtrees()
            .iter()
            .filter(|root| !self.index.in_subtree(root))
            .cloned()
            .collect();
        dropped.extend(self.uncovered_below(roots));
        dropped
    }

    /// The nodes of the view at or below `roots` that the index does not cover.
    fn uncovered_below(&self, mut stack: Vec<String>) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(at) = stack.pop() {
            // All below a subtree entry is covered: not walked (a job's subtree given up for
            // its narrow scope keeps its `instances` and `servers`, a node per instance each).
            if self.index.in_subtree(&at) {
                continue;
            }
            for (name, _) in self.view.children(&at) {
                stack.push(path::join(&at, name));
            }
            if !self.index.has_node(&at) {
                out.push(at);
            }
        }
        out
    }

    /// Takes the first snapshot of a new watch of `scope`, which replaces the one feeding the
    /// view: the nodes outside it leave the view, the snapshot's replace the rest. Unlike a
    /// resync after a gap, this process's pending writes are settled node by node against
    /// the snapshot (which may predate a write that already returned: the new watch then
    /// delivers the write's event, which settles it); those outside the scope are dropped,
    /// since no event will ever confirm them.
    pub fn swap(&mut self, nodes: BTreeMap<String, Node>, scope: WatchScope) {
        let pending = std::mem::take(&mut self.pending);
        self.pending = pending
            .into_iter()
            .filter(|(path, mine)| scope.covers(path) && settle_against(mine, nodes.get(path)))
            .collect();
        self.view.replace(nodes);
        self.index = ScopeIndex::of(&scope);
        self.scoped = true;
        self.scope_generation += 1;
        self.narrowed.clear();
        self.narrowed_everywhere = self.scope_generation;
        self.changed(None);
    }
}

/// `/a` of `/a/b/c` and of `/a`; `None` for `/`.
fn top_level(at: &str) -> Option<&str> {
    let rest = at.strip_prefix('/')?;
    if rest.is_empty() {
        return None;
    }
    // A byte search: every change of the view asks.
    let end = rest.bytes().position(|b| b == b'/').map_or(at.len(), |i| i + 1);
    Some(&at[..end])
}

/// Whether a pending write stays pending after a snapshot of its node shows `node`.
fn settle_against(mine: &Pending, node: Option<&Node>) -> bool {
    match (mine, node) {
        (Pending::Present(mine), Some(node)) => {
            !(node.version > mine.version
                || (node.version == mine.version && node.data == mine.data))
        }
        (Pending::Present(_), None) => true,
        // A snapshot that still shows the node predates our delete (or shows a later
        // incarnation, which its next event will show anyway).
        (Pending::Absent, Some(_)) => true,
        (Pending::Absent, None) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(data: &str, version: Version) -> Node {
        Node { data: data.as_bytes().to_vec(), version, ephemeral: false }
    }

    #[test]
    fn own_writes_are_visible_until_the_watch_catches_up() {
        let mut c = View::default();
        c.apply(&WatchEvent::Created { path: "/j/x".into(), node: node("a", 0) });
        c.wrote("/j/x", b"mine", 2, false);
        // An older change still in flight must not hide our write.
        c.apply(&WatchEvent::Changed { path: "/j/x".into(), node: node("b", 1) });
        assert_eq!(c.text("/j/x").as_deref(), Some("mine"));
        c.apply(&WatchEvent::Changed { path: "/j/x".into(), node: node("mine", 2) });
        assert_eq!(c.text("/j/x").as_deref(), Some("mine"));
        c.apply(&WatchEvent::Changed { path: "/j/x".into(), node: node("later", 3) });
        assert_eq!(c.text("/j/x").as_deref(), Some("later"));
    }

    #[test]
    fn own_deletes_and_children() {
        let mut c = View::default();
        for p in ["/j", "/j/instances", "/j/instances/a", "/j/instances/b", "/j/instances/b/deep"] {
            c.apply(&WatchEvent::Created { path: p.into(), node: node("", 0) });
        }
        assert_eq!(c.children("/j/instances"), vec!["a", "b"]);
        c.deleted("/j/instances/a");
        c.wrote("/j/instances/c", b"", 0, true);
        assert_eq!(c.children("/j/instances"), vec!["b", "c"]);
        assert!(!c.exists("/j/instances/a"));
        c.apply(&WatchEvent::Deleted { path: "/j/instances/a".into() });
        c.apply(&WatchEvent::Created { path: "/j/instances/c".into(), node: node("", 0) });
        assert_eq!(c.children("/j/instances"), vec!["b", "c"]);
        assert_eq!(c.children("/"), vec!["j"]);
    }

    #[test]
    fn older_events_never_hide_our_own_writes() {
        let mut c = View::default();
        c.apply(&WatchEvent::Created { path: "/i".into(), node: node("old", 0) });
        // We re-create the node after an expiry deleted it; the deletion's event arrives after
        // our write returned.
        c.wrote("/i", b"mine", 0, true);
        c.apply(&WatchEvent::Deleted { path: "/i".into() });
        assert_eq!(
            c.text("/i").as_deref(),
            Some("mine"),
            "an older deletion does not hide our create"
        );
        c.apply(&WatchEvent::Created { path: "/i".into(), node: node("mine", 0) });
        assert_eq!(c.text("/i").as_deref(), Some("mine"));
        // And the other way round: our delete, then an older create's event.
        c.deleted("/i");
        c.apply(&WatchEvent::Changed { path: "/i".into(), node: node("mine", 1) });
        assert!(!c.exists("/i"), "an older change does not undo our delete");
        c.apply(&WatchEvent::Deleted { path: "/i".into() });
        assert!(!c.exists("/i"));
    }

    #[test]
    fn a_write_whose_event_came_first_is_not_left_pending() {
        let mut c = View::default();
        // The event of our own set arrives before the set returns...
        c.apply(&WatchEvent::Changed { path: "/flag".into(), node: node("t1", 1) });
        c.wrote("/flag", b"t1", 1, false);
        // ...then another instance deletes the node: the cache must follow.
        c.apply(&WatchEvent::Deleted { path: "/flag".into() });
        assert!(!c.exists("/flag"), "a confirmed write must not hide a later delete");
        // Likewise for a delete whose event came first.
        c.apply(&WatchEvent::Created { path: "/x".into(), node: node("a", 0) });
        c.apply(&WatchEvent::Deleted { path: "/x".into() });
        c.deleted("/x");
        c.apply(&WatchEvent::Created { path: "/x".into(), node: node("b", 0) });
        assert!(c.exists("/x"), "a confirmed delete must not hide a later create");
    }

    #[test]
    fn the_event_of_an_own_write_changes_nothing_seen() {
        let mut c = View::default();
        assert!(c.apply_seen(WatchEvent::Created { path: "/j/x".into(), node: node("a", 0) }));
        c.wrote("/j/x", b"mine", 1, false);
        // An older change in flight: the view does not show it, but it is not ours either.
        assert!(c.apply_seen(WatchEvent::Changed { path: "/j/x".into(), node: node("b", 1) }));
        assert!(!c.apply_seen(WatchEvent::Changed { path: "/j/x".into(), node: node("mine", 1) }));
        assert_eq!(c.text("/j/x").as_deref(), Some("mine"));
        c.deleted("/j/x");
        assert!(!c.apply_seen(WatchEvent::Deleted { path: "/j/x".into() }));
        assert!(!c.exists("/j/x"));
        assert!(c.apply_seen(WatchEvent::Created { path: "/j/x".into(), node: node("c", 0) }));
    }

    #[test]
    fn a_swap_keeps_only_the_new_scope_and_settles_own_writes_node_by_node() {
        let mut c = View::default();
        c.audit_reads();
        c.apply(&WatchEvent::Created { path: "/j/a".into(), node: node("a", 0) });
        c.apply(&WatchEvent::Created { path: "/j/b".into(), node: node("b", 0) });
        // Ours, committed after the new watch's snapshot was taken: its event is to come.
        c.wrote("/j/a", b"mine", 1, false);
        // Ours, already in the snapshot.
        c.wrote("/j/c", b"c", 0, false);
        // Ours, outside the new scope: no event will ever confirm it.
        c.wrote("/k/x", b"x", 0, false);
        let snapshot: BTreeMap<String, Node> =
            [("/j/a".to_owned(), node("a", 0)), ("/j/c".to_owned(), node("c", 0))].into();
        c.swap(snapshot, WatchScope::subtree("/j").with_node("/k"));
        assert_eq!(c.text("/j/a").as_deref(), Some("mine"), "a write the snapshot predates");
        assert!(!c.exists("/j/b"), "the snapshot's word");
        assert_eq!(c.text("/j/c").as_deref(), Some("c"));
        assert_eq!(c.take_strays().0, 0);
        assert!(!c.exists("/k/x"), "outside the scope: gone with it");
        let (count, paths) = c.take_strays();
        assert_eq!((count, paths), (1, vec!["/k/x".to_owned()]), "and the read is recorded");
        c.apply(&WatchEvent::Changed { path: "/j/a".into(), node: node("mine", 1) });
        assert_eq!(c.text("/j/a").as_deref(), Some("mine"));
        assert!(c.children("/k").is_empty());
        assert_eq!(c.take_strays().0, 0, "a node entry's listing counts as covered");
    }

    #[test]
    fn reads_outside_the_scope_are_recorded_only_when_audited() {
        let mut c = View::default();
        c.swap(BTreeMap::new(), WatchScope::subtree("/j"));
        assert!(!c.exists("/k/x"));
        assert_eq!(c.take_strays().0, 0, "production does not pay for the check");
        c.audit_reads();
        assert!(!c.exists("/k/x"));
        assert!(!c.exists("/j/x"));
        assert_eq!(c.take_strays(), (1, vec!["/k/x".to_owned()]));
    }

    #[test]
    fn a_rescope_drops_what_the_new_scope_leaves_out_and_takes_what_it_adds() {
        let mut c = View::default();
        let old = WatchScope::subtree("/j/a").with_node("/j/b");
        let mut nodes = BTreeMap::new();
        for p in ["/j/a", "/j/a/x", "/j/a/y", "/j/b"] {
            nodes.insert(p.to_owned(), node(p, 0));
        }
        c.swap(nodes, old);
        // Pending: one on a node both scopes cover, one on a node the new scope drops, one on
        // an added node the event shows older than ours.
        c.wrote("/j/a/x", b"mine", 1, false);
        c.wrote("/j/b", b"gone", 1, false);
        c.wrote("/j/c/z", b"mine", 3, false);
        let generation = c.scope_generation();
        let new = WatchScope::node("/j/a/x").with_subtree("/j/c");
        let added = BTreeMap::from([("/j/c/z".to_owned(), node("older", 2))]);
        let change = c.scope().unwrap_or_default().change_to(&new, 1);
        c.rescope(&change, added);
        assert_eq!(c.scope(), Some(new));
        assert!(c.scope_generation() > generation);
        assert_eq!(c.text("/j/a/x").as_deref(), Some("mine"), "kept, with our pending write");
        assert!(c.peek("/j/a/y").is_none() && c.peek("/j/a").is_none(), "dropped");
        assert!(c.peek("/j/b").is_none(), "dropped, with our write on it");
        assert_eq!(c.text("/j/c/z").as_deref(), Some("mine"), "added, ours still newer");
        c.apply(&WatchEvent::Changed { path: "/j/c/z".into(), node: node("mine", 3) });
        c.apply(&WatchEvent::Changed { path: "/j/c/z".into(), node: node("later", 4) });
        assert_eq!(c.text("/j/c/z").as_deref(), Some("later"), "settled by its event");
    }

    #[test]
    fn each_job_counts_the_changes_of_its_own_nodes() {
        let mut c = View::default();
        c.swap(BTreeMap::new(), WatchScope::subtree("/j").with_subtree("/k"));
        let counts = |c: &View| {
            [
                c.revision_of("/j"),
                c.shape_revision_of("/j"),
                c.revision_of("/k"),
                c.shape_revision_of("/k"),
            ]
        };
        let start = counts(&c);
        c.apply(&WatchEvent::Created { path: "/j/config".into(), node: node("a", 0) });
        let after_j = counts(&c);
        assert!(after_j[0] > start[0] && after_j[1] > start[1], "{after_j:?}");
        assert_eq!(after_j[2..], start[2..], "the other job's counts stay");
        // A running marker moves the revision, not the shape.
        c.wrote("/k/sharding/0/running", b"i1", 0, true);
        let after_k = counts(&c);
        assert!(after_k[2] > after_j[2] && after_k[3] == after_j[3], "{after_k:?}");
        assert_eq!(after_k[..2], after_j[..2]);
        // A scope change moves the jobs whose entries it moves, and those of the pending
        // writes it settles (here the marker, which the new scope leaves out).
        let change = c.scope().unwrap_or_default().change_to(&WatchScope::subtree("/j"), 1);
        c.rescope(&change, BTreeMap::new());
        let rescoped = counts(&c);
        assert!(rescoped[2] > after_k[2] && rescoped[3] > after_k[3], "{rescoped:?}");
        let change =
            c.scope().unwrap_or_default().change_to(&WatchScope::subtree("/j").with_node("/m"), 2);
        c.rescope(&change, BTreeMap::new());
        assert_eq!(counts(&c)[..], rescoped[..], "an entry under another top");
        // A snapshot is everyone's change.
        c.swap(BTreeMap::new(), WatchScope::subtree("/"));
        let swapped = counts(&c);
        assert!((0..4).all(|i| swapped[i] > rescoped[i]), "{swapped:?}");
    }

    #[test]
    fn only_a_removal_under_a_root_marks_it_narrowed() {
        let mut c = View::default();
        c.swap(BTreeMap::new(), WatchScope::subtree("/j").with_node("/k/config"));
        let swapped = c.scope_generation();
        assert_eq!((c.narrowed_at("/j"), c.narrowed_at("/k")), (swapped, swapped));
        let rescope = |c: &mut View, to: WatchScope| {
            let change = c.scope().unwrap_or_default().change_to(&to, 1);
            c.rescope(&change, BTreeMap::new());
            c.scope_generation()
        };
        // Another job's registration, then its narrowing: nothing of `/j` left the scope.
        let k_wide = WatchScope::subtree("/j").with_subtree("/k");
        rescope(&mut c, k_wide);
        let k_narrow = rescope(&mut c, WatchScope::subtree("/j").with_node("/k/config"));
        assert_eq!(c.narrowed_at("/j"), swapped, "covered scopes of /j still covered");
        assert_eq!(c.narrowed_at("/k"), k_narrow);
        assert_eq!(c.narrowed_at("/jk"), swapped, "a name sharing the prefix is another root");
        // `/j` narrowed: its own checks are stale, `/k`'s are not.
        let j_narrow = rescope(&mut c, WatchScope::node("/j/config").with_node("/k/config"));
        assert_eq!((c.narrowed_at("/j"), c.narrowed_at("/k")), (j_narrow, k_narrow));
        // A watch of everything removed: every root narrowed.
        rescope(&mut c, WatchScope::subtree("/"));
        let all = rescope(&mut c, WatchScope::node("/j/config"));
        assert_eq!((c.narrowed_at("/j"), c.narrowed_at("/k")), (all, all));
    }

    #[test]
    fn resync_replaces_everything() {
        let mut c = View::default();
        c.wrote("/j/x", b"mine", 0, false);
        c.apply(&WatchEvent::Resync { nodes: [("/j/y".to_owned(), node("y", 4))].into() });
        assert!(!c.exists("/j/x"));
        assert_eq!(c.get("/j/y").map(|n| n.version), Some(4));
    }
}
