//! What the protocol's registry nodes hold, each with one parser that says what is wrong with
//! data that does not parse.
//!
//! Operators, scripts, other tools and half-finished upgrades write into registries: the
//! protocol treats every node it reads as untrusted input. A node that does not parse yields a
//! [`Garbage`] (path, shortened value, reason), never a silent default; the caller decides the
//! safe reading and reports it.

/// A registry node whose data the protocol cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unreadable data in {path}: {reason} (found {value})")]
pub struct Garbage {
    pub path: String,
    /// The data, shortened and quoted for a log line.
    pub value: String,
    pub reason: String,
}

impl Garbage {
    pub fn new(path: &str, data: &[u8], reason: impl Into<String>) -> Self {
        Garbage { path: path.to_owned(), value: shorten(data), reason: reason.into() }
    }

    /// A node the job needs that is not there (deleted by hand): reported like garbage.
    pub fn missing(path: &str, reason: impl Into<String>) -> Self {
        Garbage { path: path.to_owned(), value: MISSING.to_owned(), reason: reason.into() }
    }
}

/// The value a report shows for a node that is missing.
pub const MISSING: &str = "(missing)";

impl Garbage {
    /// Whether this reports a missing node rather than unreadable data.
    pub fn is_missing(&self) -> bool {
        self.value == MISSING
    }
}

/// At most this many characters of a bad value go into a report.
const SHOWN_CHARS: usize = 48;

/// `data` as a quoted, escaped string of at most `SHOWN_CHARS` characters inside the quotes
/// (escapes count), marked when cut.
pub fn shorten(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let mut shown = String::new();
    let mut cut = false;
    for c in text.chars() {
        // As a string's `Debug` escapes it (a single quote needs no escape there).
        let escaped: String = if c == '\'' { c.to_string() } else { c.escape_debug().collect() };
        if shown.chars().count() + escaped.chars().count() > SHOWN_CHARS {
            cut = true;
            break;
        }
        shown.push_str(&escaped);
    }
    if cut {
        shown.push('…');
    }
    format!("\"{shown}\"")
}

/// An instance id as a node holds it (an owner node, a `running` marker, the leader node):
/// UTF-8 `{ip}@-@{pid}[@-@{suffix}]`, a valid node name, surrounding whitespace ignored.
pub fn parse_instance_id(path: &str, data: &[u8], what: &str) -> Result<String, Garbage> {
    let bad = |why: String| Garbage::new(path, data, why);
    let text = std::str::from_utf8(data).map_err(|_| bad(format!("{what} is not UTF-8 text")))?;
    let id = text.trim();
    let well_formed = id
        .split_once(crate::instance::DELIMITER)
        .is_some_and(|(ip, pid)| !ip.is_empty() && !pid.is_empty())
        && !id.chars().any(char::is_whitespace)
        && crate::registry::path::validate_segment(id).is_ok();
    if !well_formed {
        return Err(bad(format!("{what} is not an instance id ({{ip}}@-@{{pid}})")));
    }
    Ok(id.to_owned())
}

/// What an owner node (`sharding/{n}/instance`) holds: the owner's instance id, or nothing for
/// an item beyond a reduced count (the node stays, emptied, to keep its version growing).
pub fn parse_owner(path: &str, data: &[u8]) -> Result<Option<String>, Garbage> {
    if data.is_empty() {
        return Ok(None);
    }
    parse_instance_id(path, data, "the owner").map(Some)
}

/// What a server node (`servers/{ip}`) holds: empty or `ENABLED` (ElasticJob writes both),
/// or `DISABLED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerStatus {
    Enabled,
    Disabled,
}

impl ServerStatus {
    pub fn parse(path: &str, data: &[u8]) -> Result<Self, Garbage> {
        // ElasticJob compares ignoring case. Read at every step of every job: no allocation.
        match std::str::from_utf8(data).map(str::trim) {
            Ok(t) if t.is_empty() || t.eq_ignore_ascii_case("ENABLED") => Ok(ServerStatus::Enabled),
            Ok(t) if t.eq_ignore_ascii_case("DISABLED") => Ok(ServerStatus::Disabled),
            _ => Err(Garbage::new(path, data, "a server node holds ENABLED, DISABLED or nothing")),
        }
    }
}

/// What the reshard flag (`leader/sharding/necessary`) holds: the time it was raised, or
/// nothing (as ElasticJob writes it: the time is unknown, and the flag holds every fire).
/// A raise that committed late and was moved to its commit time holds both:
/// `{raised} {moved_from}` (see [`parse_flag_moved_from`]).
pub fn parse_flag(path: &str, data: &[u8]) -> Result<Option<i64>, Garbage> {
    parse_flag_times(path, data).map(|times| times.map(|(raised, _)| raised))
}

/// The time a raise first wrote, when it was moved to its commit time since (a slow link):
/// fires between the two ran under the assignment before the reshard although they came
/// after the raise (see `failover::owed_on_reshard`). `None` for a flag never moved, as
/// ElasticJob writes it, or unreadable.
pub fn parse_flag_moved_from(data: &[u8]) -> Option<i64> {
    parse_flag_times("", data).ok().flatten().and_then(|(_, from)| from)
}

/// The flag's text for a raise at `raised_ms`, moved there from `moved_from_ms` if it was.
pub fn flag_text(raised_ms: i64, moved_from_ms: Option<i64>) -> String {
    match moved_from_ms {
        Some(from) => format!("{raised_ms} {from}"),
        None => raised_ms.to_string(),
    }
}

fn parse_flag_times(path: &str, data: &[u8]) -> Result<Option<(i64, Option<i64>)>, Garbage> {
    if data.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let bad = || {
        Garbage::new(
            path,
            data,
            "the reshard flag is not a time in epoch ms (or two: raised, moved from)",
        )
    };
    let text = std::str::from_utf8(data).map_err(|_| bad())?;
    let mut fields = text.split_ascii_whitespace().map(str::parse::<i64>);
    let raised = fields.next().and_then(Result::ok).ok_or_else(bad)?;
    let from = fields.next().map(|f| f.map_err(|_| bad())).transpose()?;
    // Moved to a later time only; a third field is no flag of ours.
    if fields.next().is_some() || from.is_some_and(|f| f >= raised) {
        return Err(bad());
    }
    Ok(Some((raised, from)))
}

/// A message of at most `SHOWN_MESSAGE_CHARS` characters, marked when cut.
pub fn shorten_message(message: &str) -> String {
    if message.chars().count() <= SHOWN_MESSAGE_CHARS {
        return message.to_owned();
    }
    let mut shown: String = message.chars().take(SHOWN_MESSAGE_CHARS).collect();
    shown.push('…');
    shown
}

/// At most this many characters of a parser's message go into a report.
const SHOWN_MESSAGE_CHARS: usize = 300;

/// What an instance node holds: exactly the two fields ElasticJob writes (its YAML loader
/// rejects any other field, so shardcron keeps its own bookkeeping elsewhere).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRecord {
    pub job_instance_id: String,
    pub server_ip: String,
}

impl InstanceRecord {
    pub fn encode(&self) -> String {
        format!("jobInstanceId: {}\nserverIp: {}\n", self.job_instance_id, self.server_ip)
    }

    /// Reads `jobInstanceId: …` and `serverIp: …` lines (ElasticJob 3.0 may add `labels`).
    pub fn parse(path: &str, data: &[u8]) -> Result<Self, Garbage> {
        let bad = |why: &str| Garbage::new(path, data, why);
        let text =
            std::str::from_utf8(data).map_err(|_| bad("an instance node holds UTF-8 YAML"))?;
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.strip_prefix(name))
                .map(|v| v.trim().trim_matches(|c| c == '\'' || c == '"'))
                .filter(|v| !v.is_empty())
        };
        let job_instance_id =
            field("jobInstanceId:").ok_or_else(|| bad("jobInstanceId is missing"))?;
        let server_ip = field("serverIp:").ok_or_else(|| bad("serverIp is missing"))?;
        Ok(InstanceRecord {
            job_instance_id: job_instance_id.to_owned(),
            server_ip: server_ip.to_owned(),
        })
    }
}

/// Why an item waits in the failover queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Orphaned {
    /// Its owner vanished while running it: its `running` marker still names the owner, and the
    /// taker takes that marker over.
    Interrupted,
    /// Its owner vanished before the fire came and went unnoticed: nobody ran that fire.
    Missed,
}

/// An entry of the failover queue (`leader/failover/items/{n}`): the fire the item owes, its
/// rank among the orphans queued together (shares are dealt by it), why, and whose it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailoverEntry {
    pub fire_ms: i64,
    pub rank: u64,
    pub why: Orphaned,
    pub dead: String,
}

impl FailoverEntry {
    pub fn encode(&self) -> Vec<u8> {
        let why = match self.why {
            Orphaned::Interrupted => "interrupted",
            Orphaned::Missed => "missed",
        };
        format!("{} {} {why} {}", self.fire_ms, self.rank, self.dead).into_bytes()
    }

    /// Reads `{fire_ms} {rank} {interrupted|missed} {instance}`.
    pub fn parse(path: &str, data: &[u8]) -> Result<Self, Garbage> {
        let bad = || {
            Garbage::new(
                path,
                data,
                "a failover entry holds `{fire time} {rank} {interrupted|missed} {instance id}`",
            )
        };
        let text = std::str::from_utf8(data).map_err(|_| bad())?;
        let mut parts = text.splitn(4, ' ');
        let fire_ms = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let rank = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let why = match parts.next() {
            Some("interrupted") => Orphaned::Interrupted,
            Some("missed") => Orphaned::Missed,
            _ => return Err(bad()),
        };
        let dead = parts.next().filter(|d| !d.is_empty()).ok_or_else(bad)?.to_owned();
        Ok(FailoverEntry { fire_ms, rank, why, dead })
    }
}

/// An instance's fire ledger (`shardcron/ledger/{instance}`): the last scheduled fire it
/// started, and the fire each item it holds a `running` marker for belongs to. The instance
/// writes it in the same transactions as its markers, so the two always agree; survivors read
/// it when the instance vanished.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    pub last_fire_ms: Option<i64>,
    /// Item → fire, for every item this instance marked running and has not finished.
    pub running: std::collections::BTreeMap<u32, i64>,
}

impl Ledger {
    pub fn encode(&self) -> Vec<u8> {
        use std::fmt::Write as _;
        let mut text = self.last_fire_ms.map_or_else(|| "-".to_owned(), |f| f.to_string());
        for (item, fire) in &self.running {
            let _ = write!(text, "\n{item} {fire}");
        }
        text.into_bytes()
    }

    /// Reads a first line with the last fire (`-` for none), then `{item} {fire}` lines.
    ///
    /// An empty node is garbage, not a ledger without a mark: no instance writes one (a ledger
    /// without a mark reads `-`), and read as "no mark" it would tell the survivors of a crash
    /// that the instance had no fire to count its misses from, so a fire it then missed would
    /// be caught up by nobody (3 × 2 `garbage` seed 1,776,668,981: a ledger emptied by hand,
    /// its instance cut off and crashed before it next wrote it). As garbage it is reported,
    /// its instance rewrites it, and survivors finding it owe the latest fire due.
    pub fn parse(path: &str, data: &[u8]) -> Result<Self, Garbage> {
        let bad =
            || Garbage::new(path, data, "a ledger holds a fire time, then `{item} {fire}` lines");
        let text = std::str::from_utf8(data).map_err(|_| bad())?;
        let mut lines = text.lines();
        let last_fire_ms = match lines.next().map(str::trim) {
            None => return Err(bad()),
            Some("-") => None,
            Some(t) => Some(t.parse().map_err(|_| bad())?),
        };
        let mut running = std::collections::BTreeMap::new();
        for line in lines {
            let (item, fire) = line.split_once(' ').ok_or_else(bad)?;
            running.insert(item.parse().map_err(|_| bad())?, fire.parse().map_err(|_| bad())?);
        }
        Ok(Ledger { last_fire_ms, running })
    }
}

/// A time stored as decimal epoch milliseconds: the fire a `misfire` marker owes, the raise time
/// of the reshard flag.
pub fn parse_time(path: &str, data: &[u8], what: &str) -> Result<i64, Garbage> {
    std::str::from_utf8(data)
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| Garbage::new(path, data, format!("{what} is not a time in epoch ms")))
}

/// Who owned which item, by the reshard that made the assignment.
pub type Owners = std::collections::BTreeMap<u32, String>;

/// The record of the last reshard: from when on its assignment applies, the assignment (the
/// owner nodes, minus what a count change emptied since), and the catch-ups it owed for the
/// items it moved away from an owner that had missed a fire; then the same of the reshards
/// before it, newest first, as far back as a live instance's ledger may still count missed
/// fires (see `failover::record_assigned`): what fires before the last one's raise ran under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assigned {
    pub raised_ms: i64,
    /// When the leader committed the reshard (by its clock), if the record says: the fires
    /// after the raise that a later one overtook before then were handled `Late` by every
    /// instance that waited for it (see [`Assigned::overtaken`]). Records written before
    /// this line existed do not say.
    pub made_ms: Option<i64>,
    pub owners: Owners,
    /// item → the fire whose catch-up this reshard owed on its old owner's behalf.
    pub caught_up: std::collections::BTreeMap<u32, i64>,
    /// Instances that left since (a crash whose departure a survivor handled, a graceful
    /// stop), each with the mark of the ledger their leaving removed: the fires up to it are
    /// accounted for (started, or queued as missed); and the owners that had no ledger when
    /// this reshard gave them items, with its raise time. The departure of such an owner (its
    /// ledger gone or never written) and the reshard that moves its items away read it in the
    /// ledger's place: a fire after it, due under this assignment before that reshard's raise,
    /// ran nowhere, and is owed as a catch-up (the departure moves the mark past what it
    /// queued).
    pub departed: std::collections::BTreeMap<String, i64>,
    pub earlier: Vec<Section>,
}

/// `text.lines()`, found by a byte search: a record of 17 assignments is some 150 lines, read
/// at every change of it, and the library's search for a `char` cost more than the parsing.
fn byte_lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        // As the library: a `\r` goes only before a `\n`.
        let line = match rest.bytes().position(|b| b == b'\n') {
            Some(at) => {
                let line = &rest[..at];
                rest = &rest[at + 1..];
                line.strip_suffix('\r').unwrap_or(line)
            }
            None => std::mem::take(&mut rest),
        };
        Some(line)
    })
}

/// `text.split_once(' ')`, by a byte search (see [`byte_lines`]).
fn split_at_space(text: &str) -> Option<(&str, &str)> {
    let at = text.bytes().position(|b| b == b' ')?;
    Some((&text[..at], &text[at + 1..]))
}

/// A line of an [`Assigned`] record after its raise time.
enum Line<'a> {
    /// `previous {raised}`: an earlier reshard's lines follow.
    Previous(i64),
    /// `made {commit}`: when the reshard of the lines around it was made.
    Made(i64),
    /// `owed {item} {fire}`.
    Owed(u32, i64),
    /// `left {instance} {mark}`.
    Left(&'a str, i64),
    /// `{item} {owner}`.
    Owner(u32, &'a str),
}

/// One earlier reshard of an [`Assigned`] record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    pub raised_ms: i64,
    pub made_ms: Option<i64>,
    pub owners: Owners,
    pub caught_up: std::collections::BTreeMap<u32, i64>,
}

impl Assigned {
    /// `{raised}`, `made {commit}` (when known), then one `{item} {owner}` line per item,
    /// one `owed {item} {fire}` line per catch-up and one `left {instance} {mark}` line per
    /// instance departed since; then, for each earlier reshard, `previous {raised}` and its
    /// lines (no `left` lines: the next reshard consumed them).
    pub fn encode(&self) -> String {
        use std::fmt::Write as _;
        let mut text = self.raised_ms.to_string();
        let lines = |text: &mut String,
                     made: Option<i64>,
                     owners: &Owners,
                     owed: &std::collections::BTreeMap<u32, i64>| {
            if let Some(made) = made {
                let _ = write!(text, "\nmade {made}");
            }
            for (item, owner) in owners {
                let _ = write!(text, "\n{item} {owner}");
            }
            for (item, fire) in owed {
                let _ = write!(text, "\nowed {item} {fire}");
            }
        };
        lines(&mut text, self.made_ms, &self.owners, &self.caught_up);
        for (id, mark) in &self.departed {
            let _ = write!(text, "\nleft {id} {mark}");
        }
        for section in &self.earlier {
            let _ = write!(text, "\nprevious {}", section.raised_ms);
            lines(&mut text, section.made_ms, &section.owners, &section.caught_up);
        }
        text
    }

    /// Reads what [`Self::encode`] writes. A record nobody can read owes no catch-up: callers
    /// read garbage as no record.
    pub fn parse(path: &str, data: &[u8]) -> Result<Assigned, Garbage> {
        let mut earlier: Vec<Section> = Vec::new();
        let mut current = Section {
            raised_ms: 0,
            made_ms: None,
            owners: Owners::new(),
            caught_up: Default::default(),
        };
        let mut departed = std::collections::BTreeMap::new();
        let raised_ms = Self::scan(data, |line| {
            if let Line::Left(id, mark) = line {
                if earlier.is_empty() {
                    departed.insert(id.to_owned(), mark);
                }
                return;
            }
            if let Line::Previous(raised_ms) = line {
                earlier.push(Section {
                    raised_ms,
                    made_ms: None,
                    owners: Owners::new(),
                    caught_up: Default::default(),
                });
                return;
            }
            let section = earlier.last_mut().unwrap_or(&mut current);
            match line {
                Line::Made(made) => section.made_ms = Some(made),
                Line::Owed(item, fire) => {
                    section.caught_up.insert(item, fire);
                }
                Line::Owner(item, owner) => {
                    section.owners.insert(item, owner.to_owned());
                }
                Line::Previous(_) | Line::Left(..) => {}
            }
        })
        .ok_or_else(|| Self::garbage(path, data))?;
        Ok(Assigned {
            raised_ms,
            made_ms: current.made_ms,
            owners: current.owners,
            caught_up: current.caught_up,
            departed,
            earlier,
        })
    }

    /// The raise time of a record that reads (what [`Assigned::parse`] would give as
    /// `raised_ms`), without building it: every fire asks, and the record holds up to 16
    /// earlier assignments.
    pub fn raised_ms(path: &str, data: &[u8]) -> Result<i64, Garbage> {
        Self::scan(data, |_| {}).ok_or_else(|| Self::garbage(path, data))
    }

    fn garbage(path: &str, data: &[u8]) -> Garbage {
        Garbage::new(path, data, "the assignment record holds a time, then `{item} {owner}` lines")
    }

    /// Checks the record's lines, showing each to `line`; the raise time, or `None` for a
    /// record that does not read.
    fn scan<'a>(data: &'a [u8], mut line: impl FnMut(Line<'a>)) -> Option<i64> {
        let text = std::str::from_utf8(data).ok()?;
        let mut lines = byte_lines(text);
        let raised_ms = lines.next().and_then(|l| l.trim().parse().ok())?;
        for text in lines {
            let (head, rest) = split_at_space(text.trim())?;
            line(match head {
                "previous" => Line::Previous(rest.parse().ok()?),
                "made" => Line::Made(rest.parse().ok()?),
                "owed" => {
                    let (item, fire) = split_at_space(rest)?;
                    Line::Owed(item.parse().ok()?, fire.trim().parse().ok()?)
                }
                "left" => {
                    let (id, mark) = rest.rsplit_once(' ')?;
                    Line::Left(id.trim(), mark.trim().parse().ok()?)
                }
                item => Line::Owner(item.parse().ok()?, rest),
            });
        }
        Some(raised_ms)
    }

    /// Who the record says owned `item` for `fire_ms`: `Some(None)` for nobody (before the
    /// records), `None` when the record does not reach back that far.
    pub fn owner_at(&self, item: u32, fire_ms: i64) -> Option<Option<&str>> {
        std::iter::once((self.raised_ms, &self.owners))
            .chain(self.earlier.iter().map(|s| (s.raised_ms, &s.owners)))
            .find(|&(raised, _)| fire_ms > raised)
            .map(|(_, owners)| owners.get(&item).map(String::as_str))
    }

    /// Whether `fire_ms` was overtaken while it waited for the reshard whose assignment it
    /// falls under (`next_ms`, the schedule's next fire, came before that reshard was made),
    /// and if so that reshard's raise time. Such a fire is `Late` whoever the reshard gave
    /// its items to: no owner under it owes a run of it (a restart of the owner before, while
    /// it waited, may have run it as one of its misses). `None` when it was not, or the record
    /// does not say when the reshard was made.
    pub fn overtaken(&self, fire_ms: i64, next_ms: Option<i64>) -> Option<i64> {
        let next_ms = next_ms?;
        std::iter::once((self.raised_ms, self.made_ms))
            .chain(self.earlier.iter().map(|s| (s.raised_ms, s.made_ms)))
            .find(|&(raised, _)| fire_ms > raised)
            .and_then(|(raised, made)| (next_ms <= made?).then_some(raised))
    }

    /// Whether a reshard the record remembers owed the catch-up of `item`'s `fire_ms` (for
    /// an owner that had missed it, moving the item away).
    pub fn caught_up(&self, item: u32, fire_ms: i64) -> bool {
        std::iter::once(&self.caught_up)
            .chain(self.earlier.iter().map(|s| &s.caught_up))
            .any(|owed| owed.get(&item) == Some(&fire_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_splitting_agrees_with_the_library() {
        for text in ["", "\n", "a", "a\n", "a\r\nb", "a\rb\n\n", "1 2\n\nx y z\r", "é ü\n ", "\r"]
        {
            assert_eq!(byte_lines(text).collect::<Vec<_>>(), text.lines().collect::<Vec<_>>());
            assert_eq!(split_at_space(text), text.split_once(' '));
        }
    }

    #[test]
    fn failover_entries_round_trip_and_reject_foreign_data() {
        let entry = FailoverEntry {
            fire_ms: 1_700_000_010_000,
            rank: 3,
            why: Orphaned::Missed,
            dead: "10.0.0.1@-@7".into(),
        };
        assert_eq!(entry.encode(), b"1700000010000 3 missed 10.0.0.1@-@7");
        assert_eq!(FailoverEntry::parse("/e", &entry.encode()), Ok(entry));
        for bad in [&b""[..], b"soon 1 missed a", b"1 2 lost a", b"1 2 missed ", b"1 x missed a"] {
            assert!(FailoverEntry::parse("/e", bad).is_err(), "{bad:?}");
        }
        let e = FailoverEntry::parse("/e", b"garbage value").unwrap_err();
        assert_eq!(e.value, "\"garbage value\"");
    }

    #[test]
    fn flags_hold_a_time_or_a_moved_raise_and_nothing_else() {
        let p = "/j/shardcron/necessary";
        assert_eq!(parse_flag(p, b""), Ok(None));
        assert_eq!(parse_flag(p, b" 5000\n"), Ok(Some(5000)));
        assert_eq!(parse_flag_moved_from(b"5000"), None);
        let moved = flag_text(5700, Some(5000));
        assert_eq!(moved, "5700 5000");
        assert_eq!(parse_flag(p, moved.as_bytes()), Ok(Some(5700)));
        assert_eq!(parse_flag_moved_from(moved.as_bytes()), Some(5000));
        assert_eq!(flag_text(5700, None), "5700");
        // Moved back, three fields, or words: no flag of ours.
        for bad in [&b"5000 5700"[..], b"5700 5700", b"1 2 3", b"soon", b"5700 soon"] {
            assert!(parse_flag(p, bad).is_err(), "{bad:?}");
            assert_eq!(parse_flag_moved_from(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn instance_records_parse_strictly() {
        let p = "/j/instances/a";
        let record = InstanceRecord { job_instance_id: "a@-@1".into(), server_ip: "a".into() };
        assert_eq!(record.encode(), "jobInstanceId: a@-@1\nserverIp: a\n");
        assert_eq!(InstanceRecord::parse(p, record.encode().as_bytes()), Ok(record));
        let e = InstanceRecord::parse(p, b"completedRun: banana\n").unwrap_err();
        assert!(e.to_string().contains("jobInstanceId is missing"), "{e}");
        assert!(InstanceRecord::parse(p, &[0xff, 0xfe]).is_err());
    }

    #[test]
    fn ledgers_round_trip() {
        let ledger = Ledger { last_fire_ms: Some(5000), running: [(0, 5000), (7, 3000)].into() };
        assert_eq!(ledger.encode(), b"5000\n0 5000\n7 3000");
        assert_eq!(Ledger::parse("/l", &ledger.encode()), Ok(ledger));
        assert_eq!(Ledger::parse("/l", b"-"), Ok(Ledger::default()));
        assert!(Ledger::parse("/l", b"x").is_err());
        // No instance writes an empty ledger: emptied by hand, it is garbage, not "no mark".
        assert!(Ledger::parse("/l", b"").is_err());
        assert!(Ledger::parse("/l", b"1\n2").is_err());
    }

    #[test]
    fn long_values_are_shortened() {
        let long = vec![b'x'; 500];
        let shown = shorten(&long);
        assert!(shown.chars().count() < 60, "{shown}");
        assert!(shown.contains('…'));
        assert_eq!(parse_time("/f", b" 12 ", "the flag"), Ok(12));
        assert!(parse_time("/f", b"", "the flag").is_err());
    }
}
