//! Reads outside the watched scope (issue #15): each instance watches only what its jobs say
//! they need, and its view records every read of a node the watch did not cover. Such a read
//! saw a node nobody kept up to date, so any is a failure: a job that needs more must widen
//! its scope (and wait for the wider snapshot) before it reads.

use super::{context, Invariant, Violation};
use crate::trace::{Entry, Note, What};

pub fn check(entries: &[Entry], out: &mut Vec<Violation>) {
    for (idx, e) in entries.iter().enumerate() {
        if let What::Note(Note::StrayReads { count, paths }) = &e.what {
            out.push(Violation {
                invariant: Invariant::Scope,
                at: e.at,
                message: format!(
                    "instance {} read {count} nodes outside its watch's scope: {}",
                    e.who,
                    paths.join(", ")
                ),
                context: context(entries, idx, None),
            });
        }
    }
}
