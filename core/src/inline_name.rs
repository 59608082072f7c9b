//! A short name kept in place: the segments of node paths, in the caches of the runtime's view
//! and of the in-memory registry (one type for both).

/// A name: in place when short (nearly all are: `sharding`, `0`, `instance`, an instance id, a
/// job's name), else on the heap. A heap block of its own for a few bytes took some 32-40 bytes
/// of memory per node, with the allocator's own.
#[derive(Debug, Clone)]
pub enum Name {
    /// Up to 22 bytes, in place.
    Short {
        /// How many of `bytes` are the name.
        len: u8,
        /// The name, then zeros.
        bytes: [u8; SHORT],
    },
    /// A longer name, on the heap.
    Long(Box<str>),
}

/// The longest name kept in place: what fits beside its length in the 24 bytes the enum takes
/// anyway.
const SHORT: usize = 22;

impl Name {
    /// The name `name`.
    pub fn new(name: &str) -> Name {
        match u8::try_from(name.len()) {
            Ok(len) if name.len() <= SHORT => {
                let mut bytes = [0; SHORT];
                bytes[..name.len()].copy_from_slice(name.as_bytes());
                Name::Short { len, bytes }
            }
            _ => Name::Long(name.into()),
        }
    }

    /// The name's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            Name::Short { len, bytes } => &bytes[..usize::from(*len)],
            Name::Long(name) => name.as_bytes(),
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        match self {
            // Made from a `&str` in `new`: always UTF-8.
            Name::Short { .. } => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            Name::Long(name) => name,
        }
    }
}
