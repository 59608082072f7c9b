//! ZooKeeper's errors mapped onto the contract's [`RegistryError`].
//!
//! Every ZooKeeper error code lands somewhere typed: the ones the contract names map to their
//! variant, the rest become `Backend { retryable, source: None }` with ZooKeeper's own wording, so nothing is
//! swallowed and callers can still tell "try again" from "give up".

use std::time::Duration;

use shardcron_core::registry::{Op, RegistryError, Version};
use zookeeper_client as zk;

pub(crate) const BACKEND: &str = "zookeeper";

/// Where an error happened, for the fields every variant carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At<'a> {
    pub op: Op,
    pub path: &'a str,
    /// The version a conditional op expected, for `BadVersion`.
    pub expected: Option<Version>,
}

impl<'a> At<'a> {
    pub fn new(op: Op, path: &'a str) -> Self {
        At { op, path, expected: None }
    }

    pub fn expecting(mut self, expected: Option<Version>) -> Self {
        self.expected = expected;
        self
    }
}

/// Maps one ZooKeeper error; a `Backend` error keeps the client's error as its source.
pub(crate) fn map(err: zk::Error, at: At<'_>) -> RegistryError {
    map_kind(err.clone(), at).with_source(err)
}

fn map_kind(err: zk::Error, at: At<'_>) -> RegistryError {
    let op = at.op;
    let path = at.path.to_owned();
    let backend = |message: String, retryable: bool| RegistryError::Backend {
        backend: BACKEND,
        op,
        path: path.clone(),
        message,
        retryable,
        source: None,
    };
    match err {
        zk::Error::NoNode => RegistryError::NoNode { op, path },
        zk::Error::NodeExists => RegistryError::NodeExists { op, path },
        // ZooKeeper does not say which version it found; the contract reports the one expected.
        zk::Error::BadVersion => {
            RegistryError::BadVersion { op, path, expected: at.expected.unwrap_or_default() }
        }
        zk::Error::NotEmpty => RegistryError::NotEmpty { op, path },
        zk::Error::NoChildrenForEphemerals => RegistryError::EphemeralParent { op, path },
        zk::Error::NoAuth => RegistryError::Auth {
            op,
            path,
            reason: "the node's ACL does not grant this operation to this client's credentials"
                .into(),
        },
        zk::Error::AuthFailed => {
            RegistryError::Auth { op, path, reason: "the server rejected the credentials".into() }
        }
        zk::Error::SessionExpired => RegistryError::SessionExpired { op, path },
        // The session moved to another server under us, or its client was dropped while a
        // new session replaces it: the operation may be retried on the current session.
        // The client fails the requests in flight with the error that broke their connection:
        // an I/O error or "no response from connection in ..." (`Custom`).
        zk::Error::ConnectionLoss
        | zk::Error::SessionMoved
        | zk::Error::ClientClosed
        | zk::Error::Custom(_) => RegistryError::ConnectionLoss { op, path },
        zk::Error::Throttled | zk::Error::NotReadOnly | zk::Error::NoHosts => {
            backend(err.to_string(), true)
        }
        // The client's own timeout (connecting): a later attempt may get through.
        zk::Error::Timeout => backend("timed out inside the ZooKeeper client".into(), true),
        other => backend(other.to_string(), false),
    }
}

/// The contract's timeout error.
pub(crate) fn timeout(op: Op, path: &str, after: Duration) -> RegistryError {
    RegistryError::Timeout { op, path: path.to_owned(), after }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_contract_error_has_its_variant() {
        let at = At::new(Op::Set, "/a").expecting(Some(4));
        assert!(matches!(map(zk::Error::NoNode, at), RegistryError::NoNode { .. }));
        assert!(matches!(map(zk::Error::NodeExists, at), RegistryError::NodeExists { .. }));
        assert!(matches!(
            map(zk::Error::BadVersion, at),
            RegistryError::BadVersion { expected: 4, .. }
        ));
        assert!(matches!(map(zk::Error::NotEmpty, at), RegistryError::NotEmpty { .. }));
        assert!(matches!(
            map(zk::Error::NoChildrenForEphemerals, at),
            RegistryError::EphemeralParent { .. }
        ));
        assert!(matches!(map(zk::Error::NoAuth, at), RegistryError::Auth { .. }));
        assert!(matches!(map(zk::Error::SessionExpired, at), RegistryError::SessionExpired { .. }));
        let loss = map(zk::Error::ConnectionLoss, at);
        assert!(matches!(loss, RegistryError::ConnectionLoss { .. }) && loss.is_retryable());
    }

    #[test]
    fn the_rest_is_backend_with_a_retry_hint() {
        let at = At::new(Op::Create, "/a");
        let throttled = map(zk::Error::Throttled, at);
        assert!(matches!(throttled, RegistryError::Backend { retryable: true, .. }), "{throttled}");
        let quota = map(zk::Error::QuotaExceeded, at);
        assert!(matches!(quota, RegistryError::Backend { retryable: false, .. }), "{quota}");
        assert!(quota.to_string().contains("zookeeper error"), "{quota}");
        // The client's own error stays reachable as the source.
        let source = std::error::Error::source(&quota).map(ToString::to_string);
        assert_eq!(source, Some(zk::Error::QuotaExceeded.to_string()));
    }
}
