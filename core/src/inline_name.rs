//! A short name kept in place: the segments of node paths, in the caches of the runtime's view
//! and of the in-memory registry (one type for both).

use compact_str::CompactString;

/// A name: in place when short (nearly all are: `sharding`, `0`, `instance`, an instance id, a
/// job's name: up to 24 bytes), else on the heap. A heap block of its own for a few bytes took
/// some 32-40 bytes of memory per node, with the allocator's own; a name of our own kept as
/// bytes checked them for UTF-8 at every read (`PathMap::children`, 2 % of a 50-instance
/// simulated cluster's time).
#[derive(Debug, Clone)]
pub struct Name(CompactString);

impl Name {
    /// The name `name`.
    pub fn new(name: &str) -> Name {
        Name(CompactString::new(name))
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        self.0.as_str()
    }
}
