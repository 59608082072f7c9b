//! The registry layout of a job (`docs/registry-layout.md`), shared with ElasticJob-Lite 3.x so that its
//! operators and tools recognise it:
//!
//! ```text
//! /{job}/config                         YAML job configuration
//!       /instances/{ip}@-@{pid}      E  a live instance
//!       /servers/{ip}                P  "" / ENABLED or DISABLED
//!       /sharding/{n}/instance       P  owner instance id
//!       /sharding/{n}/running        E  item n is running
//!       /sharding/{n}/misfire        P  a fire was skipped while n ran
//!       /sharding/{n}/disabled       P  item disabled by an operator
//!       /sharding/{n}/failover       E  instance executing the failed-over item
//!       /leader/election/instance    E  the leader's instance id
//!       /leader/election/latch          the election's queue
//!       /leader/sharding/necessary   P  reshard before the next fire
//!       /leader/sharding/processing  E  the leader is resharding
//!       /leader/failover/items/{n}   P  orphaned items waiting for a taker
//!       /trigger/{instance}          P  one-shot manual trigger
//!       /guarantee/{started,completed}/{n}
//!       /shardcron/ledger/{instance} P  the last scheduled fire the instance started
//!       /shardcron/assigned          P  from which fire on the assignment applies
//!       /shardcron/necessary         P  when the pending reshard was asked for
//!       /shardcron/misfire/{n}       P  the fire item n's misfire owes (blank once settled)
//!       /shardcron/failover/{n}      P  item n's queued failover: fire, rank, kind, owner
//! ```
//!
//! ElasticJob keeps `misfire`, `necessary` and the failover queue's entries empty (only their
//! existence counts); what shardcron needs to know about each is in its detail node under
//! `shardcron/` ([`Detailed`]).
//!
//! Every path is built here ([`JobPaths`]) and every watched path is classified here
//! ([`JobNode::parse`]): no module formats or string-matches registry paths by itself.

/// The paths of one job's nodes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobPaths {
    root: String,
}

impl JobPaths {
    /// The paths of job `job` (a name already validated as a path segment).
    pub fn new(job: &str) -> Self {
        let mut root = String::with_capacity(job.len() + 1);
        root.push('/');
        root.push_str(job);
        JobPaths { root }
    }

    pub fn root(&self) -> &str {
        &self.root
    }
    /// `{root}/{a}/{b}...`. Every fire builds a few dozen paths: concatenated into one
    /// allocation of the right size, not formatted.
    fn join(&self, segments: &[&str]) -> String {
        let len = self.root.len() + segments.iter().map(|s| s.len() + 1).sum::<usize>();
        let mut path = String::with_capacity(len);
        path.push_str(&self.root);
        for segment in segments {
            path.push('/');
            path.push_str(segment);
        }
        path
    }
    pub fn config(&self) -> String {
        self.join(&["config"])
    }
    pub fn instances(&self) -> String {
        self.join(&["instances"])
    }
    pub fn instance(&self, instance: &str) -> String {
        self.join(&["instances", instance])
    }
    pub fn servers(&self) -> String {
        self.join(&["servers"])
    }
    pub fn server(&self, ip: &str) -> String {
        self.join(&["servers", ip])
    }
    pub fn sharding(&self) -> String {
        self.join(&["sharding"])
    }
    pub fn item(&self, item: u32) -> String {
        self.join(&["sharding", Digits::of(item).as_str()])
    }
    pub fn item_node(&self, item: u32, node: ItemNode) -> String {
        self.join(&["sharding", Digits::of(item).as_str(), node.name()])
    }
    pub fn leader_instance(&self) -> String {
        self.join(&["leader/election/instance"])
    }
    /// The parent of the leader node. Every election also writes it (empty, as ElasticJob
    /// leaves it): its version counts the elections, where the leader node's own version starts
    /// again whenever the node is created again.
    pub fn leader_election(&self) -> String {
        self.join(&["leader/election"])
    }
    pub fn election_latch(&self) -> String {
        self.join(&["leader/election/latch"])
    }
    /// The directory of the reshard flags.
    pub fn leader_sharding(&self) -> String {
        self.join(&["leader/sharding"])
    }
    pub fn sharding_necessary(&self) -> String {
        self.join(&["leader/sharding/necessary"])
    }
    pub fn sharding_processing(&self) -> String {
        self.join(&["leader/sharding/processing"])
    }
    pub fn failover_items(&self) -> String {
        self.join(&["leader/failover/items"])
    }
    pub fn failover_item(&self, item: u32) -> String {
        self.join(&["leader/failover/items", Digits::of(item).as_str()])
    }
    pub fn triggers(&self) -> String {
        self.join(&["trigger"])
    }
    pub fn trigger(&self, instance: &str) -> String {
        self.join(&["trigger", instance])
    }
    /// Where this instance's fire ledger lives (shardcron's own bookkeeping, in a subtree
    /// ElasticJob's tools never read): the last scheduled fire it started, so that survivors can
    /// tell which fires it missed before its crash was noticed.
    pub fn ledgers(&self) -> String {
        self.join(&["shardcron/ledger"])
    }
    pub fn ledger(&self, instance: &str) -> String {
        self.join(&["shardcron/ledger", instance])
    }
    /// The raise time of the reshard that made the current assignment: fires after it run
    /// under that assignment, the ones before under the one it replaced.
    pub fn assigned(&self) -> String {
        self.join(&["shardcron/assigned"])
    }
    /// Where the detail of a node ElasticJob keeps empty lives.
    pub fn detail(&self, of: Detailed) -> String {
        match of {
            Detailed::Misfire(n) => self.join(&["shardcron/misfire", Digits::of(n).as_str()]),
            Detailed::Flag => self.join(&["shardcron/necessary"]),
            Detailed::Entry(n) => self.join(&["shardcron/failover", Digits::of(n).as_str()]),
        }
    }
    /// The node whose detail `of` is, as ElasticJob writes it (empty).
    pub fn detailed(&self, of: Detailed) -> String {
        match of {
            Detailed::Misfire(n) => self.item_node(n, ItemNode::Misfire),
            Detailed::Flag => self.sharding_necessary(),
            Detailed::Entry(n) => self.failover_item(n),
        }
    }
    /// The directories the per-item detail nodes are created in.
    pub fn detail_dirs(&self) -> [String; 2] {
        [self.join(&["shardcron/misfire"]), self.join(&["shardcron/failover"])]
    }
    pub fn guarantee(&self, stage: GuaranteeStage, item: u32) -> String {
        self.join(&["guarantee", stage.name(), Digits::of(item).as_str()])
    }
    pub fn guarantee_stage(&self, stage: GuaranteeStage) -> String {
        self.join(&["guarantee", stage.name()])
    }
}

/// An item number's decimal digits on the stack (no formatter, no allocation).
pub(crate) struct Digits {
    buf: [u8; 10],
    start: usize,
}

impl Digits {
    pub(crate) fn of(mut n: u32) -> Self {
        let mut buf = [b'0'; 10];
        let mut start = buf.len();
        loop {
            start -= 1;
            buf[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Digits { buf, start }
    }

    pub(crate) fn as_str(&self) -> &str {
        // ASCII digits only.
        std::str::from_utf8(&self.buf[self.start..]).unwrap_or("0")
    }
}

/// The per-item nodes under `sharding/{n}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ItemNode {
    Instance,
    Running,
    Misfire,
    Disabled,
    Failover,
    /// While a failover of the item is queued: the departed owner's instance id (as
    /// ElasticJob writes it; shardcron's own entry holds the rest).
    Failovering,
}

impl ItemNode {
    pub const ALL: [ItemNode; 6] = [
        ItemNode::Instance,
        ItemNode::Running,
        ItemNode::Misfire,
        ItemNode::Disabled,
        ItemNode::Failover,
        ItemNode::Failovering,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ItemNode::Instance => "instance",
            ItemNode::Running => "running",
            ItemNode::Misfire => "misfire",
            ItemNode::Disabled => "disabled",
            ItemNode::Failover => "failover",
            ItemNode::Failovering => "failovering",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        ItemNode::ALL.into_iter().find(|n| n.name() == name)
    }
}

/// The two stages of the distribute-once listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GuaranteeStage {
    Started,
    Completed,
}

impl GuaranteeStage {
    pub fn name(self) -> &'static str {
        match self {
            GuaranteeStage::Started => "started",
            GuaranteeStage::Completed => "completed",
        }
    }
}

/// A node that ElasticJob keeps empty, whose existence is all its tools read, and whose
/// detail shardcron keeps in a node of its own (`shardcron/...`), written in the same
/// transactions: the fire a misfire owes, when a reshard was asked for, and a queued
/// failover's fire, rank, kind and departed owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Detailed {
    /// `sharding/{n}/misfire`, detailed in `shardcron/misfire/{n}`.
    Misfire(u32),
    /// `leader/sharding/necessary`, detailed in `shardcron/necessary` (a node that stays:
    /// empty while no flag is raised).
    Flag,
    /// `leader/failover/items/{n}`, detailed in `shardcron/failover/{n}`.
    Entry(u32),
}

impl Detailed {
    /// The detailed node a registry path is (ElasticJob's empty node, not the detail), if it is
    /// one. Cheap on the paths it is not (every op of every transaction is asked).
    pub fn of_path(path: &str) -> Option<Detailed> {
        if !(path.ends_with("/misfire")
            || path.ends_with("/necessary")
            || path.contains("/leader/failover/items/"))
        {
            return None;
        }
        JobNode::parse(path)?.1.detailed()
    }

    /// The classified node whose detail this is.
    pub fn node(self) -> JobNode {
        match self {
            Detailed::Misfire(n) => JobNode::Item(n, ItemNode::Misfire),
            Detailed::Flag => JobNode::ShardingNecessary,
            Detailed::Entry(n) => JobNode::FailoverItem(n),
        }
    }
}

/// A classified node of a job's subtree.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum JobNode {
    Root,
    Config,
    Instance(String),
    Server(String),
    Item(u32, ItemNode),
    LeaderInstance,
    ElectionLatch,
    ShardingNecessary,
    ShardingProcessing,
    FailoverItem(u32),
    Trigger(String),
    Guarantee(GuaranteeStage, u32),
    Ledger(String),
    /// `shardcron/assigned`: the record of the last reshards.
    Assigned,
    /// The detail node of an ElasticJob node kept empty (`shardcron/necessary`,
    /// `shardcron/misfire/{n}`, `shardcron/failover/{n}`).
    Detail(Detailed),
    /// A directory node (`instances`, `sharding/3`, `leader/...`) or a node shardcron does not
    /// use; carried so that callers can ignore it explicitly.
    Other,
}

impl JobNode {
    /// The node ElasticJob keeps empty this is, whose detail shardcron keeps elsewhere.
    pub fn detailed(&self) -> Option<Detailed> {
        match self {
            JobNode::Item(n, ItemNode::Misfire) => Some(Detailed::Misfire(*n)),
            JobNode::ShardingNecessary => Some(Detailed::Flag),
            JobNode::FailoverItem(n) => Some(Detailed::Entry(*n)),
            _ => None,
        }
    }

    /// Splits a registry path into its job name and the classified node; `None` for the root.
    pub fn parse(path: &str) -> Option<(&str, JobNode)> {
        let rest = path.strip_prefix('/')?;
        let mut parts = crate::registry::path::segments(rest);
        let job = parts.next().filter(|j| !j.is_empty())?;
        // Every watch event is classified here, so no allocation: the longest exact pattern
        // below has three segments, so four say everything (a fifth only matters to `latch`'s
        // open pattern, which the first four decide).
        let mut segments = [""; 4];
        let mut len = 0;
        for segment in parts.take(segments.len()) {
            segments[len] = segment;
            len += 1;
        }
        // An item number as the layout writes it: decimal, no sign, no leading zero.
        let item = |s: &str| {
            let canonical =
                s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
            s.parse::<u32>().ok().filter(|_| canonical)
        };
        let node = match &segments[..len] {
            [] => JobNode::Root,
            ["config"] => JobNode::Config,
            ["instances", id] => JobNode::Instance((*id).to_owned()),
            ["servers", ip] => JobNode::Server((*ip).to_owned()),
            ["sharding", n, leaf] => match (item(n), ItemNode::parse(leaf)) {
                (Some(n), Some(leaf)) => JobNode::Item(n, leaf),
                _ => JobNode::Other,
            },
            ["leader", "election", "instance"] => JobNode::LeaderInstance,
            ["leader", "election", "latch", ..] => JobNode::ElectionLatch,
            ["leader", "sharding", "necessary"] => JobNode::ShardingNecessary,
            ["leader", "sharding", "processing"] => JobNode::ShardingProcessing,
            ["leader", "failover", "items", n] => {
                item(n).map_or(JobNode::Other, JobNode::FailoverItem)
            }
            ["trigger", id] => JobNode::Trigger((*id).to_owned()),
            ["shardcron", "ledger", id] => JobNode::Ledger((*id).to_owned()),
            ["shardcron", "assigned"] => JobNode::Assigned,
            ["shardcron", "necessary"] => JobNode::Detail(Detailed::Flag),
            ["shardcron", "misfire", n] => {
                item(n).map_or(JobNode::Other, |n| JobNode::Detail(Detailed::Misfire(n)))
            }
            ["shardcron", "failover", n] => {
                item(n).map_or(JobNode::Other, |n| JobNode::Detail(Detailed::Entry(n)))
            }
            ["guarantee", stage, n] => {
                let stage = match *stage {
                    "started" => Some(GuaranteeStage::Started),
                    "completed" => Some(GuaranteeStage::Completed),
                    _ => None,
                };
                match (stage, item(n)) {
                    (Some(stage), Some(n)) => JobNode::Guarantee(stage, n),
                    _ => JobNode::Other,
                }
            }
            _ => JobNode::Other,
        };
        Some((job, node))
    }
}

/// Whether `path` is one of the nodes every fire writes (an item's `running` marker, an
/// instance's ledger): what reads none of them can skip re-reading after such a write
/// ([`View::shape_revision`](crate::protocol::view::View::shape_revision)). No allocation: the
/// view asks at every change.
pub fn is_execution_record(path: &str) -> bool {
    let Some(rest) = path.strip_prefix('/') else { return false };
    let mut parts = crate::registry::path::segments(rest);
    let (Some(_job), Some(a), Some(b), Some(c), None) =
        (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    matches!((a, b, c), ("sharding", _, "running") | ("shardcron", "ledger", _))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_path_parses_back() {
        let p = JobPaths::new("billing");
        let cases = [
            (p.config(), JobNode::Config),
            (p.instance("10.0.0.1@-@42"), JobNode::Instance("10.0.0.1@-@42".into())),
            (p.server("10.0.0.1"), JobNode::Server("10.0.0.1".into())),
            (p.item_node(7, ItemNode::Running), JobNode::Item(7, ItemNode::Running)),
            (p.item_node(0, ItemNode::Failover), JobNode::Item(0, ItemNode::Failover)),
            (p.leader_instance(), JobNode::LeaderInstance),
            (p.sharding_necessary(), JobNode::ShardingNecessary),
            (p.sharding_processing(), JobNode::ShardingProcessing),
            (p.failover_item(3), JobNode::FailoverItem(3)),
            (p.trigger("i1"), JobNode::Trigger("i1".into())),
            (p.ledger("i1"), JobNode::Ledger("i1".into())),
            (p.assigned(), JobNode::Assigned),
            (p.detail(Detailed::Flag), JobNode::Detail(Detailed::Flag)),
            (p.detail(Detailed::Misfire(4)), JobNode::Detail(Detailed::Misfire(4))),
            (p.detail(Detailed::Entry(12)), JobNode::Detail(Detailed::Entry(12))),
            (
                p.guarantee(GuaranteeStage::Completed, 2),
                JobNode::Guarantee(GuaranteeStage::Completed, 2),
            ),
            (p.root().to_owned(), JobNode::Root),
        ];
        for (path, node) in cases {
            assert_eq!(JobNode::parse(&path), Some(("billing", node)), "{path}");
        }
        assert_eq!(p.instance("x"), "/billing/instances/x");
        assert_eq!(p.item_node(1, ItemNode::Instance), "/billing/sharding/1/instance");
        for of in [Detailed::Flag, Detailed::Misfire(0), Detailed::Entry(31)] {
            assert_eq!(Detailed::of_path(&p.detailed(of)), Some(of));
            assert_eq!(Detailed::of_path(&p.detail(of)), None);
        }
        assert_eq!(Detailed::of_path("/billing/sharding/1/running"), None);
        assert!(is_execution_record(&p.item_node(3, ItemNode::Running)));
        assert!(is_execution_record(&p.ledger("i1")));
        for other in [
            p.item_node(3, ItemNode::Instance),
            p.item(3),
            p.ledgers(),
            p.leader_instance(),
            p.failover_item(3),
            "/billing/sharding/3/running/x".to_owned(),
            "/".to_owned(),
        ] {
            assert!(!is_execution_record(&other), "{other}");
        }
        for n in [0, 7, 10, 99, 100, 65_535, u32::MAX] {
            assert_eq!(p.item(n), format!("/billing/sharding/{n}"));
            assert_eq!(p.failover_item(n), format!("/billing/leader/failover/items/{n}"));
        }
    }

    #[test]
    fn unknown_and_directory_nodes_are_other() {
        for path in [
            "/j/sharding/1",
            "/j/sharding/x/running",
            "/j/sharding/01/running",
            "/j/sharding/1/bogus",
            "/j/leader",
            "/j/instances",
            "/j/guarantee/late/1",
            "/j/sharding/+1/running",
            "/j/sharding/4294967296/running",
            "/j/sharding/1/running/deeper",
            "/j/config/x/y/z",
        ] {
            assert_eq!(JobNode::parse(path), Some(("j", JobNode::Other)), "{path}");
        }
        assert_eq!(
            JobNode::parse("/j/leader/election/latch/a/b"),
            Some(("j", JobNode::ElectionLatch))
        );
        assert_eq!(
            JobNode::parse("/j/sharding/0/running"),
            Some(("j", JobNode::Item(0, ItemNode::Running)))
        );
        assert_eq!(JobNode::parse("/"), None);
        assert_eq!(JobNode::parse(""), None);
    }
}
