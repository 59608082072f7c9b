//! Distribute-once listeners: each instance records the items of a fire that reached a stage
//! (started, completed); the one that sees every item recorded removes the records in one
//! transaction, and only the instance whose transaction succeeds runs the callbacks.
//! (ElasticJob checks and clears in separate steps, so two instances could both run them.)

use std::collections::VecDeque;

use super::{Action, JobProtocol, Next, Pending, Reply, Request};
use crate::layout::GuaranteeStage;
use crate::registry::{RegistryError, TxnOp};

/// The items of a fire that reached a stage here, to record.
#[derive(Debug, Clone)]
pub(super) struct OnceRecord {
    stage: GuaranteeStage,
    fire_ms: i64,
    /// Items still to record.
    items: VecDeque<u32>,
}

/// The record request outstanding.
#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    Record,
    /// Read which items are recorded (from the registry: the others' records may not have
    /// reached the view yet, and the last recorder must not miss that it is the last).
    List,
    Clear,
}

impl JobProtocol {
    /// Records that `items` of the fire at `fire_ms` reached `stage`, when listeners want it.
    pub(super) fn record_once(&mut self, stage: GuaranteeStage, fire_ms: i64, items: &[u32]) {
        if self.settings.once_listeners && !items.is_empty() {
            self.once.push_back(OnceRecord {
                stage,
                fire_ms,
                items: items.iter().copied().collect(),
            });
        }
    }

    pub(super) fn once_next(&mut self) -> Option<Next> {
        let record = self.once.front()?;
        Some(match record.items.front() {
            Some(&n) => {
                let path = self.paths.guarantee(record.stage, n);
                Next::Request(Pending::Once(Step::Record), Request::Ensure(path))
            }
            None => {
                let dir = self.paths.guarantee_stage(record.stage);
                Next::Request(Pending::Once(Step::List), Request::Children(dir))
            }
        })
    }

    pub(super) fn on_once_reply(&mut self, step: Step, result: Result<Reply, RegistryError>) {
        let Some(record) = self.once.front_mut() else { return };
        match (step, result) {
            (Step::Record, Ok(_)) => {
                record.items.pop_front();
            }
            (Step::List, Ok(Reply::Children(recorded))) => {
                let total = self.config.checked_total_count().unwrap_or(0);
                let complete = (0..total).all(|n| recorded.iter().any(|r| r == &n.to_string()));
                if !complete {
                    self.once.pop_front();
                    return;
                }
                let (stage, fire_ms) = (record.stage, record.fire_ms);
                let ops = (0..total)
                    .map(|n| TxnOp::delete(self.paths.guarantee(stage, n), None))
                    .collect();
                self.then = Some(Box::new((Pending::Once(Step::Clear), Request::Txn(ops))));
                let _ = fire_ms;
            }
            (Step::Clear, Ok(_)) => {
                let (stage, fire_ms) = (record.stage, record.fire_ms);
                self.once.pop_front();
                self.actions.push(Action::RunOnceListeners { stage, fire_ms });
            }
            // Another instance saw the full set at the same time and cleared it first.
            (Step::Clear, Err(e))
                if e.transaction_failure().is_some_and(|(_, e)| e.is_no_node()) =>
            {
                self.once.pop_front();
            }
            (_, Ok(_)) => {
                self.once.pop_front();
            }
            (_, Err(e)) => {
                self.once.pop_front();
                self.failed(&e);
            }
        }
    }
}
