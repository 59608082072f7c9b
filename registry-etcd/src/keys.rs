//! How the registry's tree of nodes is laid out on etcd's flat, sorted keyspace.
//!
//! Four key families live under the namespace prefix `{ns}` (`/demo` for namespace `demo`, empty
//! without one). For a node `/a/b`:
//!
//! | family | key | value | why |
//! |---|---|---|---|
//! | node | `{ns}/n/a/b/` | [`encode_value`]: contract version + data; lease = owning session | the subtree of `/a` is exactly the prefix `{ns}/n/a/`, so a subtree watch and a snapshot are one prefix range, and `/ab` (which does not start with `/a/`) stays out |
//! | child index | `{ns}/c/a//b` | empty; same lease as the node | the direct children of `/a` are exactly the prefix `{ns}/c/a//`: valid paths never contain `//`, so grandchildren (`{ns}/c/a/b//c`) cannot match. `children` is one range read of direct children, whatever the subtree's size |
//! | sequence counter | `{ns}/s/a/` | next sequence number of `/a`'s sequential children, decimal | updated in the same etcd transaction as the create, so numbers are contiguous |
//! | child version | `{ns}/v/a/` | empty | written (its `mod_revision` moves) by every transaction of this crate that creates or deletes a child of `/a`: ZooKeeper's `cversion`. A delete leaves no trace in a range of node keys; this key does, so one compare over the prefix `{ns}/v/a/` sees a child created or deleted anywhere below `/a` since a revision (the guards of a large transaction, `crate::txn`). Not written for a session's ephemeral nodes that its lease's expiry removes: those are guarded one by one |
//!
//! The families nest the same way the tree does: everything belonging to the subtree of `/a` is
//! the node prefix `{ns}/n/a/`, the index prefix `{ns}/c/a/` plus the index key of `/a` itself,
//! the counter prefix `{ns}/s/a/` and the child-version prefix `{ns}/v/a/`. A recursive delete is
//! therefore five range deletes and a write of the parent's child version in one etcd
//! transaction, whatever the subtree's size (etcd counts a range delete as one op of its
//! `--max-txn-ops`, default 128). A node deleted on its own leaves its child version behind (one
//! empty key, for nodes that had children; a later node of that path takes it over, and a
//! recursive delete above removes it): deleting it would cost every delete of the hot path (the
//! end of an item's run) one more etcd op.
//!
//! The root `/` is implicit: it always exists, has no key, version 0 and empty data.
//!
//! Why the contract version lives in the value rather than in etcd's own key version: etcd
//! refuses a transaction that writes one key twice, so a contract transaction that creates a node
//! and then sets it (version 1, which the contract requires) can only issue one etcd put, which
//! etcd would count as version 1 of the key, i.e. contract version 0. Keeping the version in the
//! value makes every contract transaction exact. Ephemerality is the key's lease (non-zero).

use shardcron_core::registry::{path, Version};

/// Width of the sequence suffix (ZooKeeper's `%010d`).
pub(crate) const SEQ_WIDTH: usize = 10;

/// Format tag of stored node values; bump it if the layout ever changes.
const VALUE_FORMAT: u8 = 1;

/// Bytes of the value header: format tag and big-endian contract version.
const HEADER_LEN: usize = 9;

/// The key layout of one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeySpace {
    /// `""` or `/seg[/seg..]`, never with a trailing slash.
    ns: String,
}

impl KeySpace {
    /// `namespace` as ElasticJob spells it (`demo`) or as a path (`/demo`, `/` for none).
    pub fn new(namespace: Option<&str>) -> Result<Self, shardcron_core::registry::RegistryError> {
        let ns = match namespace {
            None => String::new(),
            Some(ns) => {
                let ns = if ns.starts_with('/') { ns.to_owned() } else { format!("/{ns}") };
                path::validate(&ns)?;
                if ns == path::ROOT {
                    String::new()
                } else {
                    ns
                }
            }
        };
        Ok(KeySpace { ns })
    }

    /// The namespace prefix (empty for none), as shown in messages.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// The key of node `path` (not the root).
    pub fn node(&self, path: &str) -> Vec<u8> {
        format!("{}/n{path}/", self.ns).into_bytes()
    }

    /// The prefix of every node key in the subtree at `path` (the root included).
    pub fn subtree(&self, path: &str) -> Vec<u8> {
        if path == path::ROOT {
            format!("{}/n/", self.ns).into_bytes()
        } else {
            self.node(path)
        }
    }

    /// The client path of a node key of this namespace.
    pub fn path_of(&self, key: &[u8]) -> Option<String> {
        let key = std::str::from_utf8(key).ok()?;
        let rest = key.strip_prefix(self.ns.as_str())?.strip_prefix("/n")?;
        let path = rest.strip_suffix('/')?;
        path.starts_with('/').then(|| path.to_owned())
    }

    /// The child-index key of node `path` (not the root).
    pub fn index(&self, path: &str) -> Vec<u8> {
        let parent = path::parent(path).unwrap_or(path::ROOT);
        format!("{}//{}", self.index_base(parent), path::name(path)).into_bytes()
    }

    /// The prefix of the index keys of `path`'s direct children.
    pub fn children(&self, path: &str) -> Vec<u8> {
        format!("{}//", self.index_base(path)).into_bytes()
    }

    /// The prefix of the index keys of every descendant of `path` (not `path` itself).
    pub fn index_below(&self, path: &str) -> Vec<u8> {
        format!("{}/", self.index_base(path)).into_bytes()
    }

    /// `{ns}/c` followed by `path`, with the root as the empty string.
    fn index_base(&self, path: &str) -> String {
        let path = if path == path::ROOT { "" } else { path };
        format!("{}/c{path}", self.ns)
    }

    /// The child name an index key (from [`children`](Self::children) of `parent`) stands for.
    pub fn child_name<'k>(&self, parent: &str, key: &'k [u8]) -> Option<&'k str> {
        let prefix = self.children(parent);
        std::str::from_utf8(key.strip_prefix(prefix.as_slice())?).ok()
    }

    /// The child-version key of `path` (the root's too).
    pub fn cversion(&self, path: &str) -> Vec<u8> {
        self.cversions_below(path)
    }

    /// The prefix of the child-version keys of `path` and every node below it.
    pub fn cversions_below(&self, path: &str) -> Vec<u8> {
        self.per_node("v", path)
    }

    /// The key of `parent`'s sequence counter.
    pub fn counter(&self, parent: &str) -> Vec<u8> {
        self.counters_below(parent)
    }

    /// The prefix of the counters of `path` and every node below it.
    pub fn counters_below(&self, path: &str) -> Vec<u8> {
        self.per_node("s", path)
    }

    /// `path`'s key in a family that has one per node, the root's included (`{ns}/{family}/`
    /// for the root): also the prefix of the keys of every node below it.
    fn per_node(&self, family: &str, path: &str) -> Vec<u8> {
        let path = if path == path::ROOT { "" } else { path };
        format!("{}/{family}{path}/", self.ns).into_bytes()
    }
}

/// A node's stored value: format tag, contract version, data.
pub(crate) fn encode_value(version: Version, data: &[u8]) -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER_LEN + data.len());
    value.push(VALUE_FORMAT);
    value.extend_from_slice(&version.to_be_bytes());
    value.extend_from_slice(data);
    value
}

/// Splits a stored value into contract version and data; `None` if it is not ours.
pub(crate) fn decode_value(value: &[u8]) -> Option<(Version, &[u8])> {
    if value.len() < HEADER_LEN || value[0] != VALUE_FORMAT {
        return None;
    }
    let mut version = [0u8; 8];
    version.copy_from_slice(&value[1..HEADER_LEN]);
    Some((Version::from_be_bytes(version), &value[HEADER_LEN..]))
}

/// The sequence counter stored at a counter key (0 when absent or unreadable: a counter is only
/// ever written by this crate, and starting over at 0 is what a fresh parent does anyway).
pub(crate) fn decode_counter(value: &[u8]) -> u64 {
    std::str::from_utf8(value).ok().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// `path` with sequence number `seq` appended.
pub(crate) fn sequential_name(path: &str, seq: u64) -> String {
    format!("{path}{seq:0width$}", width = SEQ_WIDTH)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ks() -> KeySpace {
        KeySpace::new(Some("demo")).unwrap()
    }

    fn s(key: Vec<u8>) -> String {
        String::from_utf8(key).unwrap()
    }

    #[test]
    fn node_keys_make_subtrees_prefixes() {
        let k = ks();
        assert_eq!(s(k.node("/a/b")), "/demo/n/a/b/");
        assert_eq!(s(k.subtree("/a")), "/demo/n/a/");
        assert_eq!(s(k.subtree("/")), "/demo/n/");
        assert!(k.node("/a/b").starts_with(&k.subtree("/a")));
        assert!(k.node("/a").starts_with(&k.subtree("/a")));
        assert!(!k.node("/ab").starts_with(&k.subtree("/a")), "a sibling sharing a prefix");
        assert_eq!(k.path_of(&k.node("/a/b")).as_deref(), Some("/a/b"));
        assert_eq!(k.path_of(b"/other/n/a/"), None);
    }

    #[test]
    fn index_prefix_holds_only_direct_children() {
        let k = ks();
        assert_eq!(s(k.index("/a")), "/demo/c//a");
        assert_eq!(s(k.index("/a/b")), "/demo/c/a//b");
        assert_eq!(s(k.children("/")), "/demo/c//");
        assert_eq!(s(k.children("/a")), "/demo/c/a//");
        assert!(k.index("/a/b").starts_with(&k.children("/a")));
        assert!(!k.index("/a/b/c").starts_with(&k.children("/a")), "grandchild");
        assert!(!k.index("/a").starts_with(&k.children("/a")), "itself");
        assert!(!k.index("/ab/c").starts_with(&k.children("/a")));
        assert!(k.index("/a/b/c").starts_with(&k.index_below("/a")));
        assert!(!k.index("/ab/c").starts_with(&k.index_below("/a")));
        assert!(!k.index("/a").starts_with(&k.index_below("/a")));
        assert_eq!(k.child_name("/a", &k.index("/a/b")), Some("b"));
    }

    #[test]
    fn counters_nest_like_the_tree() {
        let k = ks();
        assert_eq!(s(k.counter("/")), "/demo/s/");
        assert_eq!(s(k.counter("/a")), "/demo/s/a/");
        assert!(k.counter("/a/b").starts_with(&k.counters_below("/a")));
        assert!(!k.counter("/ab").starts_with(&k.counters_below("/a")));
    }

    #[test]
    fn child_versions_nest_like_the_tree() {
        let k = ks();
        assert_eq!(s(k.cversion("/")), "/demo/v/");
        assert_eq!(s(k.cversion("/a")), "/demo/v/a/");
        assert!(k.cversion("/a").starts_with(&k.cversions_below("/a")));
        assert!(k.cversion("/a/b").starts_with(&k.cversions_below("/a")));
        assert!(!k.cversion("/ab").starts_with(&k.cversions_below("/a")));
        assert!(!k.cversion("/a").starts_with(&k.subtree("/")), "outside the node family");
    }

    #[test]
    fn namespaces() {
        assert_eq!(KeySpace::new(None).unwrap().namespace(), "");
        assert_eq!(KeySpace::new(Some("/")).unwrap().namespace(), "");
        assert_eq!(KeySpace::new(Some("/x/y")).unwrap().namespace(), "/x/y");
        assert!(KeySpace::new(Some("a//b")).is_err());
        assert_eq!(s(KeySpace::new(None).unwrap().node("/a")), "/n/a/");
    }

    #[test]
    fn values_round_trip() {
        let v = encode_value(7, b"data");
        assert_eq!(decode_value(&v), Some((7, &b"data"[..])));
        assert_eq!(decode_value(&encode_value(0, b"")), Some((0, &b""[..])));
        assert_eq!(decode_value(b"plain"), None);
        assert_eq!(decode_counter(b"42"), 42);
        assert_eq!(decode_counter(b""), 0);
        assert_eq!(sequential_name("/q/x-", 5), "/q/x-0000000005");
    }
}
