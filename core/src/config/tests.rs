//! YAML compatibility with ElasticJob, and validation messages.
//!
//! The `ELASTICJOB_*` samples are byte-for-byte what ElasticJob 3.0.x's `YamlEngine.marshal`
//! (SnakeYAML, null and empty fields skipped) writes for the configs described on each.

use super::*;

/// `JobConfiguration.newBuilder("myJob", 3).cron("0/5 * * * * ?").build()`.
const ELASTICJOB_BUILDER_DEFAULTS: &str = "\
cron: 0/5 * * * * ?
description: ''
disabled: false
failover: false
jobName: myJob
jobParameter: ''
maxTimeDiffSeconds: -1
misfire: true
monitorExecution: true
overwrite: false
reconcileIntervalMinutes: 10
shardingItemParameters: ''
shardingTotalCount: 3
staticSharding: false
";

/// Every field set.
const ELASTICJOB_FULL: &str = "\
cron: 0/5 * * * * ?
description: 'desc: with colon #hash'
disabled: false
failover: true
jobErrorHandlerType: LOG
jobExecutorServiceHandlerType: CPU
jobListenerTypes:
- LOG
- NOOP
jobName: myJob
jobParameter: '123'
jobShardingStrategyType: ROUND_ROBIN
label: blue
maxTimeDiffSeconds: 60
misfire: true
monitorExecution: true
overwrite: true
props:
  script.command.line: echo hi
  streaming.process: 'true'
reconcileIntervalMinutes: 10
shardingItemParameters: 0=Beijing,1=Shanghai,2=Guangzhou
shardingTotalCount: 3
staticSharding: true
timeZone: GMT+08:00
";

/// A one-off job: empty cron, values with `=` and `,`, a string that YAML 1.1 reads as a bool.
const ELASTICJOB_ONE_OFF: &str = "\
cron: ''
description: 'yes'
disabled: false
failover: false
jobName: oneOff
jobParameter: a=b, c
maxTimeDiffSeconds: -1
misfire: false
monitorExecution: false
overwrite: false
reconcileIntervalMinutes: 0
shardingItemParameters: 0=x=y
shardingTotalCount: 1
staticSharding: false
";

/// A tracing extra configuration (a tagged object), non-ASCII text, a cron with a year.
const ELASTICJOB_TRACED: &str = "\
cron: 0 0/10 * * * ? 2030
description: 夜间结算 job
disabled: false
failover: false
jobExtraConfigurations:
- !!org.apache.shardingsphere.elasticjob.tracing.yaml.YamlTracingConfiguration
  type: RDB
jobName: traced
jobParameter: 'yes'
maxTimeDiffSeconds: -1
misfire: false
monitorExecution: false
overwrite: false
props:
  n: '007'
reconcileIntervalMinutes: 0
shardingTotalCount: 2
staticSharding: false
timeZone: Asia/Shanghai
";

/// ElasticJob 3.0.0's own test fixture (`JobConfigurationPOJOTest.YAML`, before `timeZone`,
/// `label` and `staticSharding` existed).
const ELASTICJOB_3_0_0_TEST_YAML: &str = "\
cron: 0/1 * * * * ?
description: Job description
disabled: false
failover: false
jobErrorHandlerType: IGNORE
jobExecutorServiceHandlerType: CPU
jobName: test_job
jobParameter: param
jobShardingStrategyType: AVG_ALLOCATION
maxTimeDiffSeconds: -1
misfire: false
monitorExecution: false
overwrite: false
props:
  key: value
reconcileIntervalMinutes: 0
shardingItemParameters: 0=A,1=B,2=C
shardingTotalCount: 3
";

#[test]
fn builder_defaults_match_elasticjob() {
    let mut config = JobConfig::new("myJob", 3);
    config.cron = Some("0/5 * * * * ?".into());
    assert_eq!(config.to_yaml().unwrap(), ELASTICJOB_BUILDER_DEFAULTS);
    assert_eq!(JobConfig::from_yaml(ELASTICJOB_BUILDER_DEFAULTS).unwrap(), config);
}

/// A config built through the typed builder writes the bytes ElasticJob writes for the same
/// job: the builder changes how a config is made, not the file format.
#[test]
fn the_builder_writes_elasticjobs_bytes() {
    let defaults =
        JobConfig::builder("myJob").cron("0/5 * * * * ?").sharding_total_count(3).build().unwrap();
    assert_eq!(defaults.to_yaml().unwrap(), ELASTICJOB_BUILDER_DEFAULTS);

    let full = JobConfig::builder("myJob")
        .cron("0/5 * * * * ?")
        .time_zone(crate::cron::JobTimeZone::parse("GMT+08:00").unwrap())
        .sharding_total_count(3)
        .item_parameter(0, "Beijing")
        .item_parameter(1, "Shanghai")
        .item_parameter(2, "Guangzhou")
        .job_parameter("123")
        .failover(true)
        .max_time_diff(Some(std::time::Duration::from_secs(60)))
        .sharding_strategy(super::ShardingStrategyType::RoundRobin)
        .error_handler(super::ErrorHandlerType::Log)
        .listener_type("LOG")
        .listener_type("NOOP")
        .description("desc: with colon #hash")
        .prop("script.command.line", "echo hi")
        .prop("streaming.process", "true")
        .overwrite(true)
        .label("blue")
        .static_sharding(true);
    // `jobExecutorServiceHandlerType` is ElasticJob's thread pool, which the builder does not
    // offer (shardcron ignores it): the rest is byte for byte ElasticJob's.
    let expected = ELASTICJOB_FULL.replace("jobExecutorServiceHandlerType: CPU\n", "");
    assert_eq!(full.build().unwrap().to_yaml().unwrap(), expected);

    // Rebuilding a config read from YAML without changing anything changes no byte.
    for sample in [ELASTICJOB_BUILDER_DEFAULTS, ELASTICJOB_FULL, ELASTICJOB_ONE_OFF] {
        let read = JobConfig::from_yaml(sample).unwrap();
        assert_eq!(read.to_builder().build().unwrap().to_yaml().unwrap(), sample);
    }
}

#[test]
fn builder_errors_name_the_field() {
    let field = |builder: super::JobConfigBuilder| builder.build().unwrap_err().field();
    let base = || JobConfig::builder("job").cron("0/5 * * * * ?");
    assert_eq!(field(JobConfig::builder("job")), Some("cron"), "no schedule");
    assert_eq!(field(base().sharding_total_count(0)), Some("shardingTotalCount"));
    assert_eq!(field(JobConfig::builder("").one_off()), Some("jobName"));
    assert_eq!(field(JobConfig::builder("job").cron("0 0 25 * * ?")), Some("cron"));
    assert_eq!(field(base().item_parameter(5, "x")), Some("shardingItemParameters"));
    assert_eq!(field(base().item_parameter(0, "a,b")), Some("shardingItemParameters"));
    assert_eq!(
        field(base().reconcile_interval(Some(std::time::Duration::from_secs(90)))),
        Some("reconcileIntervalMinutes")
    );
    assert_eq!(
        field(base().max_time_diff(Some(std::time::Duration::from_millis(1500)))),
        Some("maxTimeDiffSeconds")
    );
    let zone = crate::cron::JobTimeZone::parse("Asia/Tokyo").unwrap();
    let schedule = crate::cron::CronSchedule::parse("0/5 * * * * ?", "UTC").unwrap();
    assert_eq!(
        field(JobConfig::builder("job").schedule(schedule).time_zone(zone)),
        Some("timeZone"),
        "two different zones"
    );
    // Custom names are the scheduler's to check, when the job is added.
    let custom = base()
        .sharding_strategy(super::ShardingStrategyType::Custom("BY_ZONE".into()))
        .error_handler(super::ErrorHandlerType::Custom("PAGER".into()))
        .build()
        .unwrap();
    assert_eq!(custom.sharding_strategy(), super::ShardingStrategyType::Custom("BY_ZONE".into()));
    assert!(custom.validate().is_err());
}

#[test]
fn elasticjob_samples_round_trip_byte_for_byte() {
    for sample in
        [ELASTICJOB_BUILDER_DEFAULTS, ELASTICJOB_FULL, ELASTICJOB_ONE_OFF, ELASTICJOB_TRACED]
    {
        let config = JobConfig::from_yaml(sample).unwrap();
        assert_eq!(config.to_yaml().unwrap(), sample);
        assert_eq!(config.unknown_fields().count(), 0, "{sample}");
    }
    // 3.0.0 predates `staticSharding`; we write it, as 3.0.2+ does.
    let config = JobConfig::from_yaml(ELASTICJOB_3_0_0_TEST_YAML).unwrap();
    let expected = format!("{ELASTICJOB_3_0_0_TEST_YAML}staticSharding: false\n");
    assert_eq!(config.to_yaml().unwrap(), expected);
}

/// A tracing configuration as ElasticJob 3.0.x writes it for an RDB event store: nested class
/// tags survive a read-modify-write.
#[test]
fn nested_class_tags_survive_a_rewrite() {
    let yaml = "\
jobExtraConfigurations:
- !!org.apache.shardingsphere.elasticjob.tracing.yaml.YamlTracingConfiguration
  tracingStorageConfiguration: !!org.apache.shardingsphere.elasticjob.tracing.rdb.yaml.YamlDataSourceConfiguration
    dataSourceClassName: org.apache.commons.dbcp2.BasicDataSource
    props:
      password: ''
      url: jdbc:h2:mem:job_event_storage
      username: sa
  type: RDB
jobName: traced
shardingTotalCount: 2
";
    let mut config = JobConfig::from_yaml(yaml).unwrap();
    config.failover = true;
    let written = config.to_yaml().unwrap();
    let extra = &yaml[..yaml.find("jobName").unwrap()];
    assert!(written.contains(extra), "{written}");
    assert_eq!(JobConfig::from_yaml(&written).unwrap(), config);
}

#[test]
fn reads_every_field() {
    let config = JobConfig::from_yaml(ELASTICJOB_FULL).unwrap();
    let mut expected = JobConfig::new("myJob", 3);
    expected.cron = Some("0/5 * * * * ?".into());
    expected.time_zone = Some("GMT+08:00".into());
    expected.sharding_item_parameters = Some("0=Beijing,1=Shanghai,2=Guangzhou".into());
    expected.job_parameter = Some("123".into());
    expected.failover = true;
    expected.max_time_diff_seconds = 60;
    expected.job_sharding_strategy_type = Some("ROUND_ROBIN".into());
    expected.job_executor_service_handler_type = Some("CPU".into());
    expected.job_error_handler_type = Some("LOG".into());
    expected.job_listener_types = vec!["LOG".into(), "NOOP".into()];
    expected.description = Some("desc: with colon #hash".into());
    expected.props.insert("script.command.line".into(), "echo hi".into());
    expected.props.insert("streaming.process".into(), "true".into());
    expected.overwrite = true;
    expected.label = Some("blue".into());
    expected.static_sharding = true;
    assert_eq!(config, expected);
    config.validate().unwrap();
    assert_eq!(config.sharding_strategy_type(), "ROUND_ROBIN");
    assert_eq!(config.item_parameters().unwrap()[&2], "Guangzhou");
}

#[test]
fn one_off_and_extra_configurations() {
    let one_off = JobConfig::from_yaml(ELASTICJOB_ONE_OFF).unwrap();
    assert!(one_off.is_one_off());
    assert_eq!(one_off.cron.as_deref(), Some(""));
    assert_eq!(one_off.description.as_deref(), Some("yes"));
    assert_eq!(one_off.item_parameters().unwrap()[&0], "x=y");
    one_off.validate().unwrap();

    let traced = JobConfig::from_yaml(ELASTICJOB_TRACED).unwrap();
    assert!(!traced.is_one_off());
    assert_eq!(traced.job_extra_configurations.len(), 1);
    assert_eq!(traced.props["n"], "007");
    assert_eq!(traced.job_parameter.as_deref(), Some("yes"));
}

#[test]
fn absent_fields_take_documented_defaults() {
    let config = JobConfig::from_yaml("jobName: j\nshardingTotalCount: 2\n").unwrap();
    assert!(config.monitor_execution);
    assert!(config.misfire);
    assert!(!config.failover);
    assert_eq!(config.max_time_diff_seconds, -1);
    assert_eq!(config.reconcile_interval_minutes, 10);
    assert_eq!(config.sharding_strategy_type(), "AVG_ALLOCATION");
    assert_eq!(config.error_handler_type(), "LOG");
    assert_eq!(config.job_parameter, None);
    assert!(config.is_one_off());
    assert_eq!(config.item_parameters().unwrap().len(), 0);
    // Unset optional fields stay out of the output, as ElasticJob's null fields do.
    assert_eq!(
        config.to_yaml().unwrap(),
        "disabled: false\nfailover: false\njobName: j\nmaxTimeDiffSeconds: -1\nmisfire: true\n\
         monitorExecution: true\noverwrite: false\nreconcileIntervalMinutes: 10\n\
         shardingTotalCount: 2\nstaticSharding: false\n"
    );
}

#[test]
fn scalars_are_read_as_strings_where_strings_are_expected() {
    // SnakeYAML reads `jobParameter: 123` into a String property as "123"; so do we.
    let yaml = "jobName: j\nshardingTotalCount: 1\njobParameter: 123\ndescription: true\n\
                props:\n  retries: 3\n  verbose: yes\n";
    let config = JobConfig::from_yaml(yaml).unwrap();
    assert_eq!(config.job_parameter.as_deref(), Some("123"));
    assert_eq!(config.description.as_deref(), Some("true"));
    assert_eq!(config.props["retries"], "3");
    assert_eq!(config.props["verbose"], "yes");
}

#[test]
fn unknown_fields_are_kept_and_written_back() {
    let yaml = "jobExecutorThreadPoolSizeProviderType: CPU\njobName: j\nmaxWaitMillis: 12345\n\
                shardingTotalCount: 1\nzFuture:\n  nested: [1, 2]\n";
    let config = JobConfig::from_yaml(yaml).unwrap();
    assert_eq!(
        config.unknown_fields().collect::<Vec<_>>(),
        ["jobExecutorThreadPoolSizeProviderType", "maxWaitMillis", "zFuture"]
    );
    let written = config.to_yaml().unwrap();
    assert!(written.starts_with("disabled: false\nfailover: false\njobExecutorThreadPoolSizeProviderType: CPU\njobName: j\nmaxTimeDiffSeconds: -1\nmaxWaitMillis: 12345\n"), "{written}");
    assert!(
        written.ends_with("staticSharding: false\nzFuture:\n  nested:\n  - 1\n  - 2\n"),
        "{written}"
    );
    assert_eq!(JobConfig::from_yaml(&written).unwrap(), config);
}

#[test]
fn malformed_yaml_is_a_parse_error() {
    let cases = [
        ("jobName: [unclosed", "job config YAML: "),
        ("shardingTotalCount: three\n", "job config YAML: shardingTotalCount: invalid type"),
        ("jobName: a\njobName: b\n", "job config YAML: "),
        ("- a\n- b\n", "job config YAML: invalid type: sequence"),
        ("1: x\njobName: a\n", "job config YAML: top-level key"),
    ];
    for (yaml, prefix) in cases {
        let err = JobConfig::from_yaml(yaml).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{yaml:?}: {err:?}");
        assert!(err.to_string().starts_with(prefix), "{yaml:?}: {err}");
        assert_eq!(err.field(), None);
    }
}

#[test]
fn derived_durations() {
    let mut config = JobConfig::new("j", 1);
    assert_eq!(config.reconcile_interval(), Some(std::time::Duration::from_secs(600)));
    assert_eq!(config.max_time_diff(), None);
    config.reconcile_interval_minutes = 0;
    config.max_time_diff_seconds = 0;
    assert_eq!(config.reconcile_interval(), None);
    assert_eq!(config.max_time_diff(), Some(std::time::Duration::ZERO));
    config.reconcile_interval_minutes = -5;
    assert_eq!(config.reconcile_interval(), None);
    // Beyond ElasticJob's int-overflow point (35,791 minutes) the value still means what it says.
    config.reconcile_interval_minutes = 40_000;
    assert_eq!(config.reconcile_interval(), Some(std::time::Duration::from_secs(2_400_000)));
}

/// Each invalid config, with the exact message and field it produces.
#[test]
fn validation_messages() {
    let base = || JobConfig::new("job", 3);
    let with = |edit: fn(&mut JobConfig)| {
        let mut config = base();
        edit(&mut config);
        config
    };
    let cases: Vec<(JobConfig, &str, &str)> = vec![
        (with(|c| c.job_name = String::new()), "jobName", "jobName: must not be empty"),
        (
            with(|c| c.job_name = "a/b".into()),
            "jobName",
            "jobName: \"a/b\" cannot be a registry path segment: it contains '/' (the path \
             separator) at byte 1",
        ),
        (
            with(|c| c.job_name = "..".into()),
            "jobName",
            "jobName: \"..\" cannot be a registry path segment: '.' and '..' are relative path \
             segments",
        ),
        (
            with(|c| c.job_name = "tab\there".into()),
            "jobName",
            "jobName: \"tab\\there\" cannot be a registry path segment: it contains U+0009 at \
             byte 3, a control, private-use or special character that ZooKeeper rejects",
        ),
        (
            with(|c| c.job_name = "x\u{E000}".into()),
            "jobName",
            "jobName: \"x\\u{e000}\" cannot be a registry path segment: it contains U+E000 at \
             byte 1, a control, private-use or special character that ZooKeeper rejects",
        ),
        (
            with(|c| c.sharding_total_count = 0),
            "shardingTotalCount",
            "shardingTotalCount: must be at least 1, got 0",
        ),
        (
            with(|c| c.sharding_total_count = -4),
            "shardingTotalCount",
            "shardingTotalCount: must be at least 1, got -4",
        ),
        (
            with(|c| c.sharding_total_count = 1_000_001),
            "shardingTotalCount",
            "shardingTotalCount: must be at most 1000000 (each item is a registry node), got \
             1000001",
        ),
        (
            with(|c| c.sharding_item_parameters = Some("0=A,3=D".into())),
            "shardingItemParameters",
            "shardingItemParameters: pair \"3=D\" names item 3, outside 0..3 (shardingTotalCount \
             is 3)",
        ),
        (
            with(|c| c.job_sharding_strategy_type = Some("RANDOM".into())),
            "jobShardingStrategyType",
            "jobShardingStrategyType: unknown strategy \"RANDOM\"; known: AVG_ALLOCATION, \
             ODEVITY, ROUND_ROBIN (register custom strategies in KnownTypes before validating)",
        ),
        (
            with(|c| c.job_error_handler_type = Some("EMAIL".into())),
            "jobErrorHandlerType",
            "jobErrorHandlerType: unknown error handler \"EMAIL\"; known: IGNORE, LOG, THROW \
             (register custom handlers in KnownTypes before validating)",
        ),
    ];
    for (config, field, message) in cases {
        let err = config.validate().unwrap_err();
        assert_eq!(err.to_string(), message);
        assert_eq!(err.field(), Some(field), "{message}");
    }
}

#[test]
fn accepted_edge_values() {
    let mut config = JobConfig::new("订单-job_1.v2 (nightly)", 1_000_000);
    config.max_time_diff_seconds = -100;
    config.reconcile_interval_minutes = -1;
    config.job_sharding_strategy_type = Some(String::new()); // empty: the default, as in ElasticJob
    config.job_error_handler_type = Some("IGNORE".into());
    config.cron = None;
    config.validate().unwrap();
    validate_job_name("\u{1F600}").unwrap();
    validate_job_name(".hidden").unwrap();
}

#[test]
fn custom_types_validate_when_known() {
    let mut config = JobConfig::new("job", 2);
    config.job_sharding_strategy_type = Some("BY_ZONE".into());
    config.job_error_handler_type = Some("EMAIL".into());
    let known = KnownTypes::default().with_sharding_strategy("BY_ZONE").with_error_handler("EMAIL");
    config.validate_with(&known).unwrap();
}

#[test]
fn bad_cron_and_time_zone_are_rejected_with_their_field() {
    let mut config = JobConfig::new("job", 2);
    config.cron = Some("0 0 25 * * ?".into());
    let err = config.validate().unwrap_err();
    assert_eq!(err.field(), Some("cron"), "{err}");
    let message = err.to_string();
    assert!(message.starts_with("cron: \"0 0 25 * * ?\" is not a valid Quartz cron expression: "));
    assert!(message.contains("hour"), "the reason names the field: {message}");

    config.cron = Some("0/5 * * * * ?".into());
    config.time_zone = Some("Mars/Olympus".into());
    let err = config.validate().unwrap_err();
    assert_eq!(err.field(), Some("timeZone"), "{err}");
    assert!(err.to_string().contains("Mars/Olympus"), "{err}");

    // A one-off job (no cron) still gets its time zone checked.
    config.cron = None;
    assert_eq!(config.validate().unwrap_err().field(), Some("timeZone"));

    config.time_zone = Some("GMT+08:00".into());
    config.cron = Some("0 0 12 ? * WED".into());
    config.validate().unwrap();
}
