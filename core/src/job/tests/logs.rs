//! What the module logs, captured with a minimal `tracing` subscriber.
//!
//! Scoped subscribers (`with_default`) race with other test threads on tracing's global
//! per-callsite interest cache: a callsite first hit on a thread without a subscriber can stay
//! disabled for the scoped one, and events go missing now and then. So one global subscriber is
//! installed for the whole test binary, always interested, and records into a thread-local sink
//! that only these tests set. They run on current-thread runtimes, so every event of the fire
//! under test is emitted on the test's thread.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once};

use async_trait::async_trait;
use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

use super::*;

/// One captured event: its level and its fields (Display and Debug values alike as text).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Captured {
    level: Level,
    fields: BTreeMap<String, String>,
}

type Sink = Arc<Mutex<Vec<Captured>>>;

thread_local! {
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

/// Captures the events of the current thread until dropped.
struct Capture {
    events: Sink,
}

impl Capture {
    fn start() -> Self {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            tracing::subscriber::set_global_default(GlobalCapture::default())
                .expect("no other global subscriber in this test binary");
            // A callsite that was registering on another thread while the subscriber was
            // installed may have cached "never"; recompute every callsite's interest.
            tracing::callsite::rebuild_interest_cache();
        });
        let events = Sink::default();
        SINK.with(|sink| *sink.borrow_mut() = Some(Arc::clone(&events)));
        Capture { events }
    }

    fn all(&self) -> Vec<Captured> {
        self.events.lock().clone()
    }

    fn at(&self, level: Level) -> Vec<Captured> {
        self.all().into_iter().filter(|event| event.level == level).collect()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        SINK.with(|sink| *sink.borrow_mut() = None);
    }
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

#[derive(Default)]
struct GlobalCapture {
    next_span: AtomicU64,
}

impl Subscriber for GlobalCapture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, attributes: &Attributes<'_>) -> Id {
        // A span is captured like an event, with its name under `span`.
        if let Some(sink) = SINK.with(|sink| sink.borrow().clone()) {
            let mut fields = BTreeMap::new();
            attributes.record(&mut Fields(&mut fields));
            fields.insert("span".into(), attributes.metadata().name().into());
            sink.lock().push(Captured { level: *attributes.metadata().level(), fields });
        }
        Id::from_u64(self.next_span.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let Some(sink) = SINK.with(|sink| sink.borrow().clone()) else { return };
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        sink.lock().push(Captured { level: *event.metadata().level(), fields });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

fn fields(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn log_reports_at_warn_level_with_job_item_fire_and_error_as_text() {
    let capture = Capture::start();
    let failure = JobFailure::Error("boom".into());
    let mut failover = fire(&[3]);
    failover.source = ExecutionSource::Failover;
    LogErrorHandler.handle_in_fire(&failover, Some(3), &failure);
    LogErrorHandler.handle_in_fire(&failover, None, &failure);
    LogErrorHandler.handle("orders", Some(3), &failure);
    let fire_text = crate::cron::JobTimeZone::utc().format_rfc3339(START_MS).unwrap();
    assert_eq!(
        capture.all(),
        [
            Captured {
                level: Level::WARN,
                fields: fields(&[
                    ("error", "the job returned an error: boom"),
                    ("fire", &fire_text),
                    ("item", "3"),
                    ("job", "orders"),
                    ("message", "item failed"),
                    ("source", "FAILOVER"),
                ]),
            },
            Captured {
                level: Level::WARN,
                fields: fields(&[
                    ("error", "the job returned an error: boom"),
                    ("fire", &fire_text),
                    ("job", "orders"),
                    ("message", "fire failed"),
                    ("source", "FAILOVER"),
                ]),
            },
            Captured {
                level: Level::WARN,
                fields: fields(&[
                    ("error", "the job returned an error: boom"),
                    ("item", "3"),
                    ("job", "orders"),
                    ("message", "item failed"),
                ]),
            },
        ]
    );
}

#[test]
fn the_stderr_text_names_job_item_fire_and_error() {
    let failure = JobFailure::Error("disk full".into());
    assert_eq!(
        super::super::error_handler::failure_text(
            "reports",
            Some(1),
            Some(("2024-05-01T10:00:02+00:00", ExecutionSource::Normal)),
            &failure
        ),
        "job \"reports\" item 1 of the fire at 2024-05-01T10:00:02+00:00 (READY) failed: the job \
         returned an error: disk full"
    );
    assert_eq!(
        super::super::error_handler::failure_text(
            "reports",
            None,
            Some(("2024-05-01T10:00:02+00:00", ExecutionSource::Manual)),
            &failure
        ),
        "job \"reports\" the fire at 2024-05-01T10:00:02+00:00 (MANUAL) failed: the job returned \
         an error: disk full"
    );
}

#[test]
fn throw_and_ignore_log_nothing() {
    let capture = Capture::start();
    let failure = JobFailure::Panicked("x".into());
    ThrowErrorHandler.handle("orders", Some(1), &failure);
    IgnoreErrorHandler.handle("orders", Some(1), &failure);
    assert!(capture.all().is_empty());
}

struct PanicsBefore;

#[async_trait]
impl JobListener for PanicsBefore {
    async fn before_job_executed(&self, _fire: &FireInfo) {
        panic!("listener bug");
    }
}

#[tokio::test(start_paused = true)]
async fn a_fire_reports_failures_at_warn_and_listener_panics_at_error_level() {
    let capture = Capture::start();
    let job = Job::from_fn(|ctx: ShardingContext| async move {
        if ctx.item == 1 {
            return Err("bad row".into());
        }
        Ok(())
    });
    Executor::new(handles())
        .with_listener(Arc::new(PanicsBefore))
        .run(&job, request(&[0, 1], 2, 0))
        .await;

    let errors = capture.at(Level::ERROR);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].fields["method"], "before_job_executed");
    assert_eq!(errors[0].fields["panic"], "listener bug");
    assert_eq!(errors[0].fields["listener"], "0");
    let warnings = capture.at(Level::WARN);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].fields["job"], "orders");
    assert_eq!(warnings[0].fields["item"], "1");
    assert_eq!(warnings[0].fields["source"], "READY");
    assert_eq!(warnings[0].fields["error"], "the job returned an error: bad row");
}

#[tokio::test(start_paused = true)]
async fn fires_and_items_run_in_spans_that_carry_job_item_instance_fire_time_and_token() {
    let capture = Capture::start();
    let job = Job::from_fn(|_ctx: ShardingContext| async move { Ok(()) });
    let mut request = request(&[0, 2], 3, 0);
    for ctx in &mut request.contexts {
        *ctx = ctx.clone().with_fencing(40 + u64::from(ctx.item), Default::default());
    }
    Executor::new(handles()).run(&job, request).await;

    let spans: Vec<BTreeMap<String, String>> = capture
        .all()
        .into_iter()
        .filter(|c| c.fields.contains_key("span"))
        .map(|c| c.fields)
        .collect();
    let start = START_MS.to_string();
    assert_eq!(
        spans,
        [
            fields(&[
                ("span", "fire"),
                ("job", "orders"),
                ("instance", "10.0.0.1@-@4242"),
                ("fire_ms", &start),
                ("source", "READY"),
                ("items", "[0, 2]"),
            ]),
            fields(&[
                ("span", "item"),
                ("job", "orders"),
                ("item", "0"),
                ("instance", "10.0.0.1@-@4242"),
                ("fire_ms", &start),
                ("token", "40"),
            ]),
            fields(&[
                ("span", "item"),
                ("job", "orders"),
                ("item", "2"),
                ("instance", "10.0.0.1@-@4242"),
                ("fire_ms", &start),
                ("token", "42"),
            ]),
        ]
    );
}
