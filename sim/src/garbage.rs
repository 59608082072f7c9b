//! The operator fault: garbage written into a node of a job's namespace (what operators,
//! scripts, other tools and half-finished upgrades do to a registry), and nodes a running
//! cluster needs deleted by hand.
//!
//! A [`Corruption`] names its node abstractly (item 2's owner, instance 3's server node) and is
//! resolved against the registry when it is applied: a node that does not exist then is left
//! alone (the simulator records the fault as ignored), so a write never creates a node, and
//! any subset of a schedule is still a valid schedule.

use std::fmt;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::workload::ip_of;

/// Which node of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    Config,
    /// `instances/{id}` of instance `i`.
    Instance(usize),
    /// `servers/{ip}` of instance `i`.
    Server(usize),
    /// `sharding/{n}/instance`.
    Owner(u32),
    /// `sharding/{n}/running`.
    Running(u32),
    /// `sharding/{n}/misfire`.
    Misfire(u32),
    /// `leader/election/instance`.
    Leader,
    /// `leader/sharding/necessary`.
    Flag,
    /// `leader/failover/items/{n}`.
    FailoverEntry(u32),
    /// `shardcron/ledger/{id}` of instance `i`.
    Ledger(usize),
    /// `shardcron/assigned`.
    Assigned,
}

impl Target {
    /// The node's path below the job.
    pub fn path(self) -> String {
        let id = |i: usize| format!("{}@-@1", ip_of(i));
        match self {
            Target::Config => "config".into(),
            Target::Instance(i) => format!("instances/{}", id(i)),
            Target::Server(i) => format!("servers/{}", ip_of(i)),
            Target::Owner(n) => format!("sharding/{n}/instance"),
            Target::Running(n) => format!("sharding/{n}/running"),
            Target::Misfire(n) => format!("sharding/{n}/misfire"),
            Target::Leader => "leader/election/instance".into(),
            Target::Flag => "leader/sharding/necessary".into(),
            Target::FailoverEntry(n) => format!("leader/failover/items/{n}"),
            Target::Ledger(i) => format!("shardcron/ledger/{}", id(i)),
            Target::Assigned => "shardcron/assigned".into(),
        }
    }

    /// Where shardcron keeps the detail of a node ElasticJob keeps empty.
    pub fn detail_path(self) -> Option<String> {
        match self {
            Target::Misfire(n) => Some(format!("shardcron/misfire/{n}")),
            Target::Flag => Some("shardcron/necessary".into()),
            Target::FailoverEntry(n) => Some(format!("shardcron/failover/{n}")),
            _ => None,
        }
    }

    /// The nodes a running cluster needs, which the operator fault may delete.
    fn deletable(self) -> bool {
        matches!(
            self,
            Target::Config | Target::Owner(_) | Target::Leader | Target::Flag | Target::Server(_)
        )
    }
}

/// What garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Junk {
    /// YAML of the wrong shape.
    WrongType,
    /// YAML cut off mid-way.
    Truncated,
    /// Bytes that are not text.
    Binary,
    Empty,
    /// A quarter of a megabyte.
    Huge,
    /// The valid-looking id of an instance that is not alive.
    DeadId,
}

impl Junk {
    pub const ALL: [Junk; 6] =
        [Junk::WrongType, Junk::Truncated, Junk::Binary, Junk::Empty, Junk::Huge, Junk::DeadId];

    pub fn bytes(self) -> Vec<u8> {
        match self {
            Junk::WrongType => b"[1, 2, {garbage: true}]".to_vec(),
            Junk::Truncated => b"jobName: j\nshardingTotalCount: [3,\n  cron: '0/5 * *".to_vec(),
            Junk::Binary => vec![0xff, 0xfe, 0x00, 0x9c, 0x80, 0x01, 0xc3],
            Junk::Empty => Vec::new(),
            Junk::Huge => vec![b'x'; HUGE_BYTES],
            Junk::DeadId => DEAD_ID.as_bytes().to_vec(),
        }
    }

    /// Whether `data` is one of the simulator's garbage values (the planted bug that ignores
    /// garbage hides exactly these).
    pub fn is_junk(data: &[u8]) -> bool {
        Junk::ALL.into_iter().filter(|j| *j != Junk::Empty).any(|j| j.bytes() == data)
    }
}

/// How large the huge garbage is.
const HUGE_BYTES: usize = 256 * 1024;

/// An instance id no simulated instance ever has.
pub const DEAD_ID: &str = "10.0.0.99@-@7";

/// One operator fault: garbage written into a node of `job` (`junk`), or the node deleted
/// (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corruption {
    pub job: String,
    pub target: Target,
    pub junk: Option<Junk>,
}

impl Corruption {
    /// The node's path in the namespace (`/{job}/...`), as the instances name it. Garbage in
    /// a node ElasticJob keeps empty (a misfire marker, the flag, a queue entry) goes into its
    /// detail, the node shardcron reads (whatever the empty node holds, nobody reads); a
    /// deletion deletes the node itself.
    pub fn path(&self) -> String {
        match (self.junk, self.target.detail_path()) {
            (Some(_), Some(detail)) => format!("/{}/{detail}", self.job),
            _ => format!("/{}/{}", self.job, self.target.path()),
        }
    }

    /// The node whose existence gives the garbage a reader: the detailed node, for garbage in
    /// a detail (a detail without its node is read by nobody).
    pub fn read_if(&self) -> Option<String> {
        self.target.detail_path().filter(|_| self.junk.is_some())?;
        Some(format!("/{}/{}", self.job, self.target.path()))
    }

    /// Draws a corruption of `job` (of `count` items, on a cluster of `instances`).
    pub fn generate(rng: &mut ChaCha8Rng, job: &str, count: u32, instances: usize) -> Self {
        let n = rng.gen_range(0..count.max(1));
        let i = rng.gen_range(1..=instances.max(1));
        let target = match rng.gen_range(0..100u32) {
            0..=11 => Target::Config,
            12..=21 => Target::Instance(i),
            22..=29 => Target::Server(i),
            30..=49 => Target::Owner(n),
            50..=59 => Target::Running(n),
            60..=64 => Target::Misfire(n),
            65..=74 => Target::Leader,
            75..=81 => Target::Flag,
            82..=87 => Target::FailoverEntry(n),
            88..=94 => Target::Ledger(i),
            _ => Target::Assigned,
        };
        let junk = if target.deletable() && rng.gen_bool(0.3) {
            None
        } else {
            Some(Junk::ALL[rng.gen_range(0..Junk::ALL.len())])
        };
        Corruption { job: job.to_owned(), target, junk }
    }
}

/// Prints the corruption as the Rust expression that builds it.
impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let junk = match self.junk {
            Some(j) => format!("Some(Junk::{j:?})"),
            None => "None".into(),
        };
        write!(
            f,
            "Corruption {{ job: {:?}.into(), target: Target::{:?}, junk: {junk} }}",
            self.job, self.target
        )
    }
}
