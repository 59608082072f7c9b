//! Error handlers: the registry of types and what each does in a fire.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::*;
use crate::config::{JobConfig, KnownTypes};

/// Items 2 and 5 fail (5 first), item 7 panics, item 8 is cancelled by its own code.
fn failing_job() -> Job {
    Job::from_fn(|ctx: ShardingContext| async move {
        let ms = if ctx.item == 2 { 20 } else { 10 };
        tokio::time::sleep(Duration::from_millis(ms)).await;
        match ctx.item {
            2 | 5 => Err(format!("boom {}", ctx.item).into()),
            7 => panic!("kaput"),
            8 => {
                ctx.cancellation.cancel();
                Err("gave up".into())
            }
            _ => Ok(()),
        }
    })
}

async fn run_with(handler: Arc<dyn JobErrorHandler>) -> FireReport {
    Executor::new(handles())
        .with_error_handler(handler)
        .run(&failing_job(), request(&[0, 2, 5, 7, 8], 10, 0))
        .await
}

#[tokio::test(start_paused = true)]
async fn log_and_ignore_keep_failures_in_the_report_without_raising() {
    for handler in
        [Arc::new(LogErrorHandler) as Arc<dyn JobErrorHandler>, Arc::new(IgnoreErrorHandler)]
    {
        let report = run_with(handler).await;
        assert_eq!(report.failed_items(), [2, 5, 7]);
        assert_eq!(report.cancelled_items(), [8]);
        assert_eq!(report.raised, None);
        assert!(report.raised_items.is_empty());
        assert_eq!(report.raised_error(), None);
    }
}

#[tokio::test(start_paused = true)]
async fn the_default_handler_is_log() {
    let executor = Executor::new(handles());
    assert_eq!(executor.error_handler().type_name(), "LOG");
}

#[tokio::test(start_paused = true)]
async fn throw_raises_the_failure_of_the_lowest_item() {
    let report = run_with(Arc::new(ThrowErrorHandler)).await;
    assert_eq!(report.raised_items, [2, 5, 7]);
    assert_eq!(report.raised, Some(JobFailure::Error("boom 2".into())));
    let error = report.raised_error().unwrap();
    assert_eq!(
        error,
        JobError::Raised {
            job_name: "orders".into(),
            item: 2,
            failure: JobFailure::Error("boom 2".into())
        }
    );
    assert_eq!(
        error.to_string(),
        "job \"orders\" item 2 failed: the job returned an error: boom 2"
    );
    assert_eq!(report.completed_items(), [0]);
}

/// Records every call; raises panics only.
#[derive(Debug, Default)]
struct RaisePanics {
    calls: Mutex<Vec<(String, Option<u32>, JobFailure)>>,
}

impl JobErrorHandler for RaisePanics {
    fn type_name(&self) -> &str {
        "RAISE_PANICS"
    }

    fn handle(&self, job_name: &str, item: Option<u32>, error: &JobFailure) -> ErrorDisposition {
        self.calls.lock().push((job_name.to_string(), item, error.clone()));
        match error {
            JobFailure::Panicked(_) => ErrorDisposition::Raise,
            _ => ErrorDisposition::Continue,
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_custom_handler_sees_each_failure_once_and_decides() {
    let handler = Arc::new(RaisePanics::default());
    let report = run_with(Arc::clone(&handler) as Arc<dyn JobErrorHandler>).await;
    let mut calls = handler.calls.lock().clone();
    calls.sort_by_key(|(_, item, _)| *item);
    assert_eq!(
        calls,
        [
            ("orders".to_string(), Some(2), JobFailure::Error("boom 2".into())),
            ("orders".to_string(), Some(5), JobFailure::Error("boom 5".into())),
            ("orders".to_string(), Some(7), JobFailure::Panicked("kaput".into())),
        ],
        "cancelled item 8 is not a failure"
    );
    assert_eq!(report.raised_items, [7]);
    assert_eq!(report.raised, Some(JobFailure::Panicked("kaput".into())));
}

#[derive(Debug)]
struct PanickingHandler;

impl JobErrorHandler for PanickingHandler {
    fn type_name(&self) -> &str {
        "PANICKING"
    }

    fn handle(&self, _: &str, _: Option<u32>, _: &JobFailure) -> ErrorDisposition {
        panic!("handler bug")
    }
}

#[tokio::test(start_paused = true)]
async fn a_panicking_handler_does_not_break_the_fire() {
    let report = run_with(Arc::new(PanickingHandler)).await;
    assert_eq!(report.failed_items(), [2, 5, 7]);
    assert_eq!(report.completed_items(), [0]);
    assert_eq!(report.raised, None);
}

#[test]
fn the_registry_holds_the_builtins_and_resolves_like_elasticjob() {
    let handlers = ErrorHandlers::default();
    assert_eq!(handlers.type_names().collect::<Vec<_>>(), ["IGNORE", "LOG", "THROW"]);
    assert_eq!(handlers.resolve(None).unwrap().type_name(), "LOG");
    assert_eq!(handlers.resolve(Some("")).unwrap().type_name(), "LOG");
    for name in ["LOG", "THROW", "IGNORE"] {
        assert_eq!(handlers.resolve(Some(name)).unwrap().type_name(), name);
        assert!(handlers.contains(name));
    }
    let error = handlers.resolve(Some("log")).unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown error handler \"log\": known handlers are IGNORE, LOG, THROW; \
         register custom ones with ErrorHandlers::register"
    );
}

#[test]
fn custom_handlers_register_once_under_a_non_empty_name() {
    let mut handlers = ErrorHandlers::default();
    handlers.register(Arc::new(RaisePanics::default())).unwrap();
    assert_eq!(handlers.get("RAISE_PANICS").unwrap().type_name(), "RAISE_PANICS");

    let again = handlers.register(Arc::new(RaisePanics::default())).unwrap_err();
    assert_eq!(again, JobError::DuplicateErrorHandler { name: "RAISE_PANICS".into() });
    assert!(again.to_string().contains("pick another type name"));
    let builtin = handlers.register(Arc::new(LogErrorHandler)).unwrap_err();
    assert_eq!(builtin, JobError::DuplicateErrorHandler { name: "LOG".into() });

    #[derive(Debug)]
    struct Nameless;
    impl JobErrorHandler for Nameless {
        fn type_name(&self) -> &str {
            ""
        }
        fn handle(&self, _: &str, _: Option<u32>, _: &JobFailure) -> ErrorDisposition {
            ErrorDisposition::Continue
        }
    }
    assert_eq!(handlers.register(Arc::new(Nameless)).unwrap_err(), JobError::EmptyErrorHandlerName);
}

#[test]
fn registered_handlers_make_configs_naming_them_valid() {
    let mut config = JobConfig::new("orders", 2);
    config.job_error_handler_type = Some("RAISE_PANICS".into());
    assert!(config.validate().is_err());

    let mut handlers = ErrorHandlers::default();
    handlers.register(Arc::new(RaisePanics::default())).unwrap();
    let known = handlers.add_to(KnownTypes::default());
    config.validate_with(&known).unwrap();
    let handler = handlers.resolve(config.job_error_handler_type.as_deref()).unwrap();
    assert_eq!(handler.type_name(), "RAISE_PANICS");
}

#[test]
fn builtin_handlers_decide_as_documented() {
    let failure = JobFailure::Error("x".into());
    assert_eq!(LogErrorHandler.handle("j", Some(0), &failure), ErrorDisposition::Continue);
    assert_eq!(ThrowErrorHandler.handle("j", Some(0), &failure), ErrorDisposition::Raise);
    assert_eq!(IgnoreErrorHandler.handle("j", None, &failure), ErrorDisposition::Continue);
}
