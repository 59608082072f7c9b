//! This runner's part in failover: queueing a dead instance's orphans, claiming its share, and
//! running what it claimed (the protocol itself is [`crate::failover`]).

use super::*;

/// When a runner looks for departures it has not handled yet (see `notice_departures`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Departures {
    /// Before writing running markers.
    BeforeMarking,
    /// Before the leader reshards for the fire at this time.
    BeforeReshard(i64),
}

impl JobRunner {
    // ------------------------------------------------------------------ failover

    pub(super) fn failover_enabled(&self) -> bool {
        self.config.failover && self.config.monitor_execution
    }

    /// Queues the items `dead` was running, and, with `misfire` on, the items whose fires it
    /// missed before its death was noticed (see [`crate::failover`]).
    pub(super) async fn queue_orphans_of(&mut self, dead: &str) -> Result<()> {
        let now = self.shared.handles.clock.now_ms();
        self.queue_orphans_until(dead, now).await
    }

    /// [`Self::queue_orphans_of`], counting missed fires up to `now` only.
    async fn queue_orphans_until(&mut self, dead: &str, now: i64) -> Result<()> {
        let total = self.config.checked_total_count()?;
        let orphans = {
            let cache = self.shared.cache.read();
            let mut orphans = failover::orphans_of(&cache, &self.paths, dead, total);
            if let (true, Some(schedule)) = (self.config.misfire, &self.schedule) {
                let missed =
                    failover::missed_by(&cache, &self.paths, dead, total, schedule, now, &orphans);
                orphans.extend(missed);
            }
            orphans
        };
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        ops::failover::queue(registry, &self.shared.cache, &self.paths, dead, &orphans).await?;
        Ok(())
    }

    /// Queues the orphans of instances that left since this runner last looked, before it
    /// writes markers of its own: a marker created at the path of a dead instance's marker
    /// replaces the cache's memory of it (its tombstone), and the orphan would be lost. The
    /// departure's event may still wait in the mailbox behind the fire being handled (a runner
    /// held up in a reshard wait); handling it later finds the member gone already.
    ///
    /// `Departures::BeforeReshard(fire_ms)`: the leader is about to reshard for that fire;
    /// the missed fires of the dead are found through the assignment the reshard replaces, and
    /// only those before `fire_ms` count (that fire runs under the new assignment).
    pub(super) async fn notice_departures(&mut self, when: Departures) -> Result<()> {
        let present: BTreeSet<String> =
            self.shared.cache.read().children(&self.paths.instances()).into_iter().collect();
        let gone: Vec<String> = self.members.difference(&present).cloned().collect();
        for id in gone {
            self.members.remove(&id);
            if self.failover_enabled() {
                let until = match when {
                    Departures::BeforeMarking => self.shared.handles.clock.now_ms(),
                    Departures::BeforeReshard(fire_ms) => fire_ms - 1,
                };
                self.queue_orphans_until(&id, until).await?;
            }
            // About to reshard anyway; otherwise the membership changed under the assignment.
            if self.is_leader() && when == Departures::BeforeMarking {
                self.flag_reshard().await?;
            }
        }
        Ok(())
    }

    /// When idle: claims this instance's share of the failover queue and runs it at once.
    /// Returns whether a failover run started.
    pub(super) async fn take_failover(&mut self) -> Result<bool> {
        if !self.failover_enabled()
            || self.in_flight.is_some()
            || self.stopping
            || self.refusal().is_some()
        {
            return Ok(false);
        }
        let me = self.shared.instance.as_str().to_owned();
        let share = {
            let cache = self.shared.cache.read();
            let queue = failover::queued(&cache, &self.paths);
            failover::share_of(&queue, &sharding::eligible_instances(&cache, &self.paths), &me)
        };
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        for orphan in share {
            if ops::failover::claim(registry, &self.shared.cache, &self.paths, orphan.item, &me)
                .await?
                .is_some()
            {
                self.emit(SchedulerEvent::FailoverClaimed {
                    job: self.name().to_owned(),
                    item: orphan.item,
                    fire_ms: orphan.fire_ms,
                });
                self.failover_backlog.entry(orphan.fire_ms).or_default().push(orphan.item);
            }
        }
        self.run_failover_backlog().await
    }

    /// Runs the earliest fire of claimed failover items, once their old markers are gone.
    pub(super) async fn run_failover_backlog(&mut self) -> Result<bool> {
        let Some((fire_ms, items)) = self.failover_backlog.pop_first() else { return Ok(false) };
        let paths = self.paths.clone();
        let waiting = items.clone();
        let released = self
            .shared
            .cache
            .wait_until(self.shared.settings.sharding_timeout, |c| {
                !execution::any_running(c, &paths, &waiting)
            })
            .await;
        if !released {
            // The old owner still holds the markers: try again after the next change.
            self.failover_backlog.insert(fire_ms, items);
            return Ok(false);
        }
        self.notice_departures(Departures::BeforeMarking).await?;
        let mark = self.mark(fire_ms);
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        let start = ops::execution::start(
            registry,
            &self.shared.cache,
            &self.paths,
            &items,
            &mark,
            OwnerCheck::None,
        );
        match start.await? {
            Start::Marked => {
                self.launch(fire_ms, FireKind::Failover, items.clone(), items, true);
                Ok(true)
            }
            Start::AlreadyRunning(_) | Start::Reassigned(_) => {
                self.failover_backlog.insert(fire_ms, items);
                Ok(false)
            }
        }
    }
}
