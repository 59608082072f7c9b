//! The virtual-time helper drives a user's job for 60 virtual seconds; `connect("mem:")` under
//! a paused clock says why it cannot and what to use instead.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use shardcron::config::JobConfig;
use shardcron::job::Job;
use shardcron::runtime::FireKind;
use shardcron::testing::{start_time, virtual_scheduler};
use shardcron::ConnectError;

#[tokio::test(start_paused = true)]
async fn a_job_runs_every_fire_of_a_virtual_minute() -> Result<(), Box<dyn std::error::Error>> {
    let test = virtual_scheduler().await?;
    let settled = Arc::new(AtomicU32::new(0));
    let counter = settled.clone();
    let config = JobConfig::builder("settle")
        .cron("0/10 * * * * ?")
        .sharding_total_count(4)
        .sharding_item_parameters("0=A,1=B,2=C,3=D")
        .build()?;
    test.scheduler
        .add_job(
            config,
            Job::from_fn(move |ctx| {
                let counter = counter.clone();
                async move {
                    tokio::time::sleep(Duration::from_millis(1_500)).await;
                    if ctx.item_parameter.is_empty() {
                        return Err("no region".into());
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                }
            }),
        )
        .await?;

    let wall = std::time::Instant::now();
    test.advance(Duration::from_secs(60)).await;
    assert_eq!(test.now(), start_time() + Duration::from_secs(60));
    assert!(wall.elapsed() < Duration::from_secs(30), "virtual time does not wait");

    // Fires at 10, 20, ..., 60 s; the one at 60 s has just started.
    let runs = test.runs("settle");
    let since_start = |r: &shardcron::testing::ItemRun| {
        r.fire_time.duration_since(start_time()).map_or(0, |d| d.as_secs())
    };
    let fires: Vec<u64> = runs.iter().map(since_start).collect();
    assert_eq!(fires.iter().filter(|&&f| f == 10).count(), 4, "{fires:?}");
    assert_eq!(runs.len(), 24, "6 fires of 4 items: {fires:?}");
    assert!(runs.iter().all(|r| r.kind == FireKind::Scheduled));
    assert_eq!(runs.iter().filter(|r| r.ok == Some(true)).count(), 20);
    assert_eq!(settled.load(Ordering::SeqCst), 20);
    assert!(runs.iter().all(|r| r.started == r.fire_time), "fires start on time");

    test.advance(Duration::from_secs(2)).await;
    assert_eq!(test.runs("settle").iter().filter(|r| r.ok == Some(true)).count(), 24);
    test.scheduler.shutdown(Duration::from_secs(60)).await?;
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn mem_under_a_paused_clock_says_what_to_use_instead() {
    match shardcron::connect("mem:").await {
        Err(e @ ConnectError::PausedClock) => {
            let text = e.to_string();
            assert!(text.contains("paused"), "{text}");
            assert!(text.contains("shardcron::testing::virtual_scheduler"), "{text}");
        }
        Err(e) => panic!("expected PausedClock, got {e}"),
        Ok(_) => panic!("mem: on a paused clock must be refused: no job would ever fire"),
    }
}

#[tokio::test]
async fn mem_on_a_running_clock_still_connects() -> Result<(), ConnectError> {
    shardcron::connect("mem:/app").await?;
    Ok(())
}
