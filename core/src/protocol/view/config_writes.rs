//! Every value the watch showed for a job's config node, not only the last.
//!
//! The view keeps one value per path, and a job looks at the changes that queued up while it
//! was busy in one step, at the last of them. For the config node that loses something: a
//! config changed and then overwritten with garbage, both delivered while the job was busy (or
//! both held by a link that came back, as an etcd watch resuming from its revision delivers
//! them), shows the job only the garbage, and its leader then writes back the config it ran
//! before the change, undoing it (2 × 1 `garbage` seed 2,386,385,390). So when the watch
//! replaces the value of a config node, the view logs the value replaced, numbered, and a job
//! that finds its config unreadable looks for the last readable one it was shown and did not
//! look at yet. Only replaced values are logged: a config written once (every job's, at its
//! registration) costs nothing.

use std::collections::{BTreeMap, VecDeque};

/// How many values are kept per config node: a job looks at its config after each change it
/// is handed, so more than one or two never wait; the oldest go first.
const KEPT_PER_NODE: usize = 4;

/// The values of config nodes the watch showed and then replaced.
#[derive(Debug, Default)]
pub(super) struct ConfigWrites {
    /// The number of the last value logged (0: none yet).
    last: u64,
    by_path: BTreeMap<Box<str>, VecDeque<(u64, Vec<u8>)>>,
}

impl ConfigWrites {
    /// Logs `data` as the value of `path` the watch replaced, if `path` is a job's config node
    /// (`/{job}/config`).
    pub fn replaced(&mut self, path: &str, data: &[u8]) {
        if !is_config_node(path) {
            return;
        }
        self.last += 1;
        let values = match self.by_path.get_mut(path) {
            Some(values) => values,
            None => self.by_path.entry(path.into()).or_default(),
        };
        if values.len() == KEPT_PER_NODE {
            values.pop_front();
        }
        values.push_back((self.last, data.to_vec()));
    }

    /// The number of the last value logged, for any path.
    pub fn last(&self) -> u64 {
        self.last
    }

    /// The values of `path` logged after number `after`, oldest first.
    pub fn since(&self, path: &str, after: u64) -> impl DoubleEndedIterator<Item = &[u8]> {
        self.by_path
            .get(path)
            .into_iter()
            .flatten()
            .filter(move |(n, _)| *n > after)
            .map(|(_, data)| data.as_slice())
    }
}

/// A job's config node: `/{job}/config`.
fn is_config_node(path: &str) -> bool {
    path.strip_suffix("/config").is_some_and(|job| job.len() > 1 && job.rfind('/') == Some(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_config_nodes_are_logged() {
        let mut log = ConfigWrites::default();
        log.replaced("/j/sharding/0/running", b"x");
        log.replaced("/config", b"x");
        log.replaced("/j/config", b"a");
        assert_eq!(log.last(), 1);
        assert_eq!(log.since("/j/config", 0).collect::<Vec<_>>(), vec![b"a".as_slice()]);
    }

    #[test]
    fn values_after_a_number_come_oldest_first_and_the_oldest_go_first() {
        let mut log = ConfigWrites::default();
        for i in 0..8u8 {
            log.replaced("/j/config", &[i]);
        }
        log.replaced("/k/config", b"k");
        let after_6: Vec<&[u8]> = log.since("/j/config", 6).collect();
        assert_eq!(after_6, vec![[6u8].as_slice(), [7u8].as_slice()]);
        assert_eq!(log.since("/j/config", 0).count(), KEPT_PER_NODE);
        assert_eq!(log.since("/k/config", 8).count(), 1);
        assert_eq!(log.since("/k/config", 9).count(), 0);
    }
}
