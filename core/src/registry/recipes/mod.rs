//! Leader latch and mutex built on the registry contract itself, for backends without a native
//! election API.
//!
//! Both are the classic queue of ephemeral-sequential nodes under one directory: the node with the
//! lowest sequence number is at the head. Each node's name starts with its owner's id, so a client
//! whose create was cut off by a lost connection finds the node it may have created instead of
//! leaving an orphan that would block the queue until its session ends (Curator's "protected"
//! mode solves the same problem with a GUID). Owner ids must therefore be unique per directory.
//!
//! Waiting is driven by the subtree watch and the session stream: no polling.

mod latch;
mod mutex;
mod queue;

pub use latch::SequentialLatch;
pub use mutex::SequentialMutex;
