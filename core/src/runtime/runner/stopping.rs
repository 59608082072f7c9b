//! Stopping the job on this instance, in the order that lets cancelled items fail over.

use super::*;

impl JobRunner {
    // ------------------------------------------------------------------ stopping

    /// Tells the items in flight to stop: this instance may have lost them.
    pub(super) fn cancel_running(&self) {
        if let Some(flight) = &self.in_flight {
            flight.cancel.cancel();
        }
    }

    /// Stops the job here: no new fires; the fire in flight may finish until the shutdown
    /// deadline, then it is cancelled; this instance's nodes leave the registry.
    ///
    /// The order of the last writes matters to failover. Items that completed lose their
    /// `running` markers before the instance node goes: nothing to take over. Items that did not
    /// complete keep their markers until after the instance node is gone, so the survivors see
    /// them as orphans and run them again (failover after a graceful stop, `docs/targets.md`).
    pub(super) async fn stop(&mut self, reason: &str) -> Result<()> {
        if self.stopping {
            return Ok(());
        }
        self.stopping = true;
        self.shared.command(Command::Forget { job: self.name().to_owned() });
        // A fire that fell due before the stop but was not handled yet is recorded, not lost
        // without a word: queued behind the stop, or armed but cancelled by `Forget`.
        while let Some(event) = self.mailbox.try_recv() {
            self.set_aside(event);
        }
        let now = self.shared.handles.clock.now_ms();
        if let Some(fire_ms) = self.armed_fire.take().filter(|&t| t <= now) {
            self.skip(fire_ms, SkipReason::ShuttingDown)?;
        }
        if self.in_flight.is_some() {
            let deadline = self.shared.settings.shutdown_timeout;
            if tokio::time::timeout(deadline, self.await_done()).await.is_err() {
                self.cancel_running();
                let _ = tokio::time::timeout(CANCEL_GRACE, self.await_done()).await;
            }
        }
        let flight = self.in_flight.take();
        let finished = self.finished_while_stopping.take();
        if let (Some(flight), Some(finished)) = (&flight, &finished) {
            self.report(flight, finished);
        }
        let complete = match (&flight, &finished) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(_), Some(f)) => {
                f.report.items.values().all(|o| !matches!(o, ItemOutcome::Cancelled))
            }
        };
        if flight.is_some() && finished.is_none() {
            tracing::warn!(
                job = self.name(),
                "items did not return within the cancel grace; their takers may overlap them"
            );
        }
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        let me = self.shared.instance.as_str().to_owned();
        // Markers written in a session that expired since are gone, and their paths may hold a
        // failover taker's markers by now: leave them alone.
        let flight = flight.filter(|f| self.same_session(f.session));
        if self.connected {
            election::abdicate(registry, &self.shared.cache, &self.paths, &me).await?;
            let node = self.paths.instance(&me);
            if let Some(flight) = flight.as_ref().filter(|f| f.marked && complete) {
                let completion = self.completion(flight.run, flight.fire_ms);
                self.remove_markers(flight, Some(&completion)).await?;
                // Let watchers read the recorded completion before the node that holds it goes
                // (a ZooKeeper watcher reads data after the event, and would miss it).
                tokio::time::sleep(STOP_PAUSE).await;
            }
            registry.delete_if_exists(&node).await?;
            self.shared.cache.update(|c| c.deleted(&node));
            if let Some(flight) = flight.as_ref().filter(|f| f.marked && !complete) {
                self.remove_markers(flight, None).await?;
            }
        }
        self.emit(SchedulerEvent::JobStopped {
            job: self.name().to_owned(),
            reason: reason.to_owned(),
        });
        Ok(())
    }

    /// Removes the markers of `flight` (recording `completion` in the same transaction).
    async fn remove_markers(
        &self,
        flight: &InFlight,
        completion: Option<&Completion>,
    ) -> Result<()> {
        let registry = self.shared.registry.as_ref();
        let (items, failed_over) = (&flight.items, &flight.failed_over);
        execution::finish(
            registry,
            &self.shared.cache,
            &self.paths,
            items,
            failed_over,
            completion,
        )
        .await?;
        Ok(())
    }

    /// Processes mailbox events until the fire in flight reports back (other events are
    /// dropped: the job is stopping).
    pub(super) async fn await_done(&mut self) {
        while self.finished_while_stopping.is_none() {
            match self.mailbox.recv().await {
                Some(JobEvent::Done(finished)) => self.finished_while_stopping = Some(*finished),
                Some(event) => self.set_aside(event),
                None => return,
            }
        }
    }

    /// What a stopping job does with an event other than its fire's end: answers stop requests,
    /// records fires as skipped, drops the rest.
    fn set_aside(&mut self, event: JobEvent) {
        match event {
            JobEvent::Done(finished) => self.finished_while_stopping = Some(*finished),
            JobEvent::Stop { reply: Some(reply), .. } => {
                let _ = reply.send(());
            }
            JobEvent::Fire { fire_ms } => {
                self.disarmed(fire_ms);
                let _ = self.skip(fire_ms, SkipReason::ShuttingDown);
            }
            _ => {}
        }
    }
}
