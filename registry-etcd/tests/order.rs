//! A scope widened entry by entry while other clients write what it covers, on a real etcd:
//! the events come in the registry's order and the view ends up showing the registry.
//!
//! etcd starts a watch created while writes land in the past, and catches it up on its own
//! schedule: its events then come after later ones of other watches. The client reads the
//! scope again when it sees one (on the same stream, its watches kept) and goes on from that
//! read. This test writes from several clients at once while the scope grows, so that some
//! watches start in the past, and checks the order each writer's changes come in: a writer
//! writes one change after the other, so its changes must come in the order it wrote them,
//! whatever entries they fall in. Every other change goes to the entry added last, as a
//! registering job writes its own nodes right after its scope took them in: a run reads the
//! scope again three to seven times (reported), and one that reads nothing is followed by
//! another, three at most. With late events delivered instead of read again, the test fails
//! within two seconds ("writer 9's change 94 came after its change 96").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, Node, RegistryError, WatchEvent, WatchScope,
};
use support::{connect, endpoint, unique_namespace};

const WRITERS: usize = 16;
const ENTRIES: usize = 300;

/// The writer and the number of a change, from the data a writer sets (`w.n`).
fn stamp(node: &Node) -> (usize, u64) {
    let text = std::str::from_utf8(&node.data).unwrap();
    let (w, n) = text.split_once('.').unwrap();
    (w.parse().unwrap(), n.parse().unwrap())
}

/// The latest change of each writer a snapshot shows.
fn latest(nodes: &BTreeMap<String, Node>) -> [u64; WRITERS] {
    let mut last = [0; WRITERS];
    for node in nodes.values().filter(|n| !n.data.is_empty()) {
        let (w, n) = stamp(node);
        last[w] = last[w].max(n);
    }
    last
}

/// Runs of [`widen_under_writers`] at most, until one reads the scope again.
const RUNS: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_widened_under_writers_keeps_the_registry_order() {
    let Some(url) = endpoint() else { return };
    // Every run checks the order; a run in which no watch started in the past checks it
    // without reading the scope again, so another run follows (at most `RUNS` in all).
    for run in 1..=RUNS {
        let reads = widen_under_writers(&url).await;
        if reads > 0 || run == RUNS {
            let _ = writeln!(
                std::io::stderr(),
                "etcd scope widened under writers: run {run} read the scope again {reads} time(s)"
            );
            break;
        }
    }
}

/// One run (see the module documentation); returns how many times the scope was read again.
async fn widen_under_writers(url: &str) -> usize {
    let ns = unique_namespace("scope-order");
    let watcher = connect(url, &ns).await;
    for e in 0..ENTRIES {
        watcher.create(&format!("/o/e{e}"), b"", CreateMode::Persistent).await.unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    // The entry added last: its watch is the one that may have started in the past.
    let newest = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let client = connect(url, &ns).await;
        let (stop, newest) = (stop.clone(), newest.clone());
        writers.push(tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                // One change after the other: every other one to the entry added last, the
                // others spread over those added before. A late event of the newest entry then
                // comes after the writer's next change, in an older entry, was delivered.
                let added = newest.load(Ordering::Relaxed);
                let e = match n % 2 {
                    0 => added,
                    _ => (n as usize * 7 + w * 11) % (added + 1),
                };
                let path = format!("/o/e{e}/w{w}");
                let data = format!("{w}.{n}");
                match client.set(&path, data.as_bytes(), None).await {
                    Ok(_) => {}
                    Err(RegistryError::NoNode { .. }) => {
                        client
                            .create(&path, data.as_bytes(), CreateMode::Persistent)
                            .await
                            .unwrap();
                    }
                    Err(e) => panic!("writer {w}: {e}"),
                }
            }
        }));
    }

    let mut scope = WatchScope::subtree("/o/e0");
    let mut stream = watcher.watch_scope(scope.clone()).await.unwrap();
    let scoper = stream.scoper().expect("an etcd stream can change its scope");
    let mut view = BTreeMap::new();
    let mut last = [0u64; WRITERS];
    let (mut events, mut reads) = (0usize, 0usize);
    let mut check = |ev: &WatchEvent, last: &mut [u64; WRITERS]| match ev {
        WatchEvent::Resync { nodes } => {
            reads += 1;
            *last = latest(nodes);
        }
        WatchEvent::Created { node, path } | WatchEvent::Changed { node, path } => {
            events += 1;
            if node.data.is_empty() {
                return;
            }
            let (w, n) = stamp(node);
            assert!(
                n > last[w],
                "{path}: writer {w}'s change {n} came after its change {}: out of the \
                 registry's order",
                last[w]
            );
            last[w] = n;
        }
        WatchEvent::Deleted { .. } | WatchEvent::Rescoped { .. } => {}
    };
    for e in 1..ENTRIES {
        let wider = scope.clone().with_subtree(format!("/o/e{e}"));
        let rescope = scoper.rescope(scope.change_to(&wider, e as u64));
        tokio::pin!(rescope);
        let mut done = false;
        let pause = tokio::time::sleep(Duration::from_millis(5));
        tokio::pin!(pause);
        // The stream is read while the change is made, as a subscriber does, and a little
        // after it, so that the writers go on meanwhile.
        while !done || !pause.is_elapsed() {
            tokio::select! {
                biased;
                result = &mut rescope, if !done => { result.unwrap(); done = true; }
                ev = stream.next() => {
                    let ev = ev.expect("the stream goes on");
                    check(&ev, &mut last);
                    ev.apply_to(&mut view);
                }
                () = &mut pause, if !pause.is_elapsed() => {}
            }
        }
        scope = wider;
        newest.store(e, Ordering::Relaxed);
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }

    let mut expected = BTreeMap::new();
    for e in 0..ENTRIES {
        let root = format!("/o/e{e}");
        expected.insert(root.clone(), watcher.get(&root).await.unwrap().unwrap());
        for child in watcher.children(&root).await.unwrap() {
            let path = format!("{root}/{child}");
            expected.insert(path.clone(), watcher.get(&path).await.unwrap().unwrap());
        }
    }
    while view != expected {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("the view converges to the registry in time")
            .expect("the stream goes on");
        check(&ev, &mut last);
        ev.apply_to(&mut view);
    }
    let _ = writeln!(
        std::io::stderr(),
        "etcd scope widened {} times under {WRITERS} writers: {events} events in order, \
         {} read(s) of the scope after the opening one",
        ENTRIES - 1,
        reads.saturating_sub(1)
    );
    reads.saturating_sub(1)
}
