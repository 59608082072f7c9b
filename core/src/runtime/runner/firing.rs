//! Firing: the checks before a fire, resharding at fire time, launching the items, and what
//! happens when they end (markers, misfire catch-up, distribute-once listeners).

use std::sync::atomic::Ordering;

use super::failover_work::Departures;
use super::*;

impl JobRunner {
    // ------------------------------------------------------------------ firing

    pub(super) async fn fire(
        &mut self,
        fire_ms: i64,
        kind: FireKind,
        only: Option<Vec<u32>>,
    ) -> Result<()> {
        if self.stopping {
            return self.skip(fire_ms, SkipReason::ShuttingDown);
        }
        if let Some(reason) = self.refusal() {
            return self.skip(fire_ms, reason);
        }
        if let Err(e) = self.settle().await {
            return self.skip(fire_ms, SkipReason::RegistryError(e.to_string()));
        }
        if self.in_flight.is_some() {
            if kind == FireKind::Manual {
                self.manual_pending = true;
                return Ok(());
            }
            // As ElasticJob: every item this instance owns owes the skipped fire one catch-up.
            return self.misfire(fire_ms).await;
        }
        if let Some(diff_ms) = self.clock_skew().await? {
            return self.skip(fire_ms, SkipReason::ClockSkew { diff_ms });
        }
        for _ in 0..REASSIGNED_ATTEMPTS {
            let seen = self.shared.cache.read().revision();
            if !self.ensure_sharded(fire_ms).await? {
                return self.skip(fire_ms, SkipReason::ShardingTimeout);
            }
            // A scheduled fire handled only once the next one fell due (it waited for a
            // reshard, or queued behind a fire that did) is superseded by it: run now, it would
            // run partly under an assignment made after its time, where other instances already
            // ran it under the old one.
            let now = self.shared.handles.clock.now_ms();
            if kind == FireKind::Scheduled
                && self
                    .schedule
                    .as_ref()
                    .and_then(|s| s.next_after(fire_ms))
                    .is_some_and(|next| next <= now)
            {
                return self.skip(fire_ms, SkipReason::Late);
            }
            let mut items = self.my_items()?;
            if let Some(only) = &only {
                items.retain(|n| only.contains(n));
            }
            if items.is_empty() {
                return self.skip(fire_ms, SkipReason::NoItems);
            }
            let marked = self.config.monitor_execution;
            if marked {
                self.notice_departures(Departures::BeforeMarking).await?;
                let shared = self.shared.clone();
                let registry = shared.registry.as_ref();
                let mark = self.mark(fire_ms);
                let cache = &self.shared.cache;
                match ops::execution::start(
                    registry,
                    cache,
                    &self.paths,
                    &items,
                    &mark,
                    OwnerCheck::Cached,
                )
                .await?
                {
                    Start::Marked => {}
                    // A failover taker still runs one of our items: it is a misfire here too.
                    Start::AlreadyRunning(_) => return self.misfire(fire_ms).await,
                    // The leader resharded and our cache has not shown it yet: wait for the
                    // watch, then decide again under the new assignment.
                    Start::Reassigned(_) => {
                        self.wait_or_halt(RACE_PAUSE, |c| c.revision() > seen).await;
                        continue;
                    }
                }
            }
            self.launch(fire_ms, kind, items.clone(), Vec::new(), marked);
            return self.distribute_once(GuaranteeStage::Started, fire_ms, &items).await;
        }
        self.skip(fire_ms, SkipReason::ShardingTimeout)
    }

    /// Records a stage of a fire for the distribute-once listeners, and runs them (on their own
    /// task, so that a slow listener delays nothing) if this instance completed the set.
    pub(super) async fn distribute_once(
        &self,
        stage: GuaranteeStage,
        fire_ms: i64,
        items: &[u32],
    ) -> Result<()> {
        if self.shared.once_listeners.is_empty() || items.is_empty() {
            return Ok(());
        }
        let total = self.config.checked_total_count()?;
        if !ops::guarantee::record(self.shared.registry.as_ref(), &self.paths, stage, items, total)
            .await?
        {
            return Ok(());
        }
        let listeners = self.shared.once_listeners.clone();
        let job = self.name().to_owned();
        self.shared.handles.spawner.spawn(Box::pin(async move {
            for listener in listeners {
                match stage {
                    GuaranteeStage::Started => listener.all_started(&job, fire_ms).await,
                    GuaranteeStage::Completed => listener.all_completed(&job, fire_ms).await,
                }
            }
        }));
        Ok(())
    }

    /// The enabled items this instance owns, ascending.
    pub(super) fn my_items(&self) -> Result<Vec<u32>> {
        let total = self.config.checked_total_count()?;
        let cache = self.shared.cache.read();
        Ok(sharding::items_of(&cache, &self.paths, self.shared.instance.as_str(), total)
            .into_iter()
            .filter(|&n| !execution::item_disabled(&cache, &self.paths, n))
            .collect())
    }

    /// `items` without those the run in flight is running for `fire_ms` itself (a catch-up
    /// that another instance's marks started before the fire reached us): they owe it nothing.
    fn not_running_this_fire(&self, mut items: Vec<u32>, fire_ms: i64) -> Vec<u32> {
        if let Some(flight) = self.in_flight.as_ref().filter(|f| f.fire_ms == fire_ms) {
            items.retain(|n| !flight.items.contains(n));
        }
        items
    }

    /// The enabled items of the job that have their node already, ascending.
    fn existing_enabled_items(&self) -> Result<Vec<u32>> {
        let total = self.config.checked_total_count()?;
        let cache = self.shared.cache.read();
        Ok((0..total)
            .filter(|&n| cache.exists(&self.paths.item(n)))
            .filter(|&n| !execution::item_disabled(&cache, &self.paths, n))
            .collect())
    }

    /// Skips the fire at `fire_ms` because this instance still runs; with `misfire` on, its items
    /// owe one catch-up run for it.
    pub(super) async fn misfire(&mut self, fire_ms: i64) -> Result<()> {
        if self.config.misfire {
            // With a reshard pending for this fire, the others run it under an assignment not
            // made yet (it waits for our items to end): every item owes the catch-up, and
            // whoever runs the fire for an item settles its marker (see `execution::start`).
            // That holds only while the flag does; once the reshard committed, the new
            // assignment says which items are ours.
            let flag = {
                let cache = self.shared.cache.read();
                [self.paths.sharding_necessary(), self.paths.sharding_processing()]
                    .into_iter()
                    .find(|p| cache.exists(p))
                    .filter(|_| sharding::pending_for(&cache, &self.paths, fire_ms))
            };
            if let Some(flag) = flag {
                let items = self.not_running_this_fire(self.existing_enabled_items()?, fire_ms);
                let shared = self.shared.clone();
                let registry = shared.registry.as_ref();
                let marked = ops::execution::mark_misfire_while_flagged(
                    registry,
                    &shared.cache,
                    &self.paths,
                    &items,
                    fire_ms,
                    &flag,
                )
                .await?;
                if marked {
                    return self.skip(fire_ms, SkipReason::Misfire);
                }
                let paths = self.paths.clone();
                self.wait_or_halt(RACE_PAUSE, |c| !sharding::pending_for(c, &paths, fire_ms)).await;
            }
            let items = self.not_running_this_fire(self.my_items()?, fire_ms);
            let shared = self.shared.clone();
            ops::execution::mark_misfire(
                shared.registry.as_ref(),
                &shared.cache,
                &self.paths,
                &items,
                fire_ms,
            )
            .await?;
        }
        self.skip(fire_ms, SkipReason::Misfire)
    }

    /// The latest scheduled fire at or before `now_ms`, if the job has a schedule.
    pub(super) fn latest_fire_by(&self, now_ms: i64) -> Option<i64> {
        let schedule = self.schedule.as_ref()?;
        schedule.iter_after(now_ms - LATEST_FIRE_WINDOW_MS).take_while(|&t| t <= now_ms).last()
    }

    /// Whether any item of the job owes a catch-up run.
    pub(super) fn misfire_owed(&self) -> bool {
        let total = self.config.checked_total_count().unwrap_or(0);
        let all: Vec<u32> = (0..total).collect();
        !execution::misfired(&self.shared.cache.read(), &self.paths, &all).is_empty()
    }

    /// A `running` mark for a new run of the fire at `fire_ms`.
    pub(super) fn mark(&mut self, fire_ms: i64) -> RunningMark {
        self.runs += 1;
        RunningMark { fire_ms, run: self.runs, instance: self.shared.instance.as_str().to_owned() }
    }

    /// The instance-node update that records run `run` of the fire at `fire_ms` as completed.
    pub(super) fn completion(&mut self, run: u64, fire_ms: i64) -> Completion {
        if run >= self.completed.run {
            self.completed = Completed { run, fire_ms: fire_ms.max(self.completed.fire_ms) };
        }
        Completion {
            instance_path: self.paths.instance(self.shared.instance.as_str()),
            instance_data: self.shared.instance.node_data(self.completed).into_bytes(),
        }
    }

    /// Why no new work may start right now, if that is so.
    pub(super) fn refusal(&self) -> Option<SkipReason> {
        if !self.connected {
            return Some(SkipReason::Disconnected);
        }
        if self.config.disabled {
            return Some(SkipReason::JobDisabled);
        }
        let cache = self.shared.cache.read();
        if cache.text(&self.paths.server(self.shared.instance.ip())).as_deref() == Some(DISABLED) {
            return Some(SkipReason::ServerDisabled);
        }
        None
    }

    pub(super) fn skip(&self, fire_ms: i64, reason: SkipReason) -> Result<()> {
        self.emit(SchedulerEvent::Skipped { job: self.name().to_owned(), fire_ms, reason });
        Ok(())
    }

    /// `maxTimeDiffSeconds`: the difference between the local and the registry clock, when it
    /// exceeds the allowed one.
    pub(super) async fn clock_skew(&self) -> Result<Option<i64>> {
        let Some(max) = self.config.max_time_diff() else { return Ok(None) };
        let registry_ms = self.shared.registry.registry_time().await?;
        let diff_ms = self.shared.handles.clock.now_ms() - registry_ms;
        let max_ms = i64::try_from(max.as_millis()).unwrap_or(i64::MAX);
        Ok((diff_ms.abs() > max_ms).then_some(diff_ms))
    }

    /// Makes sure the assignment is current before the fire at `fire_ms`: the leader reshards
    /// when flagged (at or before that fire), the others wait for its commit on the watch.
    /// `false` when that took too long, or the job is stopping.
    pub(super) async fn ensure_sharded(&mut self, fire_ms: i64) -> Result<bool> {
        let timeout = self.shared.settings.sharding_timeout;
        for attempt in 0..RESHARD_ATTEMPTS {
            if !sharding::pending_for(&self.shared.cache.read(), &self.paths, fire_ms) {
                return Ok(true);
            }
            if !self.is_leader() {
                let paths = self.paths.clone();
                let leaderless =
                    |c: &crate::protocol::view::View| election::leader(c, &paths).is_none();
                let settled = self
                    .wait_or_halt(timeout, |c| {
                        !sharding::pending_for(c, &paths, fire_ms) || leaderless(c)
                    })
                    .await;
                if !settled {
                    return Ok(false);
                }
                if leaderless(&self.shared.cache.read()) {
                    self.bid_for_leadership().await?;
                }
                continue;
            }
            let paths = self.paths.clone();
            if !self.wait_or_halt(timeout, |c| !sharding::any_running(c, &paths)).await {
                return Ok(false);
            }
            self.notice_departures(Departures::BeforeReshard(fire_ms)).await?;
            let total = self.config.checked_total_count()?;
            // After two lost races, stop trusting the cache: read the starting state from the
            // registry (a watch that merges events can leave the cache a step behind).
            let fresh = attempt >= 2;
            let outcome = ops::sharding::reshard(
                self.shared.registry.as_ref(),
                &self.shared.cache,
                &self.paths,
                self.shared.instance.as_str(),
                self.name(),
                self.config.job_sharding_strategy_type.as_deref(),
                &self.shared.settings.strategies,
                total,
                fresh,
            )
            .await?;
            match outcome {
                Reshard::Committed(assignment) => {
                    let assignment = assignment
                        .iter()
                        .map(|(i, items)| (i.to_owned(), items.to_vec()))
                        .collect();
                    self.emit(SchedulerEvent::Sharded { job: self.name().to_owned(), assignment });
                    return Ok(true);
                }
                Reshard::NotNeeded => return Ok(true),
                // Deposed meanwhile: go round again as a follower.
                Reshard::NotLeader => self.was_leader = false,
                // Let the watch catch up with whatever moved, then compute again.
                Reshard::Raced => {
                    let seen = self.shared.cache.read().revision();
                    self.wait_or_halt(RACE_PAUSE, |c| c.revision() > seen).await;
                }
            }
        }
        Ok(false)
    }

    /// Waits for a condition on the cache, at most `timeout`; gives up (returning `false`) at
    /// once when the job is told to stop, so that a stop never waits out a reshard timeout.
    pub(super) async fn wait_or_halt(
        &self,
        timeout: Duration,
        condition: impl Fn(&crate::protocol::view::View) -> bool,
    ) -> bool {
        tokio::select! {
            biased;
            () = self.halt.cancelled() => false,
            settled = self.shared.cache.wait_until(timeout, condition) => settled,
        }
    }

    pub(super) fn launch(
        &mut self,
        fire_ms: i64,
        kind: FireKind,
        items: Vec<u32>,
        failed_over: Vec<u32>,
        marked: bool,
    ) {
        let cancel = CancellationToken::new();
        let item_parameters = self.config.item_parameters().unwrap_or_default();
        let total = self.config.checked_total_count().unwrap_or(1);
        let source = match kind {
            FireKind::Scheduled => ExecutionSource::Normal,
            FireKind::Misfire => ExecutionSource::Misfire,
            FireKind::Manual => ExecutionSource::Manual,
            FireKind::Failover => ExecutionSource::Failover,
        };
        let info = FireInfo {
            job_name: self.name().to_owned(),
            instance: self.shared.instance.as_str().to_owned(),
            fire_time_ms: fire_ms,
            source,
            items: items.clone(),
        };
        let job_parameter = self.config.job_parameter.clone().unwrap_or_default();
        let contexts: Vec<ShardingContext> = items
            .iter()
            .map(|&item| {
                let token = self.fencing_token(item);
                self.emit(SchedulerEvent::ItemStarted {
                    job: self.name().to_owned(),
                    item,
                    fire_ms,
                    kind,
                    token,
                });
                let parameter = item_parameters.get(&item).cloned().unwrap_or_default();
                ShardingContext::new(&info, total, job_parameter.clone(), item, parameter)
                    .with_fencing(token, cancel.child_token())
            })
            .collect();
        let request = FireRequest {
            info,
            contexts,
            max_parallel_items: self.shared.settings.max_parallel_items,
        };
        let executor = self.executor.clone();
        let job = self.job.clone();
        let me = self.me.clone();
        let run = self.runs;
        let session = self.shared.sessions_expired.load(Ordering::SeqCst);
        self.in_flight =
            Some(InFlight { fire_ms, run, items, failed_over, marked, session, cancel });
        self.shared.handles.spawner.spawn(Box::pin(async move {
            let report = executor.run(&job, request).await;
            let _ = me.send(JobEvent::Done(Box::new(Finished { report })));
        }));
    }

    pub(super) async fn on_done(&mut self, finished: Finished) -> Result<()> {
        if self.stopping {
            // `stop` removes the markers itself, in the order that lets cancelled items fail over.
            self.finished_while_stopping = Some(finished);
            return Ok(());
        }
        let Some(flight) = self.in_flight.take() else { return Ok(()) };
        self.report(&flight, &finished);
        let completed = finished.report.completed_items();
        self.distribute_once(GuaranteeStage::Completed, flight.fire_ms, &completed).await?;
        if flight.marked {
            let completion = self.completion(flight.run, flight.fire_ms);
            self.unfinished = Some(Unfinished {
                items: flight.items.clone(),
                failed_over: flight.failed_over.clone(),
                completion: Some(completion),
                session: flight.session,
            });
            self.settle().await?;
        }
        // Busy survivors take their share of the failover queue after their own run, before a
        // catch-up: an orphan is the older debt, and a job that always overruns owes a catch-up
        // after every run, which would starve the orphan for good (the misfire markers wait).
        if self.take_failover().await? {
            return Ok(());
        }
        // One catch-up run for the items whose fires were skipped while they ran.
        // Only once the assignment is current (a skipped fire may have flagged a reshard): the
        // markers follow the items to their new owners.
        let now = self.shared.handles.clock.now_ms();
        if self.config.misfire && self.misfire_owed() && self.ensure_sharded(now).await? {
            let owed =
                execution::misfired(&self.shared.cache.read(), &self.paths, &self.my_items()?);
            for (_, garbage) in owed.iter().filter_map(|(n, o)| Some((n, o.as_ref().err()?))) {
                self.report_garbage(garbage);
            }
            // The catch-up answers the latest fire a marker names; markers that name none (empty,
            // as ElasticJob writes them, or unreadable) owe the latest fire due by now.
            let named = owed.iter().filter_map(|(_, o)| o.as_ref().ok().copied().flatten()).max();
            let fire_ms = named
                .or_else(|| (!owed.is_empty()).then(|| self.latest_fire_by(now).unwrap_or(now)));
            if let Some(fire_ms) = fire_ms {
                let items: Vec<u32> = owed.iter().map(|&(n, _)| n).collect();
                let shared = self.shared.clone();
                ops::execution::clear_misfire(
                    shared.registry.as_ref(),
                    &shared.cache,
                    &self.paths,
                    &items,
                )
                .await?;
                return self.fire(fire_ms, FireKind::Misfire, Some(items)).await;
            }
        }
        if std::mem::take(&mut self.manual_pending) {
            let now = self.shared.handles.clock.now_ms();
            return self.fire(now, FireKind::Manual, None).await;
        }
        Ok(())
    }

    /// Reports the end of every item of a fire, and a failure the error handler raised.
    pub(super) fn report(&self, flight: &InFlight, finished: &Finished) {
        for (&item, outcome) in &finished.report.items {
            let ok = matches!(outcome, ItemOutcome::Completed);
            self.emit(SchedulerEvent::ItemFinished {
                job: self.name().to_owned(),
                item,
                fire_ms: flight.fire_ms,
                ok,
            });
        }
        if let (Some(failure), Some(&item)) =
            (&finished.report.raised, finished.report.raised_items.first())
        {
            let (job, fire_ms, error) =
                (self.name().to_owned(), flight.fire_ms, failure.to_string());
            self.emit(SchedulerEvent::FireFailed { job, fire_ms, item, error });
        }
    }

    /// The fencing token of `item`: the version of its owner node, which every change of owner
    /// (a reshard commit, a failover claim) advances.
    pub(super) fn fencing_token(&self, item: u32) -> u64 {
        let owner = self.paths.item_node(item, ItemNode::Instance);
        self.shared.cache.read().get(&owner).map_or(0, |n| n.version)
    }
}
