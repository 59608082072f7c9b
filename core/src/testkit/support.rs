//! Small helpers the cases share.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::{Backend, TestClient};
use crate::registry::{
    CoordinatorRegistry, Node, RegistryExt, SessionEvent, SessionEvents, WatchEvent, WatchScope,
    WatchStream,
};

/// How long a case waits for something that must happen. Generous for real servers; free under
/// paused tokio time.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// How long a case watches for something that must NOT happen. Short: on real servers it is
/// wall-clock time spent per case.
pub const QUIET: Duration = Duration::from_millis(300);

/// A client in namespace `ns`, with the namespace emptied first (cases may share a server with
/// leftovers of an earlier run).
pub async fn fresh(backend: &dyn Backend, ns: &str) -> TestClient {
    let client = backend.client(ns).await;
    let top = client.registry.children("/").await.unwrap_or_default();
    for child in top {
        client
            .registry
            .delete_recursive(&format!("/{child}"))
            .await
            .unwrap_or_else(|e| panic!("cleaning namespace {ns}: {e}"));
    }
    client
}

/// Another client in the same namespace, without cleaning.
pub async fn another(backend: &dyn Backend, ns: &str) -> TestClient {
    backend.client(ns).await
}

/// The next watch event, failing the case if none comes in time.
pub async fn next_event(stream: &mut WatchStream) -> WatchEvent {
    match tokio::time::timeout(PATIENCE, stream.next()).await {
        Ok(Some(ev)) => ev,
        Ok(None) => panic!("watch stream ended unexpectedly"),
        Err(_) => panic!("no watch event within {PATIENCE:?}"),
    }
}

/// Opens a watch and returns it with its opening snapshot.
pub async fn watch_with_snapshot(
    registry: &dyn CoordinatorRegistry,
    path: &str,
) -> (WatchStream, BTreeMap<String, Node>) {
    let mut stream = registry.watch(path).await.unwrap_or_else(|e| panic!("watch {path}: {e}"));
    match next_event(&mut stream).await {
        WatchEvent::Resync { nodes } => (stream, nodes),
        other => panic!("a watch must open with a resync, got {other:?}"),
    }
}

/// Opens a watch of `scope` and returns it with its opening snapshot.
pub async fn watch_scope_with_snapshot(
    registry: &dyn CoordinatorRegistry,
    scope: &WatchScope,
) -> (WatchStream, BTreeMap<String, Node>) {
    let mut stream =
        registry.watch_scope(scope.clone()).await.unwrap_or_else(|e| panic!("watch {scope}: {e}"));
    match next_event(&mut stream).await {
        WatchEvent::Resync { nodes } => (stream, nodes),
        other => panic!("a watch must open with a resync, got {other:?}"),
    }
}

/// An event as one line (`created /a x v0`, `changed ...`, `deleted /a`, `resync [/a, /b]`),
/// for comparing sequences of events in one assertion.
pub fn summary(event: &WatchEvent) -> String {
    match event {
        WatchEvent::Created { path, node } => {
            format!("created {path} {} v{}", node.text(), node.version)
        }
        WatchEvent::Changed { path, node } => {
            format!("changed {path} {} v{}", node.text(), node.version)
        }
        WatchEvent::Deleted { path } => format!("deleted {path}"),
        WatchEvent::Resync { nodes } => {
            format!("resync [{}]", nodes.keys().cloned().collect::<Vec<_>>().join(", "))
        }
        WatchEvent::Rescoped { change, added } => {
            format!(
                "rescoped {} +({}) -({}) added [{}]",
                change.generation,
                change.add,
                change.remove,
                added.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        }
    }
}

/// The next `n` events, summarised.
pub async fn next_summaries(stream: &mut WatchStream, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(summary(&next_event(stream).await));
    }
    out
}

/// Asserts that no watch event arrives within [`QUIET`].
pub async fn assert_quiet(stream: &mut WatchStream, what: &str) {
    if let Ok(Some(ev)) = tokio::time::timeout(QUIET, stream.next()).await {
        panic!("{what}: unexpected watch event {ev:?}");
    }
}

/// Reads events until `done` holds for the view built from them; returns the events read.
pub async fn events_until(
    stream: &mut WatchStream,
    view: &mut BTreeMap<String, Node>,
    done: impl Fn(&BTreeMap<String, Node>) -> bool,
) -> Vec<WatchEvent> {
    let mut seen = Vec::new();
    while !done(view) {
        let ev = next_event(stream).await;
        ev.apply_to(view);
        seen.push(ev);
    }
    seen
}

/// The next session event, failing the case if none comes in time.
pub async fn next_session_event(stream: &mut SessionEvents) -> SessionEvent {
    match tokio::time::timeout(PATIENCE, stream.next()).await {
        Ok(Some(ev)) => ev,
        Ok(None) => panic!("session stream ended unexpectedly"),
        Err(_) => panic!("no session event within {PATIENCE:?}"),
    }
}

/// Waits for a session event matching `wanted`, skipping others.
pub async fn wait_session(
    stream: &mut SessionEvents,
    wanted: impl Fn(&SessionEvent) -> bool,
) -> SessionEvent {
    loop {
        let ev = next_session_event(stream).await;
        if wanted(&ev) {
            return ev;
        }
    }
}

/// Waits until the client's session is connected again after an expiry (its new session).
pub async fn await_new_session(events: &mut SessionEvents) {
    wait_session(events, |e| matches!(e, SessionEvent::Expired)).await;
    wait_session(events, |e| matches!(e, SessionEvent::Connected { .. })).await;
}

/// Reads the whole subtree at `root` with plain reads (for comparing with a watch's view).
pub async fn read_tree(registry: &dyn CoordinatorRegistry, root: &str) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_owned()];
    while let Some(p) = todo.pop() {
        let Some(node) = registry.get(&p).await.unwrap_or_else(|e| panic!("get {p}: {e}")) else {
            continue;
        };
        out.insert(p.clone(), node);
        todo.extend(registry.child_paths(&p).await.unwrap_or_else(|e| panic!("children {p}: {e}")));
    }
    out
}

/// Reads every node `scope` covers with plain reads (for comparing with a watch's view).
pub async fn read_scope(
    registry: &dyn CoordinatorRegistry,
    scope: &WatchScope,
) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    for root in scope.subtrees() {
        out.extend(read_tree(registry, root).await);
    }
    for at in scope.nodes() {
        if let Some(node) = registry.get(at).await.unwrap_or_else(|e| panic!("get {at}: {e}")) {
            out.insert(at.clone(), node);
        }
    }
    out
}

/// Shares one registry handle with spawned tasks.
pub fn shared(client: &TestClient) -> Arc<dyn CoordinatorRegistry> {
    client.registry.clone()
}

/// Prints a measured figure past the test harness's capture (which hides what passing tests
/// print with `eprintln!`), so that `cargo test` shows it.
pub fn report(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}
