//! `ShardingContext` JSON, task ids, contexts built from a config.

use tokio_util::sync::CancellationToken;

use super::*;
use crate::config::JobConfig;

#[test]
fn context_json_has_elasticjob_field_names_and_no_cancellation_token() {
    let info = fire(&[2, 0]);
    let ctx = ShardingContext::new(&info, 3, "p", 2, "C").with_fencing(7, CancellationToken::new());
    assert_eq!(
        ctx.to_json().unwrap(),
        r#"{"jobName":"orders","taskId":"orders@-@0,2@-@READY@-@10.0.0.1@-@4242@-@1700000000000","shardingTotalCount":3,"jobParameter":"p","shardingItem":2,"shardingParameter":"C","fireTimeMs":1700000000000,"fencingToken":7}"#
    );
}

#[test]
fn context_json_round_trips_with_a_fresh_token() {
    let ctx = ShardingContext::new(&fire(&[1]), 4, "a \"quoted\" param", 1, "é=1");
    ctx.cancellation.cancel();
    let back: ShardingContext = serde_json::from_str(&ctx.to_json().unwrap()).unwrap();
    assert_eq!(back.to_json().unwrap(), ctx.to_json().unwrap());
    assert!(!back.is_cancelled(), "the token is not serialized");
}

#[test]
fn task_id_format_per_source() {
    let expected = [
        (ExecutionSource::Normal, "orders@-@1,3@-@READY@-@10.0.0.1@-@4242@-@1700000000000"),
        (ExecutionSource::Misfire, "orders@-@1,3@-@MISFIRE@-@10.0.0.1@-@4242@-@1700000000000"),
        (ExecutionSource::Failover, "orders@-@1,3@-@FAILOVER@-@10.0.0.1@-@4242@-@1700000000000"),
        (ExecutionSource::Manual, "orders@-@1,3@-@MANUAL@-@10.0.0.1@-@4242@-@1700000000000"),
    ];
    for (source, text) in expected {
        let info = FireInfo { source, items: vec![3, 1, 3], ..fire(&[]) };
        let id = info.task_id();
        assert_eq!(id.items, [1, 3], "sorted and deduplicated");
        assert_eq!(id.to_string(), text);
        assert_eq!(text.parse::<TaskId>().unwrap(), id);
        assert_eq!(source.to_string(), source.task_type());
    }
}

#[test]
fn the_task_id_text_of_a_fire_is_its_task_id_written() {
    for (items, fire_ms) in [
        (vec![], 0),
        (vec![0], 1_700_000_000_000),
        (vec![1, 3, 4_294_967_295], -1),
        (vec![3, 1, 3], -1_700_000_000_123),
        (vec![7, 2], 9_007_199_254_740_993),
    ] {
        let info = FireInfo {
            items,
            fire_time: crate::job::epoch_ms_to_system_time(fire_ms),
            ..fire(&[])
        };
        assert_eq!(info.task_id_text(), info.task_id().to_string());
    }
    for value in [0, 9, 10, -10, i64::from(u32::MAX), i64::MAX, i64::MIN] {
        assert_eq!(crate::job::context::Decimal::new(value).as_str(), value.to_string());
    }
}

#[test]
fn task_id_parses_names_and_instances_containing_the_separator() {
    let id = TaskId {
        job_name: "a@-@b".into(),
        items: vec![0, 10],
        source: ExecutionSource::Failover,
        instance: "10.0.0.1@-@42@-@sim-3".into(),
        fire_time: crate::job::epoch_ms_to_system_time(-5),
    };
    let text = id.to_string();
    assert_eq!(text, "a@-@b@-@0,10@-@FAILOVER@-@10.0.0.1@-@42@-@sim-3@-@-5");
    assert_eq!(text.parse::<TaskId>().unwrap(), id);

    let empty = TaskId { items: vec![], ..id };
    assert_eq!(empty.to_string().parse::<TaskId>().unwrap(), empty);
}

#[test]
fn malformed_task_ids_are_rejected_with_the_expected_form() {
    for text in [
        "",
        "orders",
        "orders@-@0@-@READY@-@host@-@soon",
        "orders@-@0@-@LATER@-@host@-@1",
        "orders@-@1,0@-@READY@-@host@-@1",
        "@-@0@-@READY@-@host@-@1",
        "orders@-@0@-@READY@-@1",
    ] {
        let error = text.parse::<TaskId>().unwrap_err();
        assert!(matches!(error, JobError::InvalidTaskId { .. }), "{text:?}: {error}");
        assert!(error.to_string().contains(&format!("{text:?} is not a task id")), "{error}");
    }
    let error = "orders@-@x@-@READY@-@host@-@1".parse::<TaskId>().unwrap_err();
    assert!(error.to_string().contains("{job}@-@{items}@-@{READY|MISFIRE|FAILOVER|MANUAL}"));
}

#[test]
fn contexts_from_a_config_carry_its_parameters() {
    let mut config = JobConfig::new("orders", 4);
    config.sharding_item_parameters = Some("0=A,2=C".into());
    config.job_parameter = Some("daily".into());
    let info = fire(&[2, 0, 1]);
    let request = FireRequest::from_config(info.clone(), &config, 5).unwrap();
    assert_eq!(request.max_parallel_items, 5);
    let summary: Vec<_> = request
        .contexts
        .iter()
        .map(|ctx| (ctx.item, ctx.item_parameter.as_str(), ctx.sharding_total_count))
        .collect();
    assert_eq!(summary, [(0, "A", 4), (1, "", 4), (2, "C", 4)]);
    for ctx in &request.contexts {
        assert_eq!(ctx.job_name, "orders");
        assert_eq!(ctx.job_parameter, "daily");
        assert_eq!(ctx.task_id, "orders@-@0,1,2@-@READY@-@10.0.0.1@-@4242@-@1700000000000");
        assert_eq!(ctx.fire_time_ms, START_MS);
        assert_eq!(ctx.fencing_token, 0);
        assert!(!ctx.is_cancelled());
    }
    // Each item gets its own token.
    request.contexts[0].cancellation.cancel();
    assert!(!request.contexts[1].is_cancelled());

    let mut unset = JobConfig::new("orders", 2);
    unset.job_parameter = None;
    unset.sharding_item_parameters = None;
    let contexts = fire(&[1]).contexts(&unset).unwrap();
    assert_eq!((contexts[0].job_parameter.as_str(), contexts[0].item_parameter.as_str()), ("", ""));
}

#[test]
fn contexts_from_an_invalid_config_fail_with_the_config_error() {
    let mut config = JobConfig::new("orders", 2);
    config.sharding_item_parameters = Some("0=A,7=B".into());
    let error = fire(&[0]).contexts(&config).unwrap_err();
    assert!(error.to_string().starts_with("shardingItemParameters"), "{error}");
}

#[test]
fn epoch_milliseconds_round_trip_and_round_towards_the_past() {
    use std::time::{Duration, UNIX_EPOCH};

    use crate::job::{epoch_ms_to_system_time, system_time_to_epoch_ms};
    for ms in [i64::MIN / 2, -1_500, -1, 0, 1, 1_700_000_000_000] {
        assert_eq!(system_time_to_epoch_ms(epoch_ms_to_system_time(ms)), ms);
    }
    let before = UNIX_EPOCH - Duration::from_micros(1_500);
    assert_eq!(system_time_to_epoch_ms(before), -2, "1.5 ms before the epoch");
    let after = UNIX_EPOCH + Duration::from_micros(1_500);
    assert_eq!(system_time_to_epoch_ms(after), 1, "1.5 ms after the epoch");
}
