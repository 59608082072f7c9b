//! Reacting to the registry: election, membership, servers, triggers, config changes and the
//! session's state.

use std::sync::atomic::Ordering;

use super::*;

impl JobRunner {
    // ------------------------------------------------------------------ registry changes

    pub(super) fn is_leader(&self) -> bool {
        election::leader(&self.shared.cache.read(), &self.paths).as_deref()
            == Some(self.shared.instance.as_str())
    }

    pub(super) async fn bid_for_leadership(&mut self) -> Result<()> {
        if !self.connected || self.stopping || self.refusal() == Some(SkipReason::ServerDisabled) {
            return Ok(());
        }
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        let lead = election::try_lead(
            registry,
            &self.shared.cache,
            &self.paths,
            self.shared.instance.as_str(),
        )
        .await?;
        if lead && !self.was_leader {
            self.emit(SchedulerEvent::LeaderElected { job: self.name().to_owned() });
        }
        self.was_leader = lead;
        Ok(())
    }

    pub(super) async fn on_change(&mut self, node: JobNode) -> Result<()> {
        if self.stopping {
            return Ok(());
        }
        let shared = self.shared.clone();
        let registry = shared.registry.as_ref();
        let me = self.shared.instance.as_str();
        match node {
            JobNode::Config => self.on_config_change().await?,
            JobNode::LeaderInstance => {
                let leader = election::leader(&self.shared.cache.read(), &self.paths);
                self.was_leader = leader.as_deref() == Some(me);
                if leader.is_none() {
                    self.bid_for_leadership().await?;
                }
            }
            JobNode::Instance(id) if id == me => {
                // Our node vanished while our session lives: an operator shut this instance
                // down. The cache may be a step behind our own re-registration, so ask the
                // registry before acting on it. A session that expired since we registered
                // took the node with it, even if this runner (held up in a fire) has not
                // handled that expiry yet: the queued session events register us again.
                let gone = !self.shared.cache.read().exists(&self.paths.instance(me));
                let same_session =
                    self.shared.sessions_expired.load(Ordering::SeqCst) == self.registered_in;
                if gone && self.connected && self.registered && same_session {
                    let node = self.paths.instance(me);
                    if !self.shared.registry.exists(&node).await? {
                        // The survivors take our running items over at once: cancel them now.
                        self.cancel_running();
                        self.stop("instance node removed by an operator").await?;
                        self.shared.command(Command::Forget { job: self.name().to_owned() });
                    }
                }
            }
            JobNode::Instance(id) => {
                let gone = !self.shared.cache.read().exists(&self.paths.instance(&id));
                let changed =
                    if gone { self.members.remove(&id) } else { self.members.insert(id.clone()) };
                if !changed {
                    return Ok(());
                }
                if gone && self.failover_enabled() {
                    self.queue_orphans_of(&id).await?;
                }
                // Membership changed: the leader flags a reshard before the next fire.
                if self.is_leader() {
                    self.flag_reshard().await?;
                }
                // A departure changes the shares of the failover queue.
                self.take_failover().await?;
            }
            JobNode::FailoverItem(_) => {
                self.take_failover().await?;
            }
            JobNode::Server(ip) => {
                let disabled = self.shared.cache.read().text(&self.paths.server(&ip)).as_deref()
                    == Some(DISABLED);
                if ip == self.shared.instance.ip() && disabled && self.is_leader() {
                    // A leader on a disabled server abdicates; the survivors elect again.
                    self.flag_reshard().await?;
                    election::abdicate(registry, &self.shared.cache, &self.paths, me).await?;
                    self.was_leader = false;
                } else if self.is_leader() {
                    self.flag_reshard().await?;
                }
            }
            JobNode::Trigger(id) if id == me => {
                let path = self.paths.trigger(me);
                if self.shared.cache.read().exists(&path) {
                    registry.delete_if_exists(&path).await?;
                    self.shared.cache.update(|c| c.deleted(&path));
                    let now = self.shared.handles.clock.now_ms();
                    self.fire(now, FireKind::Manual, None).await?;
                }
            }
            _ => {}
        }
        Ok(())
    }

    pub(super) async fn on_config_change(&mut self) -> Result<()> {
        let node = self.shared.cache.read().get(&self.paths.config()).cloned();
        let Some(node) = node else { return Ok(()) };
        if self.config_version.replace(node.version) == Some(node.version) {
            return Ok(());
        }
        let data = node.data;
        let parsed = store::parse_stored(self.name(), &data, &self.shared.known).and_then(|c| {
            let schedule = schedule_of(&c).map_err(|e| e.to_string())?;
            let executor = executor_for(&self.shared, &c).map_err(|e| e.to_string())?;
            Ok((c, schedule, executor))
        });
        let (config, schedule, executor) = match parsed {
            Ok(ok) => ok,
            Err(reason) => {
                self.emit(SchedulerEvent::ConfigRejected { job: self.name().to_owned(), reason });
                return Ok(());
            }
        };
        if config == self.config {
            return Ok(());
        }
        let reschedule =
            config.cron != self.config.cron || config.time_zone != self.config.time_zone;
        let reshard = config.sharding_total_count != self.config.sharding_total_count
            || config.job_sharding_strategy_type != self.config.job_sharding_strategy_type;
        let failover_off = self.config.failover && !config.failover;
        self.config = config;
        self.schedule = schedule;
        self.executor = Arc::new(executor);
        self.emit(SchedulerEvent::ConfigApplied { job: self.name().to_owned() });
        if reschedule {
            self.arm_after(self.shared.handles.clock.now_ms());
        }
        if reshard {
            self.flag_reshard().await?;
        }
        // Failover turned off: orphans waiting for a taker will not get one; the leader clears
        // the queue so that no stale entry is taken if it is turned on again.
        if failover_off && self.is_leader() {
            failover::clear_queue(self.shared.registry.as_ref(), &self.shared.cache, &self.paths)
                .await?;
            self.failover_backlog.clear();
        }
        Ok(())
    }

    pub(super) async fn on_session(&mut self, event: SessionEvent) -> Result<()> {
        match event {
            SessionEvent::Suspended
            | SessionEvent::Lost
            | SessionEvent::Expired
            | SessionEvent::Closed => {
                self.connected = false;
                self.was_leader = false;
                if matches!(event, SessionEvent::Lost | SessionEvent::Expired) {
                    // Our markers and ownership are gone with the session (or, when it is
                    // lost, may go at any moment, before the server tells anyone): running
                    // items may be taken over elsewhere, so tell them to stop, and remember
                    // them: our new session queues them for failover (the survivors may never
                    // see our instance node go, if we re-register before they look).
                    if let Some(flight) = &self.in_flight {
                        flight.cancel.cancel();
                        if flight.marked {
                            self.interrupted =
                                flight.items.iter().map(|&n| (n, flight.fire_ms)).collect();
                        }
                    }
                }
            }
            SessionEvent::Reconnected => {
                self.connected = true;
                if !self.stopping {
                    self.settle().await?;
                }
            }
            SessionEvent::Connected { .. } => {
                let was_connected = std::mem::replace(&mut self.connected, true);
                if !was_connected && !self.stopping {
                    // A new session after an expiry: register again (ElasticJob shut the job
                    // down for good here, #1857). The old session's markers are gone with it.
                    self.registered = false;
                    self.settle().await?;
                }
            }
        }
        Ok(())
    }
}
