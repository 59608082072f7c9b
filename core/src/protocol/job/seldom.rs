//! What a job holds only after something went wrong (a registry error, a lost race, garbage
//! reported or repaired, a catch-up held back by the clock) or while it takes part in failover
//! (the queue's entries it has seen, the items it claimed). Every job's protocol stays in memory
//! and most of them never meet any of it, so it lives behind one pointer, allocated the first
//! time one of its fields is set (about 400 bytes less per idle job; issue #15's memory row).
//!
//! Reads go through [`JobProtocol::seldom`], which answers the defaults while nothing is
//! allocated; writes that set something through [`JobProtocol::seldom_mut`]; writes that only
//! clear through [`JobProtocol::seldom_if`], which allocates nothing.

use std::collections::{BTreeMap, BTreeSet};

use super::repair::Repair;
use super::{JobProtocol, RaceFence};
use crate::events::SkipReason;
use crate::protocol::execution::Held;
use crate::registry::RegistryError;

#[derive(Debug, Default)]
pub(super) struct Seldom {
    /// The last request's error, for the caller of a registration that failed.
    pub last_error: Option<RegistryError>,
    /// A departure whose queue transaction lost a race (another survivor queued first, the
    /// view did not show it yet): the instance, the view revision then, and how many tries
    /// lost so far. Tried again once the view changes; given up, loudly, after a few.
    pub queue_lost: Option<(String, u64, u32)>,
    /// The clear of the failover queue lost a race: tried again once the view moved on.
    pub clear_queue_race: RaceFence,
    /// A claim that lost a race to a write the view did not show when it was decided (another
    /// taker, a reshard): decided again, and the catch-ups behind it held, once the view
    /// moved past that revision (see `JobProtocol::claim_behind`).
    pub claim_race: RaceFence,
    /// Queued failover entries by item, with when this instance first saw each.
    pub entries_seen: BTreeMap<u32, i64>,
    /// Claimed failover items not yet run, by the fire they owe, with their marker versions.
    pub backlog: BTreeMap<i64, Vec<Held>>,
    /// Items whose claimed run ended with its `running` marker gone (taken over, or deleted
    /// with a lingering session): their `failover` markers, ours, still to remove.
    pub stray_failover: BTreeSet<u32>,
    /// The departures a raise is owed for, when it is owed for nothing else: dropped once the
    /// assignment in view answers every one of them (the reshard that did came while the raise
    /// waited, for a clock comparison over a slow link, say).
    pub flag_owed_departures: Option<Vec<String>>,
    /// Garbage last reported per path (the node's version and value), so that each change of
    /// a node is reported once.
    pub reported: BTreeMap<String, (Option<u64>, String)>,
    /// The paths of `reported` the outstanding request writes (noted only while garbage is
    /// reported: the fire path allocates nothing for it).
    pub writing: Vec<String>,
    /// Repairs of garbage (or of deleted nodes) this instance owes.
    pub repairs: BTreeSet<Repair>,
    /// Items whose marker our finish could not remove (it had changed): removed after all if
    /// the change proves to be garbage rather than a failover taker's.
    pub lost_markers: BTreeSet<u32>,
    /// Why the catch-up held back was last recorded skipped: while it stays owed, its tries
    /// again (at each change of the view, every 2 s while the clock is off) record a skip
    /// only for a new reason, not the same one over and over for one debt.
    pub catch_up_skip_said: Option<std::mem::Discriminant<SkipReason>>,
    /// A catch-up skipped because this clock was off: tried again (its clock compared again)
    /// at this time, or when the clock goes back, whatever the view does.
    pub catch_up_retry_ms: Option<i64>,
}

/// What [`JobProtocol::seldom`] answers while nothing was set.
static NOTHING: Seldom = Seldom {
    last_error: None,
    queue_lost: None,
    clear_queue_race: RaceFence::NONE,
    claim_race: RaceFence::NONE,
    entries_seen: BTreeMap::new(),
    backlog: BTreeMap::new(),
    stray_failover: BTreeSet::new(),
    flag_owed_departures: None,
    reported: BTreeMap::new(),
    writing: Vec::new(),
    repairs: BTreeSet::new(),
    lost_markers: BTreeSet::new(),
    catch_up_skip_said: None,
    catch_up_retry_ms: None,
};

impl JobProtocol {
    /// The seldom-set state, its defaults while none was set.
    pub(super) fn seldom(&self) -> &Seldom {
        self.seldom.as_deref().unwrap_or(&NOTHING)
    }

    /// The seldom-set state, to set something in it.
    pub(super) fn seldom_mut(&mut self) -> &mut Seldom {
        self.seldom.get_or_insert_with(Box::default)
    }

    /// The seldom-set state if any was set: for a write that only clears.
    pub(super) fn seldom_if(&mut self) -> Option<&mut Seldom> {
        self.seldom.as_deref_mut()
    }
}
