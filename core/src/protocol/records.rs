//! What the protocol's registry nodes hold, each with one parser that says what is wrong with
//! data that does not parse.
//!
//! Operators, scripts, other tools and half-finished upgrades write into registries: the
//! protocol treats every node it reads as untrusted input. A node that does not parse yields a
//! [`Garbage`] (path, shortened value, reason), never a silent default; the caller decides the
//! safe reading and reports it.

use std::fmt;

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
}

/// At most this many characters of a bad value go into a report.
const SHOWN_CHARS: usize = 48;

/// `data` as a quoted, escaped string of at most [`SHOWN_CHARS`] characters, marked when cut.
pub fn shorten(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let mut shown: String = text.chars().take(SHOWN_CHARS).collect();
    if text.chars().count() > SHOWN_CHARS {
        shown.push('…');
    }
    format!("{shown:?}")
}

/// What an instance node records of the job's last completed run on that instance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Completed {
    /// The run number (see [`super::failover`]).
    pub run: u64,
    /// The scheduled fire that run belonged to.
    pub fire_ms: i64,
}

impl Completed {
    /// Reads it from an instance node's data. A node without the fields (as ElasticJob writes
    /// it) has completed nothing that shardcron could tell: zeros. A field that is present but
    /// not a number is garbage.
    pub fn parse(path: &str, data: &[u8]) -> Result<Self, Garbage> {
        let text = std::str::from_utf8(data)
            .map_err(|_| Garbage::new(path, data, "an instance node holds UTF-8 YAML"))?;
        let field =
            |name: &str| text.lines().find_map(|line| line.strip_prefix(name)).map(str::trim);
        let run = match field("completedRun:") {
            None => 0,
            Some(v) => v
                .parse()
                .map_err(|_| Garbage::new(path, data, "completedRun is not a run number"))?,
        };
        let fire_ms = match field("completedFire:") {
            None => 0,
            Some(v) => v
                .parse()
                .map_err(|_| Garbage::new(path, data, "completedFire is not a fire time"))?,
        };
        Ok(Completed { run, fire_ms })
    }
}

/// The content of a `running` marker: which instance runs the item, for which scheduled fire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningMark {
    pub fire_ms: i64,
    /// The instance's run number of this launch; the instance node records the last completed
    /// one, which is how failover tells finished runs from interrupted ones.
    pub run: u64,
    pub instance: String,
}

impl RunningMark {
    pub fn encode(&self) -> Vec<u8> {
        self.to_string().into_bytes()
    }

    /// Reads a marker: `{fire_ms} {run} {instance}`.
    pub fn parse(path: &str, data: &[u8]) -> Result<Self, Garbage> {
        Self::decode(data).ok_or_else(|| {
            Garbage::new(path, data, "a running marker holds `{fire time} {run} {instance id}`")
        })
    }

    /// `None` for data that is not a mark (an ElasticJob instance writes its id alone).
    pub fn decode(data: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(data).ok()?;
        let mut parts = text.splitn(3, ' ');
        let fire_ms = parts.next()?.parse().ok()?;
        let run = parts.next()?.parse().ok()?;
        let instance = parts.next().filter(|i| !i.is_empty())?;
        Some(RunningMark { fire_ms, run, instance: instance.to_owned() })
    }
}

impl fmt::Display for RunningMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.fire_ms, self.run, self.instance)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_round_trip_and_reject_foreign_data() {
        let mark =
            RunningMark { fire_ms: 1_700_000_010_000, run: 3, instance: "10.0.0.1@-@7".into() };
        assert_eq!(mark.encode(), b"1700000010000 3 10.0.0.1@-@7");
        assert_eq!(RunningMark::decode(&mark.encode()), Some(mark));
        assert_eq!(RunningMark::decode(b""), None);
        assert_eq!(RunningMark::decode(b"soon 10.0.0.1"), None);
        assert_eq!(RunningMark::decode(b"1 2 "), None);
        let e = RunningMark::parse("/j/sharding/0/running", b"garbage value").unwrap_err();
        assert_eq!(e.value, "\"garbage value\"");
    }

    #[test]
    fn completed_runs_parse_strictly() {
        let p = "/j/instances/a";
        let data = b"jobInstanceId: a\nserverIp: b\ncompletedRun: 42\ncompletedFire: 17\n";
        assert_eq!(Completed::parse(p, data), Ok(Completed { run: 42, fire_ms: 17 }));
        assert_eq!(
            Completed::parse(p, b"jobInstanceId: a\nserverIp: b\n"),
            Ok(Completed::default())
        );
        let e = Completed::parse(p, b"completedRun: banana\n").unwrap_err();
        assert!(e.to_string().contains("completedRun is not a run number"), "{e}");
        assert!(Completed::parse(p, &[0xff, 0xfe]).is_err());
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
