//! What one item of one fire knows about itself: [`ShardingContext`], [`FireInfo`], [`TaskId`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Extensions, JobError};
use crate::config::{ConfigError, JobConfig};

/// The separator ElasticJob uses inside task ids and instance ids.
const SEP: &str = "@-@";

/// Why a fire happens. Shown in the [`TaskId`] and handed to listeners.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ExecutionSource {
    /// A scheduled fire from the cron.
    Normal,
    /// The catch-up run of a fire that was skipped because items were still running.
    Misfire,
    /// Items of a crashed instance, taken over by this one.
    Failover,
    /// An operator's trigger (`trigger/{instance}`) or a one-off job's run.
    Manual,
}

impl ExecutionSource {
    /// Every source, in declaration order.
    pub const ALL: [ExecutionSource; 4] =
        [Self::Normal, Self::Misfire, Self::Failover, Self::Manual];

    /// The execution type written in a [`TaskId`]: `READY` (ElasticJob's name for a normal
    /// fire), `MISFIRE`, `FAILOVER` or `MANUAL`.
    pub fn task_type(self) -> &'static str {
        match self {
            Self::Normal => "READY",
            Self::Misfire => "MISFIRE",
            Self::Failover => "FAILOVER",
            Self::Manual => "MANUAL",
        }
    }

    /// The source whose [`task_type`](Self::task_type) is `task_type`.
    pub fn from_task_type(task_type: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|source| source.task_type() == task_type)
    }
}

impl fmt::Display for ExecutionSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.task_type())
    }
}

/// One fire of a job on this instance: what listeners see and what task ids are made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FireInfo {
    /// The job's name.
    pub job_name: String,
    /// This instance's id (`{ip}@-@{pid}`, plus a suffix in the simulator).
    pub instance: String,
    /// The scheduled fire time; the same on every instance for one fire (whole milliseconds:
    /// the registry and the task id count epoch milliseconds).
    pub fire_time: SystemTime,
    /// Why the job fires.
    pub source: ExecutionSource,
    /// The items this instance runs in this fire, ascending.
    pub items: Vec<u32>,
}

/// Epoch milliseconds as a [`SystemTime`] (times before 1970 included).
pub(crate) fn epoch_ms_to_system_time(ms: i64) -> SystemTime {
    let offset = Duration::from_millis(ms.unsigned_abs());
    if ms >= 0 {
        UNIX_EPOCH + offset
    } else {
        UNIX_EPOCH - offset
    }
}

/// A [`SystemTime`] in epoch milliseconds, rounded towards the past (the registry's unit);
/// saturates at the ends of `i64`, some 292 million years away.
pub(crate) fn system_time_to_epoch_ms(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => {
            let before = before.duration();
            // Round towards the past: 1.5 ms before the epoch is -2 ms.
            let whole = i64::try_from(before.as_millis()).unwrap_or(i64::MAX);
            let partial = before.as_nanos() % 1_000_000 != 0;
            whole.saturating_neg().saturating_sub(i64::from(partial))
        }
    }
}

impl FireInfo {
    /// The scheduled fire time in epoch milliseconds, as the registry and task ids count it.
    pub(crate) fn fire_time_ms(&self) -> i64 {
        system_time_to_epoch_ms(self.fire_time)
    }

    /// The text of [`task_id`](Self::task_id), without the copies of its parts.
    pub(crate) fn task_id_text(&self) -> String {
        let ascending = self.items.windows(2).all(|pair| pair[0] < pair[1]);
        if !ascending {
            return self.task_id().to_string();
        }
        let mut text = String::with_capacity(
            self.job_name.len() + self.instance.len() + 48 + 4 * self.items.len(),
        );
        // Writing to a String cannot fail.
        let _ = write_task_id(
            &mut text,
            &self.job_name,
            &self.items,
            self.source,
            &self.instance,
            self.fire_time_ms(),
        );
        text
    }

    /// The task id every item of this fire carries; see [`TaskId`].
    pub fn task_id(&self) -> TaskId {
        let mut items = self.items.clone();
        items.sort_unstable();
        items.dedup();
        TaskId {
            job_name: self.job_name.clone(),
            items,
            source: self.source,
            instance: self.instance.clone(),
            fire_time: self.fire_time,
        }
    }

    /// One context per item of this fire, with the job and item parameters of `config`, fencing
    /// token 0 and fresh cancellation tokens (the runtime then sets both with
    /// [`ShardingContext::with_fencing`]).
    ///
    /// Fails when `config`'s `shardingTotalCount` or `shardingItemParameters` is invalid; a
    /// validated config never fails.
    pub fn contexts(&self, config: &JobConfig) -> Result<Vec<ShardingContext>, ConfigError> {
        let parameters = config.item_parameters()?;
        // item_parameters() succeeded, so the count is at least 1 and fits a u32.
        let total = u32::try_from(config.sharding_total_count).unwrap_or(0);
        let job_parameter = config.job_parameter.as_deref().unwrap_or("");
        let task_id = self.task_id();
        let task_id_text = task_id.to_string();
        Ok(task_id
            .items
            .into_iter()
            .map(|item| {
                let item_parameter = parameters.get(&item).map(String::as_str).unwrap_or("");
                ShardingContext::with_task_id(
                    self,
                    task_id_text.clone(),
                    total,
                    job_parameter,
                    item,
                    item_parameter,
                    CancellationToken::new(),
                )
            })
            .collect())
    }
}

/// What a job's code gets for one item of one fire.
///
/// Its JSON form (the last argument of a script job) keeps ElasticJob's field names, so scripts
/// written for ElasticJob read it unchanged, and adds shardcron's fire time and fencing token:
///
/// ```json
/// {"jobName":"orders","taskId":"orders@-@0,1@-@READY@-@10.0.0.1@-@42@-@1700000000000",
///  "shardingTotalCount":3,"jobParameter":"p","shardingItem":1,"shardingParameter":"B",
///  "fireTimeMs":1700000000000,"fencingToken":7}
/// ```
///
/// The cancellation token is not part of it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ShardingContext {
    /// The job's name.
    pub job_name: String,
    /// The fire's task id (the same for every item of one fire on one instance); see [`TaskId`].
    pub task_id: String,
    /// `shardingTotalCount` of the job's config.
    pub sharding_total_count: u32,
    /// `jobParameter` of the job's config; empty when unset.
    pub job_parameter: String,
    /// The item, in `0..sharding_total_count`. ElasticJob's `shardingItem`.
    #[serde(rename = "shardingItem")]
    pub item: u32,
    /// The item's entry in `shardingItemParameters`; empty when none. ElasticJob's
    /// `shardingParameter`.
    #[serde(rename = "shardingParameter")]
    pub item_parameter: String,
    /// The scheduled fire time in epoch milliseconds; read it with
    /// [`fire_time`](Self::fire_time). Kept as milliseconds because that is the JSON field
    /// (`fireTimeMs`) script jobs receive.
    pub(crate) fire_time_ms: i64,
    /// Grows every time the item changes owner (it is the version of the item's owner node in
    /// the registry, which every reshard commit and every failover claim advances).
    ///
    /// # Making writes safe
    ///
    /// An instance cut off from the registry hears nothing from it; its registry client reports
    /// the session lost at its local lease deadline (the session timeout less a margin, counted
    /// from its last renewal the server answered), before the server can expire the session and
    /// a survivor take the item over, and the cancellation signal below fires then. It cannot
    /// stop a write already on its way, nor one made by a process that was frozen (a long GC
    /// pause, SIGSTOP) past its deadline and runs on for a moment before it notices. A job whose writes must never come
    /// from a replaced owner passes the token to the system it writes to, which keeps the highest
    /// token seen per item and refuses anything older:
    ///
    /// ```text
    /// UPDATE ledger SET balance = $new, fence = $token
    ///  WHERE shard = $item AND fence <= $token        -- 0 rows: we were replaced, stop
    /// ```
    ///
    /// Tokens of one item only grow, across reshards, failovers, count changes and restarts.
    pub fencing_token: u64,
    /// Fires when this instance may have lost the item: its session was lost (a client cut off
    /// from the registry reports that at its local lease deadline, before the server can expire
    /// the session) or expired, an operator shut the instance down, or a graceful stop reached
    /// its deadline. Long-running jobs should check it
    /// and stop early; a job that returns an error after it fired is reported as cancelled, not
    /// failed, and its item is taken over elsewhere.
    #[serde(skip)]
    pub cancellation: CancellationToken,
    /// The application's shared state ([`extension`](Self::extension)).
    #[serde(skip)]
    pub(crate) extensions: Extensions,
}

impl ShardingContext {
    /// The context of `item` in `fire`, with fencing token 0 and a fresh cancellation token.
    pub fn new(
        fire: &FireInfo,
        sharding_total_count: u32,
        job_parameter: impl Into<String>,
        item: u32,
        item_parameter: impl Into<String>,
    ) -> Self {
        let task_id = fire.task_id_text();
        let cancellation = CancellationToken::new();
        let total = sharding_total_count;
        Self::with_task_id(fire, task_id, total, job_parameter, item, item_parameter, cancellation)
    }

    /// The context of `item` in `fire`, whose task id is `task_id` (the text of
    /// [`FireInfo::task_id`], put together once for every item of the fire), cancelled by
    /// `cancellation`.
    pub(crate) fn with_task_id(
        fire: &FireInfo,
        task_id: String,
        sharding_total_count: u32,
        job_parameter: impl Into<String>,
        item: u32,
        item_parameter: impl Into<String>,
        cancellation: CancellationToken,
    ) -> Self {
        ShardingContext {
            job_name: fire.job_name.clone(),
            task_id,
            sharding_total_count,
            job_parameter: job_parameter.into(),
            item,
            item_parameter: item_parameter.into(),
            fire_time_ms: fire.fire_time_ms(),
            fencing_token: 0,
            cancellation,
            extensions: Extensions::default(),
        }
    }

    /// The scheduled fire time (the same on every instance for one fire).
    pub fn fire_time(&self) -> SystemTime {
        epoch_ms_to_system_time(self.fire_time_ms)
    }

    /// The application's value of type `T`, registered with
    /// [`SchedulerBuilder::extension`](crate::runtime::SchedulerBuilder::extension).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use shardcron_core::job::Job;
    ///
    /// struct Pool { url: String }
    /// let job = Job::from_fn(|ctx| async move {
    ///     let pool = ctx.extension::<Arc<Pool>>().ok_or("no pool registered")?;
    ///     println!("item {} writes to {}", ctx.item, pool.url);
    ///     Ok(())
    /// });
    /// // SchedulerBuilder::new(registry).extension(Arc::new(Pool { url: "...".into() }))
    /// # let _ = job;
    /// ```
    pub fn extension<T: Send + Sync + 'static>(&self) -> Option<&T> {
        self.extensions.get::<T>()
    }

    /// Every value the application registered.
    pub fn extensions(&self) -> &Extensions {
        &self.extensions
    }

    /// The same context with `extensions` (what the executor does before running an item).
    pub fn with_extensions(mut self, extensions: Extensions) -> Self {
        self.extensions = extensions;
        self
    }

    /// Sets the item's fencing token and the token that cancels it.
    pub fn with_fencing(mut self, fencing_token: u64, cancellation: CancellationToken) -> Self {
        self.fencing_token = fencing_token;
        self.cancellation = cancellation;
        self
    }

    /// True once the runtime asked this item to stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }

    /// The context as JSON (the form script jobs receive).
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        serde_json::to_string(self)
    }
}

/// A task id: which fire of which job ran which items where.
///
/// Format: `{job}@-@{items}@-@{type}@-@{instance}@-@{fire_ms}`, e.g.
/// `orders@-@0,2@-@READY@-@10.0.0.1@-@4242@-@1700000000000`: items ascending and
/// comma-separated, `type` one of [`ExecutionSource::task_type`], the instance id (itself
/// `{ip}@-@{pid}`), and the scheduled fire time in epoch milliseconds. Up to the instance this is
/// ElasticJob-Lite's task id (`{job}@-@{items}@-@READY@-@{ip}@-@{pid}`), so log searches that
/// work there work here; the fire time makes it unique per fire.
///
/// ```
/// use shardcron_core::job::{ExecutionSource, TaskId};
/// let id: TaskId = "orders@-@0,2@-@FAILOVER@-@10.0.0.1@-@4242@-@1700000000000".parse()?;
/// assert_eq!(id.items, [0, 2]);
/// assert_eq!(id.source, ExecutionSource::Failover);
/// assert_eq!(id.instance, "10.0.0.1@-@4242");
/// assert_eq!(id.to_string(), "orders@-@0,2@-@FAILOVER@-@10.0.0.1@-@4242@-@1700000000000");
/// # Ok::<(), shardcron_core::job::JobError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskId {
    /// The job's name.
    pub job_name: String,
    /// The items of the fire on this instance, ascending.
    pub items: Vec<u32>,
    /// Why the job fired.
    pub source: ExecutionSource,
    /// The instance id.
    pub instance: String,
    /// The scheduled fire time (written in the id as epoch milliseconds).
    pub fire_time: SystemTime,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_task_id(
            f,
            &self.job_name,
            &self.items,
            self.source,
            &self.instance,
            system_time_to_epoch_ms(self.fire_time),
        )
    }
}

/// Writes a task id from its parts, `items` as given. Every item of every fire carries one, so
/// it is put together a piece at a time: `write!` with its format machinery cost more than the
/// rest of an item's context.
fn write_task_id(
    out: &mut impl fmt::Write,
    job_name: &str,
    items: &[u32],
    source: ExecutionSource,
    instance: &str,
    fire_ms: i64,
) -> fmt::Result {
    out.write_str(job_name)?;
    out.write_str(SEP)?;
    for (index, &item) in items.iter().enumerate() {
        if index > 0 {
            out.write_str(",")?;
        }
        out.write_str(Decimal::new(i64::from(item)).as_str())?;
    }
    out.write_str(SEP)?;
    out.write_str(source.task_type())?;
    out.write_str(SEP)?;
    out.write_str(instance)?;
    out.write_str(SEP)?;
    out.write_str(Decimal::new(fire_ms).as_str())
}

/// An integer in decimal, on the stack.
pub(super) struct Decimal {
    /// Enough for `i64::MIN`: a sign and 19 digits.
    buf: [u8; 20],
    start: usize,
}

impl Decimal {
    pub(super) fn new(value: i64) -> Self {
        let mut buf = [0u8; 20];
        let mut start = buf.len();
        let mut rest = value.unsigned_abs();
        loop {
            start -= 1;
            buf[start] = b'0' + (rest % 10) as u8;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        if value < 0 {
            start -= 1;
            buf[start] = b'-';
        }
        Decimal { buf, start }
    }

    pub(super) fn as_str(&self) -> &str {
        // Only ASCII digits and '-' were written.
        std::str::from_utf8(&self.buf[self.start..]).unwrap_or("")
    }
}

impl FromStr for TaskId {
    type Err = JobError;

    /// Parses the format above. Job names and instance ids may themselves contain `@-@`; the
    /// job name ends at the first `@-@{items}@-@{type}@-@` that follows it.
    fn from_str(text: &str) -> Result<Self, JobError> {
        let invalid = |reason: &str| JobError::InvalidTaskId {
            task_id: text.to_string(),
            reason: reason.to_string(),
        };
        let parts: Vec<&str> = text.split(SEP).collect();
        let (fire, head) = parts.split_last().ok_or_else(|| invalid("it is empty"))?;
        let fire_time_ms = fire
            .parse::<i64>()
            .map_err(|_| invalid("the last part is not a fire time in epoch milliseconds"))?;
        // Find the items and type parts: the first position after a non-empty job name where an
        // items list is followed by a known type and at least one instance part.
        let split = (1..head.len().saturating_sub(2))
            .find_map(|at| {
                if at == 1 && head[0].is_empty() {
                    return None; // an empty job name
                }
                let items = parse_items(head[at])?;
                let source = ExecutionSource::from_task_type(head[at + 1])?;
                Some((at, items, source))
            })
            .ok_or_else(|| {
                invalid(
                    "expected {job}@-@{items}@-@{READY|MISFIRE|FAILOVER|MANUAL}@-@{instance}@-@{fire_ms} \
                     with items ascending and comma-separated",
                )
            })?;
        let (at, items, source) = split;
        Ok(TaskId {
            job_name: head[..at].join(SEP),
            items,
            source,
            instance: head[at + 2..].join(SEP),
            fire_time: epoch_ms_to_system_time(fire_time_ms),
        })
    }
}

/// `0,1,5` → `[0, 1, 5]`, `` → `[]`; `None` unless a strictly ascending list of numbers.
fn parse_items(text: &str) -> Option<Vec<u32>> {
    if text.is_empty() {
        return Some(Vec::new());
    }
    let items: Vec<u32> =
        text.split(',').map(|item| item.parse::<u32>().ok()).collect::<Option<_>>()?;
    items.windows(2).all(|pair| pair[0] < pair[1]).then_some(items)
}
