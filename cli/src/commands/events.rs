//! Scheduler events as the CLI shows them: the JSON line of `shardcron worker` ([`EventLine`])
//! and the short names both `worker` and `demo` use.
//!
//! The JSON form is an interface: scripts and the end-to-end tests parse it. Keep it stable;
//! `worker::LONG_ABOUT` documents it and the worker tests pin every event kind's exact keys.

use std::collections::{BTreeMap, HashMap};

use parking_lot::Mutex;
use serde::Serialize;
use shardcron::registry::SessionEvent;
use shardcron::runtime::{FireKind, SchedulerEvent, SkipReason};

/// One event of one instance, as one JSON object on one line.
///
/// The seven common keys are always present (`null` where they do not apply); the others appear
/// only on the event kinds they belong to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventLine {
    /// `item_start`, `item_end`, `sharding`, `leader`, `failover_claim`, `session`, `skip`,
    /// `fire_failed`, `config_applied`, `config_rejected`, `registry_garbage`, `stopped` or
    /// `error`.
    pub event: &'static str,
    /// The job; `null` for `session` (one session serves every job of the instance).
    pub job: Option<String>,
    /// The sharding item: `item_start`, `item_end`, `failover_claim`, `fire_failed`.
    pub item: Option<u32>,
    /// The instance that saw the event: `{ip}@-@{pid}[@-@{suffix}]`.
    pub instance: String,
    /// The scheduled fire time (epoch ms), the same on every instance for one fire; for a
    /// failover run, the fire the crashed owner missed. On the item events, `failover_claim`,
    /// `skip` and `fire_failed`.
    pub fire_ms: Option<i64>,
    /// When the event happened, by this instance's wall clock (epoch ms).
    pub at_ms: i64,
    /// The fencing token of the item's run: `item_start` and `item_end`.
    pub token: Option<u64>,
    /// `item_start`: `scheduled`, `misfire` (a catch-up run), `manual` or `failover`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<&'static str>,
    /// `item_end`: whether the item completed (false: failed, panicked or cancelled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// `sharding`: the committed assignment, instance id → its items ascending.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub assignment: Option<BTreeMap<String, Vec<u32>>>,
    /// `session`: `connected`, `suspended`, `reconnected`, `lost`, `expired` or `closed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<&'static str>,
    /// `session` with state `connected`: the id of the new session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<u64>,
    /// `skip`: a code (see [`skip_code`]); `fire_failed`, `config_rejected`,
    /// `registry_garbage`, `stopped`, `error`: a one-line text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `skip` with reason `clock_skew` or `registry_error`: the details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// `registry_garbage`: the node whose data the scheduler could not use.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// `registry_garbage`: what the node held, quoted and shortened (`(missing)` for a node
    /// deleted by hand).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl EventLine {
    fn new(event: &'static str, job: Option<&str>, instance: &str, at_ms: i64) -> Self {
        EventLine {
            event,
            job: job.map(str::to_owned),
            item: None,
            instance: instance.to_owned(),
            fire_ms: None,
            at_ms,
            token: None,
            kind: None,
            ok: None,
            assignment: None,
            state: None,
            session_id: None,
            reason: None,
            detail: None,
            path: None,
            value: None,
        }
    }

    /// The line as compact JSON, without the newline.
    pub fn to_json(&self) -> String {
        // Serializing plain strings, numbers and maps with string keys cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Turns the events of one instance into [`EventLine`]s. Remembers the fencing token of every
/// running item, so that `item_end` carries the token its `item_start` had.
#[derive(Debug)]
pub struct LineMaker {
    instance: String,
    tokens: Mutex<HashMap<(String, u32, i64), u64>>,
}

impl LineMaker {
    pub fn new(instance: impl Into<String>) -> Self {
        LineMaker { instance: instance.into(), tokens: Mutex::default() }
    }

    /// The line for `event` at `at_ms`; `None` for events the worker does not print (`Armed`:
    /// one per fire, it says nothing a script needs).
    pub fn line(&self, event: &SchedulerEvent, at_ms: i64) -> Option<EventLine> {
        let me = self.instance.as_str();
        let line = match event {
            SchedulerEvent::ItemStarted { job, item, fire_ms, kind, token } => {
                self.tokens.lock().insert((job.clone(), *item, *fire_ms), *token);
                EventLine {
                    item: Some(*item),
                    fire_ms: Some(*fire_ms),
                    token: Some(*token),
                    kind: Some(fire_kind(*kind)),
                    ..EventLine::new("item_start", Some(job), me, at_ms)
                }
            }
            SchedulerEvent::ItemFinished { job, item, fire_ms, ok } => {
                let token = self.tokens.lock().remove(&(job.clone(), *item, *fire_ms));
                EventLine {
                    item: Some(*item),
                    fire_ms: Some(*fire_ms),
                    token,
                    ok: Some(*ok),
                    ..EventLine::new("item_end", Some(job), me, at_ms)
                }
            }
            SchedulerEvent::Sharded { job, assignment } => EventLine {
                assignment: Some(assignment.iter().cloned().collect()),
                ..EventLine::new("sharding", Some(job), me, at_ms)
            },
            SchedulerEvent::LeaderElected { job } => EventLine::new("leader", Some(job), me, at_ms),
            SchedulerEvent::FailoverClaimed { job, item, fire_ms } => EventLine {
                item: Some(*item),
                fire_ms: Some(*fire_ms),
                ..EventLine::new("failover_claim", Some(job), me, at_ms)
            },
            SchedulerEvent::Session(session) => EventLine {
                state: Some(session_state(session)),
                session_id: match session {
                    SessionEvent::Connected { session } => Some(*session),
                    _ => None,
                },
                ..EventLine::new("session", None, me, at_ms)
            },
            SchedulerEvent::Skipped { job, fire_ms, reason } => EventLine {
                fire_ms: Some(*fire_ms),
                reason: Some(skip_code(reason).to_owned()),
                detail: skip_detail(reason),
                ..EventLine::new("skip", Some(job), me, at_ms)
            },
            SchedulerEvent::FireFailed { job, fire_ms, item, error } => EventLine {
                item: Some(*item),
                fire_ms: Some(*fire_ms),
                reason: Some(one_line(error)),
                ..EventLine::new("fire_failed", Some(job), me, at_ms)
            },
            SchedulerEvent::ConfigApplied { job } => {
                EventLine::new("config_applied", Some(job), me, at_ms)
            }
            SchedulerEvent::ConfigRejected { job, reason } => EventLine {
                reason: Some(one_line(reason)),
                ..EventLine::new("config_rejected", Some(job), me, at_ms)
            },
            SchedulerEvent::RegistryGarbage { job, path, value, reason } => EventLine {
                path: Some(path.clone()),
                value: Some(value.clone()),
                reason: Some(one_line(reason)),
                ..EventLine::new("registry_garbage", Some(job), me, at_ms)
            },
            SchedulerEvent::JobStopped { job, reason } => EventLine {
                reason: Some(one_line(reason)),
                ..EventLine::new("stopped", Some(job), me, at_ms)
            },
            SchedulerEvent::Error { job, message } => EventLine {
                reason: Some(one_line(message)),
                ..EventLine::new("error", Some(job), me, at_ms)
            },
            _ => return None,
        };
        Some(line)
    }
}

/// `scheduled`, `misfire`, `manual` or `failover`.
pub fn fire_kind(kind: FireKind) -> &'static str {
    match kind {
        FireKind::Scheduled => "scheduled",
        FireKind::Misfire => "misfire",
        FireKind::Manual => "manual",
        FireKind::Failover => "failover",
        _ => "other",
    }
}

/// `connected`, `suspended`, `reconnected`, `lost`, `expired` or `closed`.
pub fn session_state(event: &SessionEvent) -> &'static str {
    match event {
        SessionEvent::Connected { .. } => "connected",
        SessionEvent::Suspended => "suspended",
        SessionEvent::Reconnected => "reconnected",
        SessionEvent::Expired => "expired",
        SessionEvent::Lost => "lost",
        SessionEvent::Closed => "closed",
        _ => "other",
    }
}

/// Why a fire ran nothing here, as a code: [`SkipReason::code`], except `shutting-down`, the
/// spelling the worker's JSON lines have always used.
pub fn skip_code(reason: &SkipReason) -> &'static str {
    match reason {
        SkipReason::ShuttingDown => "shutting-down",
        other => other.code(),
    }
}

/// The details of a skip, where it has any.
pub fn skip_detail(reason: &SkipReason) -> Option<String> {
    match reason {
        SkipReason::ClockSkew { diff_ms } => {
            Some(format!("local clock minus registry clock: {diff_ms} ms"))
        }
        SkipReason::RegistryError(message) => Some(one_line(message)),
        _ => None,
    }
}

/// Collapses a message onto one line (error texts may span several).
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(line: &EventLine) -> serde_json::Value {
        serde_json::from_str(&line.to_json()).unwrap()
    }

    #[test]
    fn item_end_carries_the_token_of_its_start() {
        let maker = LineMaker::new("10.0.0.1@-@7");
        let start = SchedulerEvent::ItemStarted {
            job: "j".into(),
            item: 2,
            fire_ms: 5000,
            kind: FireKind::Failover,
            token: 9,
        };
        let start = maker.line(&start, 5003).unwrap();
        assert_eq!(
            start.to_json(),
            r#"{"event":"item_start","job":"j","item":2,"instance":"10.0.0.1@-@7","fire_ms":5000,"at_ms":5003,"token":9,"kind":"failover"}"#
        );
        let end =
            SchedulerEvent::ItemFinished { job: "j".into(), item: 2, fire_ms: 5000, ok: false };
        let end = maker.line(&end, 6000).unwrap();
        assert_eq!(
            end.to_json(),
            r#"{"event":"item_end","job":"j","item":2,"instance":"10.0.0.1@-@7","fire_ms":5000,"at_ms":6000,"token":9,"ok":false}"#
        );
        assert!(maker.tokens.lock().is_empty(), "a finished item's token is forgotten");
    }

    #[test]
    fn events_without_an_item_have_null_common_keys() {
        let maker = LineMaker::new("i");
        let sharded = SchedulerEvent::Sharded {
            job: "j".into(),
            assignment: vec![("b".into(), vec![0, 1]), ("a".into(), vec![])],
        };
        let value = json(&maker.line(&sharded, 1).unwrap());
        assert_eq!(
            value,
            serde_json::json!({"event":"sharding","job":"j","item":null,"instance":"i",
                "fire_ms":null,"at_ms":1,"token":null,"assignment":{"a":[],"b":[0,1]}})
        );
        let session = SchedulerEvent::Session(SessionEvent::Connected { session: 42 });
        assert_eq!(
            json(&maker.line(&session, 2).unwrap()),
            serde_json::json!({"event":"session","job":null,"item":null,"instance":"i",
                "fire_ms":null,"at_ms":2,"token":null,"state":"connected","session_id":42})
        );
        let skip = SchedulerEvent::Skipped {
            job: "j".into(),
            fire_ms: 3000,
            reason: SkipReason::RegistryError("lost\n  connection".into()),
        };
        assert_eq!(
            json(&maker.line(&skip, 3).unwrap()),
            serde_json::json!({"event":"skip","job":"j","item":null,"instance":"i",
                "fire_ms":3000,"at_ms":3,"token":null,"reason":"registry_error",
                "detail":"lost connection"})
        );
        let armed = SchedulerEvent::Armed { job: "j".into(), next_fire_ms: 1 };
        assert_eq!(maker.line(&armed, 4), None);
    }
}
