//! The one error type of the registry contract.
//!
//! Every variant names the operation and the path it concerns, so a log line alone says what
//! failed. [`RegistryError::is_retryable`] separates transient trouble (the link, a timeout) from
//! final answers (the node is not there, the version moved on): callers retry the first kind and
//! act on the second. Nothing in shardcron swallows these errors (ElasticJob did: #2488).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Version;

/// Shorthand for results of registry operations.
pub type Result<T, E = RegistryError> = std::result::Result<T, E>;

/// The registry operation an error comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Opening the client or its session.
    Connect,
    /// Creating a node.
    Create,
    /// Reading a node.
    Get,
    /// Writing a node's data.
    Set,
    /// Deleting one node.
    Delete,
    /// Asking whether a node exists.
    Exists,
    /// Listing a node's children.
    Children,
    /// Deleting a node and everything under it.
    DeleteRecursive,
    /// An all-or-nothing transaction.
    Transaction,
    /// A version check (inside a transaction, or alone).
    Check,
    /// Subscribing to a subtree's changes.
    Watch,
    /// Taking part in a leader latch (election).
    Latch,
    /// Taking or releasing a mutex.
    Lock,
    /// Reading the registry's clock (the time-diff check).
    Time,
    /// Closing the client.
    Close,
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            Op::Connect => "connect",
            Op::Create => "create",
            Op::Get => "get",
            Op::Set => "set",
            Op::Delete => "delete",
            Op::Exists => "exists",
            Op::Children => "children",
            Op::DeleteRecursive => "delete_recursive",
            Op::Transaction => "transaction",
            Op::Check => "check",
            Op::Watch => "watch",
            Op::Latch => "latch",
            Op::Lock => "lock",
            Op::Time => "registry_time",
            Op::Close => "close",
        };
        f.write_str(name)
    }
}

/// Everything that can go wrong talking to a coordination registry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// The node (or, for a create, its parent inside a transaction) does not exist.
    #[error("{op} {path}: no such node")]
    NoNode {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
    },

    /// A create found the node already there.
    #[error("{op} {path}: node already exists")]
    NodeExists {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
    },

    /// A conditional write or check found another version: someone changed the node since it was read.
    #[error(
        "{op} {path}: version conflict, expected version {expected}; re-read the node and retry"
    )]
    BadVersion {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
        /// The version the operation was conditional on.
        expected: Version,
    },

    /// A plain delete of a node that still has children (use `delete_recursive`).
    #[error("{op} {path}: node has children; delete them first or use delete_recursive")]
    NotEmpty {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
    },

    /// A create under an ephemeral node: ephemeral nodes cannot have children.
    #[error("{op} {path}: parent is ephemeral and ephemeral nodes cannot have children")]
    EphemeralParent {
        /// The operation that failed.
        op: Op,
        /// The node that could not be created.
        path: String,
    },

    /// The path breaks the path rules (see [`crate::registry::path`]).
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// Node data above the contract's limit.
    #[error("{op} {path}: data of {size} bytes exceeds the limit of {limit} bytes")]
    DataTooLarge {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
        /// The data's size in bytes.
        size: usize,
        /// The largest size the contract allows ([`MAX_DATA_SIZE`](super::MAX_DATA_SIZE)).
        limit: usize,
    },

    /// The session that issued the operation has expired; its ephemeral nodes are gone. The client
    /// opens a new session by itself: re-register and retry.
    #[error("{op} {path}: session expired; ephemeral nodes of the old session are gone")]
    SessionExpired {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
    },

    /// The link to the registry is down; the operation may or may not have been applied.
    #[error(
        "{op} {path}: connection to the registry lost; the operation may or may not have applied"
    )]
    ConnectionLoss {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
    },

    /// The operation did not complete in time.
    #[error("{op} {path}: timed out after {after:?}")]
    Timeout {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
        /// How long the client waited.
        after: Duration,
    },

    /// Authentication or authorisation failed.
    #[error("{op} {path}: not authorised: {reason}; check the registry credentials and ACLs")]
    Auth {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
        /// What the registry said.
        reason: String,
    },

    /// One operation of a transaction failed; nothing of the transaction was applied.
    #[error("transaction op #{index} failed: {source}")]
    Transaction {
        /// The failed operation's position in the transaction, from 0.
        index: usize,
        /// Why it failed.
        #[source]
        source: Box<RegistryError>,
    },

    /// The client was closed; open a new one.
    #[error("{op} {path}: registry client is closed")]
    Closed {
        /// The operation that failed.
        op: Op,
        /// The node it concerned.
        path: String,
    },

    /// A backend-specific failure not covered above.
    #[error("{op} {path}: {backend} error: {message}")]
    Backend {
        /// The backend's name (`zookeeper`, `etcd`, `mem`).
        backend: &'static str,
        /// The operation.
        op: Op,
        /// The node's path.
        path: String,
        /// The backend's explanation.
        message: String,
        /// Whether repeating the operation later may succeed.
        retryable: bool,
        /// The backend client's own error, when there is one
        /// ([`with_source`](RegistryError::with_source)).
        #[source]
        source: Option<BackendCause>,
    },
}

/// The backend client's error behind a [`RegistryError::Backend`], kept as the error's
/// [`source`](std::error::Error::source). Two causes are equal when their messages are: the
/// registry error stays comparable.
#[derive(Clone, Debug)]
pub struct BackendCause(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl BackendCause {
    /// Wraps a backend client's error.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        BackendCause(Arc::new(error))
    }
}

impl fmt::Display for BackendCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BackendCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for BackendCause {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_string() == other.0.to_string()
    }
}

impl Eq for BackendCause {}

impl RegistryError {
    /// The same error with `cause` as the source of a [`Backend`](RegistryError::Backend)
    /// failure (other variants are returned unchanged: they say all there is).
    pub fn with_source(self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        match self {
            RegistryError::Backend { backend, op, path, message, retryable, .. } => {
                let source = Some(BackendCause::new(cause));
                RegistryError::Backend { backend, op, path, message, retryable, source }
            }
            other => other,
        }
    }

    /// Whether repeating the same operation later may succeed.
    ///
    /// Lost connections, timeouts and transient backend errors are retryable. An expired session
    /// is not: the caller must first rebuild what the session owned (its ephemeral nodes).
    pub fn is_retryable(&self) -> bool {
        match self {
            RegistryError::ConnectionLoss { .. } | RegistryError::Timeout { .. } => true,
            RegistryError::Backend { retryable, .. } => *retryable,
            RegistryError::Transaction { source, .. } => source.is_retryable(),
            _ => false,
        }
    }

    /// The path the error concerns, if any.
    pub fn path(&self) -> Option<&str> {
        match self {
            RegistryError::NoNode { path, .. }
            | RegistryError::NodeExists { path, .. }
            | RegistryError::BadVersion { path, .. }
            | RegistryError::NotEmpty { path, .. }
            | RegistryError::EphemeralParent { path, .. }
            | RegistryError::InvalidPath { path, .. }
            | RegistryError::DataTooLarge { path, .. }
            | RegistryError::SessionExpired { path, .. }
            | RegistryError::ConnectionLoss { path, .. }
            | RegistryError::Timeout { path, .. }
            | RegistryError::Auth { path, .. }
            | RegistryError::Closed { path, .. }
            | RegistryError::Backend { path, .. } => Some(path),
            RegistryError::Transaction { source, .. } => source.path(),
        }
    }

    /// For a failed transaction, the failing op's index and cause; otherwise `None`.
    pub fn transaction_failure(&self) -> Option<(usize, &RegistryError)> {
        match self {
            RegistryError::Transaction { index, source } => Some((*index, source)),
            _ => None,
        }
    }

    /// The error's kind as a stable snake-case name (`no_node`, `connection_loss`, ...), for
    /// metric labels and machine-readable output; a failed transaction is named by the failure
    /// of its failing operation. One list for every consumer, checked complete by the compiler.
    pub fn kind(&self) -> &'static str {
        match self {
            RegistryError::NoNode { .. } => "no_node",
            RegistryError::NodeExists { .. } => "node_exists",
            RegistryError::BadVersion { .. } => "bad_version",
            RegistryError::NotEmpty { .. } => "not_empty",
            RegistryError::EphemeralParent { .. } => "ephemeral_parent",
            RegistryError::InvalidPath { .. } => "invalid_path",
            RegistryError::DataTooLarge { .. } => "data_too_large",
            RegistryError::SessionExpired { .. } => "session_expired",
            RegistryError::ConnectionLoss { .. } => "connection_loss",
            RegistryError::Timeout { .. } => "timeout",
            RegistryError::Auth { .. } => "auth",
            RegistryError::Transaction { source, .. } => source.kind(),
            RegistryError::Closed { .. } => "closed",
            RegistryError::Backend { .. } => "backend",
        }
    }

    /// Convenience for `matches!(e, NoNode {..})`, the most common expected failure.
    pub fn is_no_node(&self) -> bool {
        matches!(self, RegistryError::NoNode { .. })
    }

    /// Convenience for `matches!(e, NodeExists {..})`.
    pub fn is_node_exists(&self) -> bool {
        matches!(self, RegistryError::NodeExists { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_operation_and_path() {
        let e = RegistryError::BadVersion { op: Op::Set, path: "/job/config".into(), expected: 3 };
        assert_eq!(
            e.to_string(),
            "set /job/config: version conflict, expected version 3; re-read the node and retry"
        );
        let t = RegistryError::Transaction { index: 2, source: Box::new(e) };
        assert_eq!(t.path(), Some("/job/config"));
        assert_eq!(t.transaction_failure().map(|(i, _)| i), Some(2));
        assert!(t.to_string().starts_with("transaction op #2 failed: set /job/config"));
    }

    #[test]
    fn retryable_split() {
        let loss = RegistryError::ConnectionLoss { op: Op::Get, path: "/a".into() };
        let gone = RegistryError::NoNode { op: Op::Get, path: "/a".into() };
        let expired = RegistryError::SessionExpired { op: Op::Get, path: "/a".into() };
        assert!(loss.is_retryable());
        assert!(!gone.is_retryable());
        assert!(!expired.is_retryable());
        let wrapped = RegistryError::Transaction { index: 0, source: Box::new(loss) };
        assert!(wrapped.is_retryable());
    }

    #[test]
    fn kinds_are_snake_case_and_a_transaction_takes_its_cause() {
        let gone = RegistryError::NoNode { op: Op::Get, path: "/a".into() };
        assert_eq!(gone.kind(), "no_node");
        let lost = RegistryError::ConnectionLoss { op: Op::Set, path: "/a".into() };
        assert_eq!(lost.kind(), "connection_loss");
        let wrapped = RegistryError::Transaction { index: 1, source: Box::new(lost) };
        assert_eq!(wrapped.kind(), "connection_loss");
        let backend = RegistryError::Backend {
            backend: "etcd",
            op: Op::Get,
            path: "/a".into(),
            message: "boom".into(),
            retryable: false,
            source: None,
        };
        assert_eq!(backend.kind(), "backend");
    }
}
