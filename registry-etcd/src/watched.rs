//! The key ranges one etcd watch stream follows, found by watch id (at every response) and by
//! entry (at every change of scope) without a pass over all of them.
//!
//! A scheduler of ten thousand jobs watches over a hundred thousand ranges on one stream, and
//! each job it registers changes a few. Looking a response's watch up in a list, or rebuilding
//! the lists at each change, cost a pass over every range each time: registering jobs slowed
//! down with their number, and the task read its stream so slowly that etcd held watches back
//! (which, out of order, called for a resync of everything). Here a range's watch id is its
//! slot's index plus one, so a response finds its range at once, and a hash table of slot
//! indices finds the range of an entry.

use hashbrown::HashTable;
use shardcron_core::registry::{path, WatchScope};
use std::hash::{BuildHasher, Hash};

use crate::keys::KeySpace;

/// One watched key range: the node keys of a subtree, or the key of one node. Kept as the
/// entry's client path, its keys made when needed (the namespace prefix in each of hundreds of
/// thousands of ranges was a sixth of their size).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Range {
    path: Box<str>,
    /// A prefix range (a subtree) rather than a single key. A subtree and a node entry of the
    /// same path have the same key (a subtree taking over a node's watch has both for a while).
    subtree: bool,
}

impl Range {
    /// The range of the subtree at `path`.
    pub fn subtree(path: &str) -> Range {
        Range { path: path.into(), subtree: true }
    }

    /// The range of the node at `path`; `None` for the root, which has no key (it always
    /// exists and never changes, so a node entry for it needs no watch).
    pub fn node(at: &str) -> Option<Range> {
        (at != path::ROOT).then(|| Range { path: at.into(), subtree: false })
    }

    /// The first key of the range.
    pub fn key(&self, keys: &KeySpace) -> Vec<u8> {
        if self.subtree {
            keys.subtree(&self.path)
        } else {
            keys.node(&self.path)
        }
    }

    /// The end of a subtree's prefix range; `None` for a single key.
    pub fn end(&self, keys: &KeySpace) -> Option<Vec<u8>> {
        self.subtree.then(|| prefix_end(&self.key(keys)))
    }

    /// The entry's client path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// A subtree's range rather than a single node's.
    pub fn is_subtree(&self) -> bool {
        self.subtree
    }
}

/// The first key after every key starting with `prefix`.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// The ranges of the entries of `scope` (taken as they are: a minimal form gives one range
/// per key range etcd must watch).
pub(crate) fn ranges_of(scope: &WatchScope) -> Vec<Range> {
    let subtrees = scope.subtrees().iter().map(|p| Range::subtree(p));
    subtrees.chain(scope.nodes().iter().filter_map(|p| Range::node(p))).collect()
}

/// The watch id of the range in slot `index` (etcd takes 0 as "choose one").
pub(crate) fn watch_id(index: usize) -> i64 {
    i64::try_from(index).map_or(i64::MAX, |i| i.saturating_add(1))
}

/// The slot of watch id `id`.
fn index_of(id: i64) -> Option<usize> {
    usize::try_from(id.checked_sub(1)?).ok()
}

/// The slot at `index`, if it holds a range.
fn slot_at(slots: &[Option<Slot>], index: u32) -> Option<&Slot> {
    slots.get(index as usize)?.as_ref()
}

/// A range and how far its watch has delivered.
#[derive(Debug)]
struct Slot {
    range: Range,
    /// The last revision whose changes it has delivered, or that the subscriber's snapshot
    /// shows, or that a progress notification said it had caught up with.
    through: i64,
}

/// The ranges of one etcd stream, each in the slot its watch id names.
#[derive(Default)]
pub(crate) struct Watched {
    /// `None`: reserved for a watch being added, or left by a cancelled one.
    slots: Vec<Option<Slot>>,
    /// Slots whose watch's cancellation etcd confirmed: their ids are free on the stream.
    free: Vec<usize>,
    /// Slot indices of the ranges, hashed by range.
    by_range: HashTable<u32>,
    hasher: rustc_hash::FxBuildHasher,
    /// How many slots hold a range.
    len: usize,
}

impl Watched {
    /// `ranges` as watched through revision `rev`, with ids in their order.
    pub fn new(ranges: Vec<Range>, rev: i64) -> Self {
        let mut watched = Watched::default();
        for range in ranges {
            let id = watched.reserve();
            watched.fill_id(id, range, rev);
        }
        watched
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ranges in slot order, with their watch ids and revisions delivered through.
    pub fn iter(&self) -> impl Iterator<Item = (i64, &Range, i64)> + '_ {
        let slots = self.slots.iter().enumerate();
        slots.filter_map(|(i, s)| s.as_ref().map(|s| (watch_id(i), &s.range, s.through)))
    }

    /// The ranges in slot order, without gaps once [`compact`](Self::compact)ed.
    pub fn ranges(&self) -> Vec<&Range> {
        self.iter().map(|(_, range, _)| range).collect()
    }

    /// The range watched with id `id`, if one is (not a watch being added or cancelled).
    pub fn range(&self, id: i64) -> Option<&Range> {
        Some(&self.slots.get(index_of(id)?)?.as_ref()?.range)
    }

    /// How far the watch `id` has delivered.
    pub fn through(&self, id: i64) -> Option<i64> {
        Some(self.slots.get(index_of(id)?)?.as_ref()?.through)
    }

    /// The watch `id` has delivered through `rev`.
    pub fn advance(&mut self, id: i64, rev: i64) {
        let slot = index_of(id).and_then(|i| self.slots.get_mut(i)).and_then(Option::as_mut);
        if let Some(slot) = slot {
            slot.through = slot.through.max(rev);
        }
    }

    /// Every watch delivered through `rev` (a scope read again at it).
    pub fn set_through(&mut self, rev: i64) {
        self.slots.iter_mut().flatten().for_each(|s| s.through = rev);
    }

    /// Whether `range` is watched.
    pub fn contains(&self, range: &Range) -> bool {
        self.find(range).is_some()
    }

    fn hash(&self, range: &Range) -> u64 {
        self.hasher.hash_one(range)
    }

    fn find(&self, range: &Range) -> Option<usize> {
        let slots = &self.slots;
        let same = |i: &u32| slot_at(slots, *i).is_some_and(|s| s.range == *range);
        self.by_range.find(self.hash(range), same).map(|&i| i as usize)
    }

    /// A slot for a watch about to be added: its id is the slot's.
    pub fn reserve(&mut self) -> i64 {
        let index = self.free.pop().unwrap_or_else(|| {
            self.slots.push(None);
            self.slots.len() - 1
        });
        watch_id(index)
    }

    /// The watch `id` reserved now follows `range`, delivered through `rev`.
    pub fn fill_id(&mut self, id: i64, range: Range, rev: i64) {
        if let Some(index) = index_of(id) {
            self.fill(index, range, rev);
        }
    }

    fn fill(&mut self, index: usize, range: Range, rev: i64) {
        let (Some(slot), Ok(at)) = (self.slots.get_mut(index), u32::try_from(index)) else {
            return;
        };
        let hash = self.hasher.hash_one(&range);
        if slot.replace(Slot { range, through: rev }).is_none() {
            self.len += 1;
        }
        let (slots, hasher) = (&self.slots, &self.hasher);
        let rehash = |i: &u32| slot_at(slots, *i).map_or(0, |s| hasher.hash_one(&s.range));
        self.by_range.insert_unique(hash, at, rehash);
    }

    /// Stops following `range`; returns the id of its watch, to cancel. Its slot stays taken
    /// until etcd confirms the cancellation ([`cancelled`](Self::cancelled)).
    pub fn remove(&mut self, range: &Range) -> Option<i64> {
        let hash = self.hash(range);
        let slots = &self.slots;
        let same = |i: &u32| slot_at(slots, *i).is_some_and(|s| s.range == *range);
        let (index, _) = self.by_range.find_entry(hash, same).ok()?.remove();
        let index = index as usize;
        if self.slots.get_mut(index).and_then(Option::take).is_some() {
            self.len -= 1;
        }
        Some(watch_id(index))
    }

    /// etcd confirmed the cancellation of watch `id`: its id may be given again.
    pub fn cancelled(&mut self, id: i64) {
        let Some(index) = index_of(id) else { return };
        if matches!(self.slots.get(index), Some(None)) {
            self.free.push(index);
        }
    }

    /// The ranges moved to the first slots, in their order, for a new etcd stream: ids
    /// `1..=len`, none reserved or cancelled.
    pub fn compact(&mut self) {
        self.slots.retain(Option::is_some);
        self.free.clear();
        self.by_range.clear();
        let (slots, hasher) = (&self.slots, &self.hasher);
        for (index, slot) in slots.iter().enumerate() {
            let (Some(slot), Ok(at)) = (slot, u32::try_from(index)) else { continue };
            let rehash = |i: &u32| slot_at(slots, *i).map_or(0, |s| hasher.hash_one(&s.range));
            self.by_range.insert_unique(hasher.hash_one(&slot.range), at, rehash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> KeySpace {
        KeySpace::new(Some("ns")).unwrap()
    }

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end(&[b'a', 0xff]), b"b".to_vec());
        assert_eq!(prefix_end(&[0xff]), vec![0]);
    }

    #[test]
    fn ranges_follow_the_entries_and_leave_the_root_node_out() {
        let keys = keys();
        let scope = WatchScope::subtree("/a").with_node("/c").with_node("/").minimal();
        let shown: Vec<(String, String, Option<String>)> = ranges_of(&scope)
            .iter()
            .map(|r| {
                let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                (r.path().to_owned(), text(&r.key(&keys)), r.end(&keys).map(|e| text(&e)))
            })
            .collect();
        assert_eq!(
            shown,
            vec![
                ("/a".into(), "/ns/n/a/".into(), Some("/ns/n/a0".into())),
                ("/c".into(), "/ns/n/c/".into(), None),
            ]
        );
        assert_eq!(watch_id(0), 1);
    }

    #[test]
    fn ids_are_slots_and_come_free_once_etcd_confirms_a_cancellation() {
        let a = Range::subtree("/a");
        let a_node = Range::node("/a").unwrap();
        let b = Range::node("/b").unwrap();
        let mut watched = Watched::new(vec![a.clone(), b.clone()], 7);
        assert_eq!((watched.len(), watched.through(1), watched.through(2)), (2, Some(7), Some(7)));
        assert!(watched.contains(&a) && !watched.contains(&a_node), "kind tells ranges apart");
        assert_eq!(watched.range(2), Some(&b));

        assert_eq!(watched.remove(&a), Some(1));
        assert_eq!(watched.remove(&a), None);
        assert_eq!((watched.len(), watched.range(1)), (1, None));
        // Not confirmed yet: a new watch gets a new id.
        let id = watched.reserve();
        assert_eq!(id, 3);
        watched.fill_id(id, a_node.clone(), 9);
        watched.cancelled(1);
        assert_eq!(watched.reserve(), 1, "the confirmed id is given again");

        watched.advance(3, 12);
        watched.advance(3, 10);
        assert_eq!(watched.through(3), Some(12));
        watched.compact();
        let ids: Vec<(i64, String, i64)> =
            watched.iter().map(|(id, r, t)| (id, r.path().to_owned(), t)).collect();
        assert_eq!(ids, vec![(1, "/b".into(), 7), (2, "/a".into(), 12)]);
        assert_eq!(watched.remove(&b), Some(1));
        assert!(watched.contains(&a_node));
    }
}
