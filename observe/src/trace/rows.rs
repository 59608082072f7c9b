//! The writer's side of the listener: queue entries become table rows, with ElasticJob's
//! values, cut to the columns' sizes (PostgreSQL refuses longer values).

use std::hash::{DefaultHasher, Hash, Hasher};

use shardcron_core::__private::time::from_epoch_ms;
use shardcron_core::job::{ExecutionSource, TaskId};

use super::listener::{Fire, ItemResult, Items, Names, TraceEvent};
use super::record::{
    execution_source, ip_of, timestamp, truncate, ExecutionRecord, StatusRecord, TraceRecord,
    MAX_FAILURE_CAUSE_CHARS,
};

/// What every row of this process has in common.
#[derive(Clone, Debug)]
pub(crate) struct RowMaker {
    pub hostname: String,
}

impl RowMaker {
    /// The rows of `events`, in order.
    pub fn rows(&self, events: &[TraceEvent]) -> Vec<TraceRecord> {
        let mut rows = Vec::with_capacity(events.len() + events.len() / 2);
        for event in events {
            match event {
                TraceEvent::FireBegan { fire, at_ms } => began(&mut rows, fire, *at_ms),
                TraceEvent::FireEnded { fire, at_ms, failures, cancelled } => {
                    let (state, message) = fire_end(failures, cancelled);
                    rows.push(FireText::of(fire).status(fire, state, message, *at_ms));
                }
                TraceEvent::FireSkipped { job, instance, fire_ms, reason, at_ms } => {
                    let names = Names { job: job.clone(), instance: instance.to_string() };
                    let fire = Fire {
                        names: names.into(),
                        fire_ms: *fire_ms,
                        source: ExecutionSource::Normal,
                        items: Items::of(&[]),
                    };
                    let text = FireText::of(&fire);
                    rows.push(text.status(&fire, "TASK_FINISHED", reason.clone(), *at_ms));
                }
                TraceEvent::ItemStarted { fire, item, at_ms, began_ms } => {
                    if let Some(began_ms) = began_ms {
                        began(&mut rows, fire, *began_ms);
                    }
                    rows.push(TraceRecord::ExecutionStarted(self.execution(fire, *item, *at_ms)));
                }
                TraceEvent::ItemFinished {
                    fire,
                    item,
                    started_ms,
                    finished_ms,
                    result,
                    ends_fire,
                } => {
                    let mut row = self.execution(fire, *item, started_ms.unwrap_or(*finished_ms));
                    row.complete_time = Some(timestamp(*finished_ms));
                    match result {
                        ItemResult::Succeeded => row.is_success = true,
                        ItemResult::Failed(why) => {
                            row.failure_cause = Some(truncate(why, MAX_FAILURE_CAUSE_CHARS));
                        }
                        ItemResult::Cancelled => {
                            row.failure_cause = Some(
                                "cancelled: the item was asked to stop (session lost, shutdown \
                                 or stop)"
                                    .into(),
                            );
                        }
                        ItemResult::NeverStarted => {
                            row.failure_cause = Some("cancelled before it started".into());
                        }
                    }
                    rows.push(TraceRecord::ExecutionFinished(row));
                    if *ends_fire {
                        // The fire's report would have said what its only item's result says.
                        let (failures, cancelled) = match result {
                            ItemResult::Succeeded => (vec![], vec![]),
                            ItemResult::Failed(why) => (vec![(*item, why.clone())], vec![]),
                            ItemResult::Cancelled | ItemResult::NeverStarted => {
                                (vec![], vec![*item])
                            }
                        };
                        let (state, message) = fire_end(&failures, &cancelled);
                        rows.push(FireText::of(fire).status(fire, state, message, *finished_ms));
                    }
                }
            }
        }
        rows
    }

    /// The row of `item` of `fire`; its id is the same at its start and its end.
    fn execution(&self, fire: &Fire, item: u32, start_ms: i64) -> ExecutionRecord {
        let task_id = task_id(fire);
        ExecutionRecord {
            id: row_id(&task_id, item, fire.fire_ms),
            job_name: truncate(&fire.names.job, 100),
            task_id: truncate(&task_id, 255),
            hostname: truncate(&self.hostname, 255),
            ip: truncate(ip_of(&fire.names.instance), 50),
            sharding_item: i32::try_from(item).unwrap_or(i32::MAX),
            execution_source: execution_source(fire.source),
            failure_cause: None,
            is_success: false,
            start_time: timestamp(start_ms),
            complete_time: None,
        }
    }
}

/// The status rows of `fire`'s begin at `at_ms`.
fn began(rows: &mut Vec<TraceRecord>, fire: &Fire, at_ms: i64) {
    let text = FireText::of(fire);
    let begin = format!("Job '{}' execute begin.", fire.names.job);
    rows.push(text.status(fire, "TASK_STAGING", begin, at_ms));
    rows.push(text.status(fire, "TASK_RUNNING", String::new(), at_ms));
}

/// The state and the message of a fire's end from its failed and its cancelled items.
fn fire_end(failures: &[(u32, String)], cancelled: &[u32]) -> (&'static str, String) {
    if !failures.is_empty() {
        let lines: Vec<String> =
            failures.iter().map(|(item, why)| format!("item {item}: {why}")).collect();
        ("TASK_ERROR", lines.join("\n"))
    } else if !cancelled.is_empty() {
        ("TASK_KILLED", format!("items cancelled: {cancelled:?}"))
    } else {
        ("TASK_FINISHED", String::new())
    }
}

/// What every status row of one fire says of it, made once per fire.
struct FireText {
    task_id: String,
    job_name: String,
    slave_id: String,
    items: String,
}

/// `fire`'s task id, as the executor gave it to the fire's items (`ShardingContext::task_id`).
fn task_id(fire: &Fire) -> String {
    let mut items = fire.items.as_slice().to_vec();
    items.sort_unstable();
    items.dedup();
    TaskId {
        job_name: fire.names.job.clone(),
        items,
        source: fire.source,
        instance: fire.names.instance.clone(),
        fire_time: from_epoch_ms(fire.fire_ms),
    }
    .to_string()
}

impl FireText {
    fn of(fire: &Fire) -> Self {
        let items: Vec<String> = fire.items.as_slice().iter().map(u32::to_string).collect();
        let task_id = task_id(fire);
        FireText {
            job_name: truncate(&fire.names.job, 100),
            slave_id: truncate(ip_of(&fire.names.instance), 50),
            items: truncate(&items.join(","), 100),
            task_id,
        }
    }

    fn status(&self, fire: &Fire, state: &'static str, message: String, at_ms: i64) -> TraceRecord {
        let task_id = &self.task_id;
        TraceRecord::Status(StatusRecord {
            // One state of one fire: the same id when a write is retried after its commit went
            // through unseen, so the retry inserts nothing twice.
            id: row_id(&format!("{task_id}#{state}"), 0, fire.fire_ms),
            job_name: self.job_name.clone(),
            original_task_id: String::new(),
            task_id: truncate(task_id, 255),
            slave_id: self.slave_id.clone(),
            source: "LITE_EXECUTOR",
            execution_type: fire.source.task_type(),
            sharding_item: self.items.clone(),
            state,
            message: truncate(&message, MAX_FAILURE_CAUSE_CHARS),
            creation_time: timestamp(at_ms),
        })
    }
}

/// A UUID (version 8) that is the same for the same `key` and `item`: the fire time in its first
/// 48 bits (rows of one fire sit together in the primary key, which grows at its end), then a
/// hash of the key and the item.
fn row_id(key: &str, item: u32, fire_ms: i64) -> String {
    let hash = |salt: u8| {
        let mut hasher = DefaultHasher::new();
        (salt, key, item).hash(&mut hasher);
        hasher.finish().to_be_bytes()
    };
    let (a, b) = (hash(1), hash(2));
    let mut bytes = [0u8; 16];
    bytes[..6].copy_from_slice(&fire_ms.to_be_bytes()[2..]);
    bytes[6..14].copy_from_slice(&a);
    bytes[14..].copy_from_slice(&b[..2]);
    uuid::Uuid::new_v8(bytes).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_keeps_its_id_from_start_to_end_and_others_differ() {
        let t = "orders@-@0,1@-@READY@-@10.0.0.1@-@42@-@1700000000000";
        assert_eq!(row_id(t, 0, 1), row_id(t, 0, 1));
        assert_ne!(row_id(t, 0, 1), row_id(t, 1, 1));
        let fire = Fire {
            names: Names { job: "orders".into(), instance: "10.0.0.1@-@42".into() }.into(),
            fire_ms: 1_700_000_000_000,
            source: ExecutionSource::Normal,
            items: Items::of(&[0, 1]),
        };
        assert_eq!(task_id(&fire), t, "the executor's task id, made again by the writer");
        let maker = RowMaker { hostname: "h".into() };
        let rows = maker.rows(&[
            TraceEvent::ItemStarted {
                fire: fire.clone(),
                item: 1,
                at_ms: 1_700_000_000_005,
                began_ms: None,
            },
            TraceEvent::ItemFinished {
                fire,
                item: 1,
                started_ms: Some(1_700_000_000_005),
                finished_ms: 1_700_000_000_009,
                result: ItemResult::Failed("boom".into()),
                ends_fire: false,
            },
        ]);
        let (TraceRecord::ExecutionStarted(start), TraceRecord::ExecutionFinished(end)) =
            (&rows[0], &rows[1])
        else {
            panic!("{rows:?}")
        };
        assert_eq!(start.id, end.id);
        assert_eq!(end.task_id, t);
        assert_eq!((end.job_name.as_str(), end.ip.as_str()), ("orders", "10.0.0.1"));
        assert_eq!(end.execution_source, "NORMAL_TRIGGER");
        assert_eq!(end.failure_cause.as_deref(), Some("boom"));
        assert_eq!(end.start_time, start.start_time);
    }

    /// A one-item fire as four entries (its begin and its end on their own) and as the two the
    /// listener sends for it: the same rows, for every way its item can end.
    #[test]
    fn a_one_item_fire_in_two_entries_gives_the_rows_of_four() {
        let fire = Fire {
            names: Names { job: "orders".into(), instance: "10.0.0.1@-@42".into() }.into(),
            fire_ms: 1_700_000_000_000,
            source: ExecutionSource::Normal,
            items: Items::of(&[2]),
        };
        let maker = RowMaker { hostname: "h".into() };
        let (began, started, finished) = (1_700_000_000_001, 1_700_000_000_002, 1_700_000_000_009);
        let ends = [
            (ItemResult::Succeeded, vec![], vec![]),
            (ItemResult::Failed("disk full".into()), vec![(2, "disk full".to_owned())], vec![]),
            (ItemResult::Cancelled, vec![], vec![2]),
        ];
        for (result, failures, cancelled) in ends {
            let four = maker.rows(&[
                TraceEvent::FireBegan { fire: fire.clone(), at_ms: began },
                TraceEvent::ItemStarted {
                    fire: fire.clone(),
                    item: 2,
                    at_ms: started,
                    began_ms: None,
                },
                TraceEvent::ItemFinished {
                    fire: fire.clone(),
                    item: 2,
                    started_ms: Some(started),
                    finished_ms: finished,
                    result: result.clone(),
                    ends_fire: false,
                },
                TraceEvent::FireEnded { fire: fire.clone(), at_ms: finished, failures, cancelled },
            ]);
            let two = maker.rows(&[
                TraceEvent::ItemStarted {
                    fire: fire.clone(),
                    item: 2,
                    at_ms: started,
                    began_ms: Some(began),
                },
                TraceEvent::ItemFinished {
                    fire: fire.clone(),
                    item: 2,
                    started_ms: Some(started),
                    finished_ms: finished,
                    result,
                    ends_fire: true,
                },
            ]);
            assert_eq!(four.len(), 5, "{four:?}");
            assert_eq!(two, four);
        }
    }

    #[test]
    fn items_are_kept_in_order_inline_or_not() {
        for items in [&[][..], &[3], &[0, 1, 2, 3], &[0, 1, 2, 3, 4, 5, 6]] {
            assert_eq!(Items::of(items).as_slice(), items);
        }
        assert!(matches!(Items::of(&[1, 2]), Items::Inline { .. }));
    }
}
