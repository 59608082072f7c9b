//! Conversions between ZooKeeper's node model and the contract's.

use shardcron_core::registry::MAX_DATA_SIZE;
use shardcron_core::registry::{path, CreateMode, Node, Op, RegistryError, Result, Version};
use zookeeper_client as zk;

/// The contract's node from ZooKeeper's data and stat.
///
/// The namespace node itself (`/` to the client) is shown with empty data at version 0 whatever
/// ZooKeeper holds: the contract's root is read-only, and this backend writes that node only to
/// read the server's clock ([`crate::ZkRegistry`]'s `registry_time`), which must not look like
/// a change.
pub(crate) fn node(at: &str, data: Vec<u8>, stat: &zk::Stat) -> Node {
    if at == path::ROOT {
        return Node { data: Vec::new(), version: 0, ephemeral: false };
    }
    Node { data, version: version_from_zk(stat.version), ephemeral: stat.ephemeral_owner != 0 }
}

/// ZooKeeper's data version is a signed 32-bit counter that wraps after 2³¹ sets; read as
/// unsigned it keeps growing for 2³² sets, which is what the contract's "+1 per set" needs.
pub(crate) fn version_from_zk(version: i32) -> Version {
    Version::from(version as u32)
}

/// The version ZooKeeper compares with; `None` when no ZooKeeper node can have it.
pub(crate) fn version_to_zk(version: Version) -> Option<i32> {
    u32::try_from(version).ok().map(|v| v as i32)
}

/// `Some(zk version)` for an expected version, `None` for "any"; fails with `BadVersion` before
/// any I/O for versions no ZooKeeper node can reach.
pub(crate) fn expected(op: Op, at: &str, expected: Option<Version>) -> Result<Option<i32>> {
    match expected {
        None => Ok(None),
        Some(v) => match version_to_zk(v) {
            Some(zv) => Ok(Some(zv)),
            None => Err(RegistryError::BadVersion { op, path: at.to_owned(), expected: v }),
        },
    }
}

pub(crate) fn mode(mode: CreateMode) -> zk::CreateMode {
    match mode {
        CreateMode::Persistent => zk::CreateMode::Persistent,
        CreateMode::Ephemeral => zk::CreateMode::Ephemeral,
        CreateMode::PersistentSequential => zk::CreateMode::PersistentSequential,
        CreateMode::EphemeralSequential => zk::CreateMode::EphemeralSequential,
    }
}

/// The path a create made: for sequential modes, the requested path plus ZooKeeper's 10-digit
/// zero-padded counter.
pub(crate) fn created_path(
    requested: &str,
    mode: CreateMode,
    sequence: zk::CreateSequence,
) -> String {
    if mode.is_sequential() {
        format!("{requested}{sequence}")
    } else {
        requested.to_owned()
    }
}

/// The contract's size limit, checked before any I/O.
pub(crate) fn check_size(op: Op, at: &str, data: &[u8]) -> Result<()> {
    if data.len() > MAX_DATA_SIZE {
        return Err(RegistryError::DataTooLarge {
            op,
            path: at.to_owned(),
            size: data.len(),
            limit: MAX_DATA_SIZE,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_past_the_signed_range() {
        assert_eq!(version_from_zk(0), 0);
        assert_eq!(version_from_zk(i32::MAX), 2_147_483_647);
        assert_eq!(version_from_zk(i32::MIN), 2_147_483_648, "wrapped counter keeps growing");
        assert_eq!(version_to_zk(2_147_483_648), Some(i32::MIN));
        assert_eq!(version_to_zk(u64::from(u32::MAX) + 1), None);
        assert!(matches!(
            expected(Op::Set, "/a", Some(1 << 40)),
            Err(RegistryError::BadVersion { .. })
        ));
        assert_eq!(expected(Op::Set, "/a", None).ok(), Some(None));
    }
}
