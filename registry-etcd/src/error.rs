//! Mapping etcd and gRPC failures onto the contract's [`RegistryError`].
//!
//! The rule: a failure the caller can act on gets its own variant (the link is down:
//! `ConnectionLoss`; too slow: `Timeout`; credentials: `Auth`; our lease is gone:
//! `SessionExpired`), everything else becomes `Backend` with an honest `retryable` flag. Nothing
//! is swallowed.

use std::time::Duration;

use etcd_client::Error as EtcdError;
use shardcron_core::registry::{Op, RegistryError};
use tonic::Code;

/// The backend name in messages and `Backend` errors.
pub(crate) const BACKEND: &str = "etcd";

/// Maps an etcd client error of `op` on client path `path`; a `Backend` error keeps the client's
/// error as its source.
pub(crate) fn map(err: EtcdError, op: Op, path: &str) -> RegistryError {
    let mapped = map_kind(&err, op, path.to_owned());
    mapped.with_source(err)
}

fn map_kind(err: &EtcdError, op: Op, path: String) -> RegistryError {
    match err {
        EtcdError::GRpcStatus(status) => map_status(status, op, path),
        // The channel could not reach any endpoint (refused, reset, TLS handshake on a dead link).
        EtcdError::TransportError(e) => {
            let message = full_message(e);
            if looks_like_tls(&message) {
                backend(op, path, format!("TLS handshake failed: {message}"), false)
            } else {
                RegistryError::ConnectionLoss { op, path }
            }
        }
        EtcdError::IoError(_) => RegistryError::ConnectionLoss { op, path },
        // The keep-alive stream reports a vanished lease this way.
        EtcdError::LeaseKeepAliveError(m) if m.contains("lease not found") => {
            RegistryError::SessionExpired { op, path }
        }
        EtcdError::LeaseKeepAliveError(_) | EtcdError::WatchError(_) => {
            RegistryError::ConnectionLoss { op, path }
        }
        EtcdError::InvalidArgs(m) => backend(op, path, format!("invalid arguments: {m}"), false),
        EtcdError::InvalidUri(e) => backend(op, path, format!("invalid endpoint URI: {e}"), false),
        EtcdError::EndpointError(m) => backend(op, path, format!("endpoint: {m}"), false),
        other => backend(op, path, other.to_string(), false),
    }
}

fn map_status(status: &tonic::Status, op: Op, path: String) -> RegistryError {
    let message = status.message();
    // etcd's own error strings are stable (`etcdserver: ...`, `rpc error: ...`); match the
    // meaning, not the gRPC code alone, because etcd reuses codes (InvalidArgument covers both
    // a wrong password and a bad request).
    if message.contains("authentication failed") || message.contains("invalid user ID or password")
    {
        return RegistryError::Auth {
            op,
            path,
            reason: "etcd rejected the user name or password".into(),
        };
    }
    if message.contains("permission denied") {
        return RegistryError::Auth {
            op,
            path,
            reason: format!("{message}: the user's roles do not cover this namespace's keys"),
        };
    }
    if message.contains("user name is empty")
        || message.contains("user name not found")
        || message.contains("invalid auth token")
    {
        return RegistryError::Auth {
            op,
            path,
            reason: format!(
                "etcd has authentication enabled and refused the request ({message}); \
                 give a user and password"
            ),
        };
    }
    if message.contains("requested lease not found") || message.contains("lease not found") {
        return RegistryError::SessionExpired { op, path };
    }
    if message.contains("request is too large") {
        return backend(
            op,
            path,
            format!(
                "{message}: raise the server's --max-request-bytes above 1.1 MiB \
                 (see the crate README)"
            ),
            false,
        );
    }
    if message.contains("too many operations in txn request") {
        return backend(
            op,
            path,
            format!("{message}: raise the server's --max-txn-ops or split the transaction"),
            false,
        );
    }
    if status.code() == Code::Unavailable {
        // tonic reports a failed TLS handshake as "unavailable"; retrying will not fix a
        // certificate, so say what it is.
        let detail = full_message(status);
        if looks_like_tls(&detail) {
            let shown = if looks_like_tls(message) { message.to_owned() } else { detail };
            return backend(op, path, format!("TLS handshake failed: {shown}"), false);
        }
        tracing::debug!(%op, %path, %detail, "etcd unavailable");
    }
    match status.code() {
        Code::Unauthenticated | Code::PermissionDenied => {
            RegistryError::Auth { op, path, reason: message.to_owned() }
        }
        Code::Unavailable | Code::Cancelled | Code::Aborted => {
            RegistryError::ConnectionLoss { op, path }
        }
        Code::DeadlineExceeded => RegistryError::Timeout { op, path, after: Duration::ZERO },
        // A transient server condition: no leader, too many requests, compaction under a read.
        Code::ResourceExhausted | Code::Unknown | Code::Internal => {
            backend(op, path, message.to_owned(), true)
        }
        Code::OutOfRange | Code::FailedPrecondition => backend(op, path, message.to_owned(), true),
        _ => backend(op, path, format!("{:?}: {message}", status.code()), false),
    }
}

/// A `Txn` of `compares` compares and `writes` writes that the server refused as larger than
/// its `--max-txn-ops`: the error says how large it was and what to raise the limit to. `None`
/// for any other error.
pub(crate) fn txn_too_large(
    err: &EtcdError,
    op: Op,
    path: &str,
    compares: usize,
    writes: usize,
) -> Option<RegistryError> {
    let EtcdError::GRpcStatus(status) = err else { return None };
    if !status.message().contains("too many operations in txn request") {
        return None;
    }
    let needed = compares.max(writes);
    let message = format!(
        "{}: this transaction needs {compares} compares and {writes} writes in one etcd Txn, \
         more than the server's --max-txn-ops allows (etcd's default is 128); restart etcd with \
         --max-txn-ops of at least {needed}. shardcron nests many writes and guards many reads \
         by subtree, but a transaction that reads more than about 120 ephemeral nodes or \
         writes more than some 4,000 keys does not fit: see \"Transaction size\" in the \
         shardcron-registry-etcd README",
        status.message()
    );
    Some(backend(op, path.to_owned(), message, false))
}

/// Whether an etcd error means the revision asked for was compacted away.
pub(crate) fn is_compacted(err: &EtcdError) -> bool {
    matches!(err, EtcdError::GRpcStatus(s) if s.message().contains("compacted"))
}

/// Whether an etcd error means the lease named in the request no longer exists.
pub(crate) fn is_lease_gone(err: &EtcdError) -> bool {
    match err {
        EtcdError::GRpcStatus(s) => s.message().contains("lease not found"),
        EtcdError::LeaseKeepAliveError(m) => m.contains("lease not found"),
        _ => false,
    }
}

pub(crate) fn backend(op: Op, path: String, message: String, retryable: bool) -> RegistryError {
    RegistryError::Backend { backend: BACKEND, op, path, message, retryable, source: None }
}

/// An error and its chain of sources, for messages.
pub(crate) fn full_message(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

fn looks_like_tls(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("certificate") || m.contains("handshake") || m.contains("tls")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: Code, message: &str) -> EtcdError {
        EtcdError::GRpcStatus(tonic::Status::new(code, message))
    }

    #[test]
    fn meanings_win_over_codes() {
        let e = map(
            status(
                Code::InvalidArgument,
                "etcdserver: authentication failed, invalid user ID or password",
            ),
            Op::Connect,
            "",
        );
        assert!(matches!(e, RegistryError::Auth { .. }), "{e}");
        let e =
            map(status(Code::NotFound, "etcdserver: requested lease not found"), Op::Create, "/e");
        assert!(matches!(e, RegistryError::SessionExpired { .. }), "{e}");
        let e = map(status(Code::Unavailable, "etcdserver: leader changed"), Op::Get, "/a");
        assert!(matches!(e, RegistryError::ConnectionLoss { .. }), "{e}");
        let e =
            map(status(Code::InvalidArgument, "etcdserver: request is too large"), Op::Set, "/a");
        assert!(e.to_string().contains("--max-request-bytes"), "{e}");
        assert!(!e.is_retryable());
        assert!(is_compacted(&status(
            Code::OutOfRange,
            "etcdserver: mvcc: required revision has been compacted"
        )));
    }
}
