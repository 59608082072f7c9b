//! Subtree watches as etcd prefix watches that resume from the last seen revision.
//!
//! `watch(path)` reads the subtree (the node-key prefix, see [`crate::keys`]) at a revision `R`,
//! hands the snapshot out as the opening `Resync`, and starts a task that watches the prefix from
//! `R + 1`. Since etcd delivers every revision after `R` in order, the stream is exact: each
//! change after the snapshot arrives once.
//!
//! When the etcd stream breaks (server restart, link loss) the task re-opens it from the
//! revision after the last one it delivered, so nothing is lost or repeated. If etcd compacted
//! that revision away in the meantime, the history is gone: the task reads a fresh snapshot and
//! sends a `Resync` instead. It also resyncs after the client's session expired, as the contract
//! asks (no event is lost then either, but subscribers use the resync to rebuild what depended
//! on the old session).

use std::collections::BTreeMap;

use etcd_client::{EventType, GetOptions, KvClient, WatchClient, WatchOptions};
use shardcron_core::registry::{Node, Op, RegistryError, SessionEvent, WatchEvent};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;

use crate::error::{self, map};
use crate::keys::{decode_value, KeySpace};
use crate::session::RETRY_PAUSE;

/// Keys per page when reading a snapshot (values are up to 1 MiB each).
const PAGE: i64 = 128;

/// Reads the subtree at `path` as client paths and nodes; returns it with its revision.
pub(crate) async fn snapshot(
    kv: &KvClient,
    keys: &KeySpace,
    path: &str,
) -> Result<(i64, BTreeMap<String, Node>), RegistryError> {
    let prefix = keys.subtree(path);
    let end = prefix_end(&prefix);
    let mut nodes = BTreeMap::new();
    let mut rev = 0;
    let mut from = prefix.clone();
    loop {
        let mut client = kv.clone();
        let options = GetOptions::new().with_range(end.clone()).with_limit(PAGE).with_revision(rev);
        let resp =
            client.get(from.clone(), Some(options)).await.map_err(|e| map(e, Op::Watch, path))?;
        if rev == 0 {
            rev = resp.header().map_or(0, |h| h.revision());
        }
        for kv in resp.kvs() {
            if let Some((p, node)) = node_of(keys, kv.key(), kv.value(), kv.lease()) {
                nodes.insert(p, node);
            }
        }
        match resp.kvs().last() {
            Some(last) if resp.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => return Ok((rev, nodes)),
        }
    }
}

/// A stored key and value as a client path and node; `None` (logged) for anything not ours.
fn node_of(keys: &KeySpace, key: &[u8], value: &[u8], lease: i64) -> Option<(String, Node)> {
    let path = keys.path_of(key);
    let decoded = decode_value(value);
    match (path, decoded) {
        (Some(path), Some((version, data))) => {
            Some((path, Node { data: data.to_vec(), version, ephemeral: lease != 0 }))
        }
        _ => {
            tracing::error!(key = %String::from_utf8_lossy(key), "etcd: skipping a key that is not a shardcron node");
            None
        }
    }
}

/// The first key after every key starting with `prefix`.
pub(crate) fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// What the watch task works with.
pub(crate) struct WatchTask {
    pub kv: KvClient,
    pub watch: WatchClient,
    pub keys: KeySpace,
    pub path: String,
    pub tx: UnboundedSender<WatchEvent>,
    pub session: UnboundedReceiver<SessionEvent>,
    pub shutdown: watch::Receiver<bool>,
    /// The first revision not yet delivered.
    pub next_rev: i64,
    /// How long a snapshot read or the opening of a stream may take before it is tried
    /// again (the client's operation timeout): a call stuck on a connection that died
    /// silently would otherwise leave the subscribers' view behind for good.
    pub timeout: std::time::Duration,
}

/// Why one etcd watch stream ended.
enum Break {
    /// Re-open from `next_rev` (stream broken or cancelled).
    Reopen,
    /// History lost or the session expired: send a fresh snapshot first.
    Resync,
    /// The subscriber or the client is gone.
    Stop,
}

impl WatchTask {
    pub async fn run(mut self) {
        let mut resync = false;
        loop {
            if resync {
                let read = snapshot(&self.kv, &self.keys, &self.path);
                let read = tokio::time::timeout(self.timeout, read).await.unwrap_or_else(|_| {
                    Err(RegistryError::Timeout {
                        op: Op::Watch,
                        path: self.path.clone(),
                        after: self.timeout,
                    })
                });
                match read {
                    Ok((rev, nodes)) => {
                        if self.tx.send(WatchEvent::Resync { nodes }).is_err() {
                            return;
                        }
                        self.next_rev = rev + 1;
                        resync = false;
                    }
                    Err(e) => {
                        tracing::debug!(path = %self.path, error = %e, "etcd watch: resync failed; retrying");
                        if self.pause().await {
                            return;
                        }
                        continue;
                    }
                }
            }
            match self.stream().await {
                Break::Stop => return,
                Break::Resync => resync = true,
                Break::Reopen => {
                    if self.pause().await {
                        return;
                    }
                }
            }
        }
    }

    /// Waits a little before retrying; true if the task should end instead.
    async fn pause(&mut self) -> bool {
        tokio::select! {
            biased;
            changed = self.shutdown.changed() => changed.is_err() || *self.shutdown.borrow(),
            () = self.tx.closed() => true,
            () = tokio::time::sleep(RETRY_PAUSE) => false,
        }
    }

    /// Runs one etcd watch stream from `next_rev` until it breaks.
    async fn stream(&mut self) -> Break {
        let prefix = self.keys.subtree(&self.path);
        // Progress notifications move `next_rev` on while the subtree is quiet, so that a
        // re-open after a long quiet spell does not ask for history compacted meanwhile.
        let options = WatchOptions::new()
            .with_prefix()
            .with_progress_notify()
            .with_start_revision(self.next_rev);
        let mut client = self.watch.clone();
        let opened = tokio::select! {
            biased;
            _ = self.shutdown.changed() => return Break::Stop,
            () = self.tx.closed() => return Break::Stop,
            opened = tokio::time::timeout(self.timeout, client.watch(prefix, Some(options))) => opened,
        };
        let mut stream = match opened {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                tracing::debug!(path = %self.path, error = %e, "etcd watch: cannot open; retrying");
                return Break::Reopen;
            }
            Err(_) => {
                tracing::warn!(path = %self.path, after = ?self.timeout, "etcd watch: no answer to opening the stream; retrying");
                return Break::Reopen;
            }
        };
        loop {
            let message = tokio::select! {
                biased;
                changed = self.shutdown.changed() => {
                    if changed.is_err() || *self.shutdown.borrow() { return Break::Stop }
                    continue;
                }
                () = self.tx.closed() => return Break::Stop,
                ev = self.session.recv() => match ev {
                    Some(SessionEvent::Expired) => return Break::Resync,
                    Some(SessionEvent::Closed) | None => return Break::Stop,
                    Some(_) => continue,
                },
                message = stream.message() => message,
            };
            let resp = match message {
                Ok(Some(resp)) => resp,
                Ok(None) => return Break::Reopen,
                Err(e) if error::is_compacted(&e) => return Break::Resync,
                Err(e) => {
                    tracing::debug!(path = %self.path, error = %e, "etcd watch stream broke; resuming");
                    return Break::Reopen;
                }
            };
            if resp.compact_revision() > 0 {
                tracing::info!(
                    path = %self.path,
                    wanted = self.next_rev,
                    compacted = resp.compact_revision(),
                    "etcd watch: history compacted; resyncing"
                );
                return Break::Resync;
            }
            if resp.canceled() {
                tracing::debug!(path = %self.path, reason = resp.cancel_reason(), "etcd watch cancelled; re-opening");
                return Break::Reopen;
            }
            let mut last = None;
            for event in resp.events() {
                let Some(kv) = event.kv() else { continue };
                last = Some(kv.mod_revision());
                let out = match event.event_type() {
                    EventType::Delete => match self.keys.path_of(kv.key()) {
                        Some(path) => WatchEvent::Deleted { path },
                        None => continue,
                    },
                    EventType::Put => {
                        let Some((path, node)) =
                            node_of(&self.keys, kv.key(), kv.value(), kv.lease())
                        else {
                            continue;
                        };
                        // etcd counts puts since the key's creation: 1 means this put created it.
                        if kv.version() == 1 {
                            WatchEvent::Created { path, node }
                        } else {
                            WatchEvent::Changed { path, node }
                        }
                    }
                };
                if self.tx.send(out).is_err() {
                    return Break::Stop;
                }
            }
            // A response holds whole revisions (no fragmenting requested), so resuming after the
            // last one delivered neither loses nor repeats an event.
            if let Some(rev) = last {
                self.next_rev = rev + 1;
            } else if !resp.created() {
                // A progress notification: etcd sends those only to watchers that have caught
                // up, so everything up to the header's revision has been delivered. (The header
                // of the `created` answer is the store's revision, which a watcher starting in
                // the past has not caught up with yet.)
                if let Some(rev) = resp.header().map(|h| h.revision()) {
                    self.next_rev = self.next_rev.max(rev + 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::prefix_end;

    #[test]
    fn prefix_ends() {
        assert_eq!(prefix_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end(&[b'a', 0xff]), b"b".to_vec());
        assert_eq!(prefix_end(&[0xff]), vec![0]);
    }
}
