//! Determinism self-check (`docs/architecture.md`, determinism): a seeded concurrent workload, with latencies,
//! injected failures, cuts, expiries, locks and watches, run twice on a paused current-thread
//! runtime, must produce byte-identical logs of every watch event, session event and result.

// Helpers outside `#[test]` fns are not covered by clippy.toml's allow-unwrap-in-tests.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use shardcron_core::handles::{Clock, Handles};
use shardcron_core::registry::{
    CoordinatorRegistry, CreateMode, Node, Op, RegistryError, TxnOp, WatchEvent,
};
use shardcron_registry_mem::{ConnectOptions, MemRegistry, MemServer};

const START_MS: i64 = 1_700_000_000_000;
const WORKERS: usize = 5;
const OPS_PER_WORKER: usize = 80;

/// A shared, timestamped log.
#[derive(Clone)]
struct Log {
    lines: Arc<Mutex<String>>,
    clock: Arc<dyn Clock>,
}

impl Log {
    fn line(&self, who: &str, what: impl std::fmt::Display) {
        let t = self.clock.now_ms() - START_MS;
        let _ = writeln!(self.lines.lock(), "{t:>7} {who:<8} {what}");
    }
}

fn event_text(ev: &WatchEvent) -> String {
    match ev {
        WatchEvent::Resync { nodes } => {
            let listed: Vec<String> =
                nodes.iter().map(|(p, n)| format!("{p}={}v{}", n.text(), n.version)).collect();
            format!("resync [{}]", listed.join(" "))
        }
        WatchEvent::Created { path, node } => {
            format!("created {path}={} e={}", node.text(), node.ephemeral)
        }
        WatchEvent::Changed { path, node } => {
            format!("changed {path}={}v{}", node.text(), node.version)
        }
        WatchEvent::Deleted { path } => format!("deleted {path}"),
        WatchEvent::Rescoped { change, added } => {
            let listed: Vec<String> =
                added.iter().map(|(p, n)| format!("{p}={}v{}", n.text(), n.version)).collect();
            let (add, remove) = (&change.add, &change.remove);
            format!("rescoped +({add}) -({remove}) added [{}]", listed.join(" "))
        }
    }
}

fn connect(server: &MemServer) -> MemRegistry {
    let options = ConnectOptions::default()
        .namespace("/det")
        .session_timeout(Duration::from_secs(5))
        .operation_timeout(Duration::from_secs(2));
    server.connect(options).unwrap()
}

fn a_path(rng: &mut ChaCha8Rng) -> String {
    const SEGMENTS: [&str; 4] = ["a", "b", "c", "q"];
    let depth = rng.gen_range(1..=3);
    let segments: Vec<&str> = (0..depth).map(|_| SEGMENTS[rng.gen_range(0..4)]).collect();
    format!("/{}", segments.join("/"))
}

async fn worker(index: usize, client: MemRegistry, seed: u64, log: Log) {
    let who = format!("w{index}");
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (index as u64 + 1).wrapping_mul(0x9E37));
    for _ in 0..OPS_PER_WORKER {
        let path = a_path(&mut rng);
        let data = rng.gen::<u8>().to_string();
        let version = rng.gen_bool(0.5).then(|| rng.gen_range(0..3));
        let line = match rng.gen_range(0..10) {
            0 | 1 => {
                let mode = [
                    CreateMode::Persistent,
                    CreateMode::Ephemeral,
                    CreateMode::PersistentSequential,
                    CreateMode::EphemeralSequential,
                ][rng.gen_range(0..4)];
                format!(
                    "create {path} {mode:?} -> {:?}",
                    client.create(&path, data.as_bytes(), mode).await
                )
            }
            2 => format!(
                "set {path} {version:?} -> {:?}",
                client.set(&path, data.as_bytes(), version).await
            ),
            3 => format!("delete {path} -> {:?}", client.delete(&path, version).await),
            4 => format!("get {path} -> {:?}", client.get(&path).await),
            5 => format!("children {path} -> {:?}", client.children(&path).await),
            6 => {
                let ops = vec![
                    TxnOp::check(path.clone(), version),
                    TxnOp::create(format!("{path}/t"), data.clone(), CreateMode::Persistent),
                    TxnOp::set(path.clone(), data.clone(), None),
                ];
                format!("txn {path} -> {:?}", client.transaction(ops).await)
            }
            7 => format!("delete_recursive {path} -> {:?}", client.delete_recursive(&path).await),
            _ => match client.lock("/lock", &who, Duration::from_millis(800)).await {
                Ok(guard) => {
                    tokio::time::sleep(Duration::from_millis(rng.gen_range(1..100))).await;
                    format!("locked, released -> {:?}", guard.release().await)
                }
                Err(e) => format!("lock -> {e:?}"),
            },
        };
        log.line(&who, line);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(0..200))).await;
    }
}

/// Cuts, heals, expiries, latencies and injected failures at seeded moments.
async fn chaos(server: MemServer, clients: Vec<MemRegistry>, seed: u64, log: Log) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.rotate_left(17));
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(50..600))).await;
        let i = rng.gen_range(0..clients.len());
        let id = clients[i].client_id();
        let who = format!("w{i}");
        match rng.gen_range(0..5) {
            0 => {
                server.expire_session(id);
                log.line("chaos", format!("expire {who}"));
            }
            1 => {
                server.cut(id);
                let heal_after = Duration::from_millis(rng.gen_range(100..8_000));
                log.line("chaos", format!("cut {who} for {heal_after:?}"));
                let (server, log) = (server.clone(), log.clone());
                tokio::spawn(async move {
                    tokio::time::sleep(heal_after).await;
                    server.heal(id);
                    log.line("chaos", format!("heal {who}"));
                });
            }
            2 => {
                let latency = Duration::from_millis(rng.gen_range(0..300) * rng.gen_range(0..8));
                server.set_latency(id, latency);
                log.line("chaos", format!("latency {who} {latency:?}"));
            }
            3 => {
                let k = rng.gen_range(1..4);
                server.fail_next(
                    id,
                    k,
                    RegistryError::ConnectionLoss { op: Op::Get, path: String::new() },
                );
                log.line("chaos", format!("fail_next {who} {k}"));
            }
            _ => {
                server.restart();
                log.line("chaos", "restart");
            }
        }
    }
}

fn run(seed: u64) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async move {
        let handles = Handles::simulated(START_MS, seed);
        let log = Log { lines: Arc::default(), clock: handles.clock.clone() };
        let server = MemServer::new(handles);

        // The observer is never faulted: its watch must see every change, in server order.
        let observer = connect(&server);
        let mut watch = observer.watch("/").await.unwrap();
        let observed = {
            let log = log.clone();
            tokio::spawn(async move {
                let mut view = BTreeMap::new();
                while let Some(ev) = watch.next().await {
                    log.line("observer", event_text(&ev));
                    ev.apply_to(&mut view);
                }
                view
            })
        };

        let clients: Vec<MemRegistry> = (0..WORKERS).map(|_| connect(&server)).collect();
        let mut tasks = Vec::new();
        for (i, client) in clients.iter().enumerate() {
            let mut session = client.session_events();
            let log2 = log.clone();
            tokio::spawn(async move {
                while let Some(ev) = session.next().await {
                    log2.line(&format!("w{i}"), format!("session {ev:?}"));
                }
            });
            tasks.push(tokio::spawn(worker(i, client.clone(), seed, log.clone())));
        }
        let chaos = tokio::spawn(chaos(server.clone(), clients.clone(), seed, log.clone()));
        for t in tasks {
            t.await.unwrap();
        }
        chaos.await.unwrap();
        // Let the last heals and deadlines play out, then shut everything down.
        tokio::time::sleep(Duration::from_secs(30)).await;
        for c in &clients {
            c.close().await.unwrap();
        }
        observer.close().await.unwrap();
        let view = observed.await.unwrap();
        // The observer's view, built from events alone, is the registry's final tree.
        let tree: BTreeMap<String, Node> = server
            .snapshot()
            .into_iter()
            .filter_map(|(p, n)| match p.strip_prefix("/det")? {
                "" => Some(("/".to_owned(), n)),
                rest => rest.starts_with('/').then(|| (rest.to_owned(), n)),
            })
            .collect();
        assert_eq!(view, tree, "seed {seed}: the observer's watch view differs from the tree");
        let text = log.lines.lock().clone();
        text
    })
}

#[test]
fn same_seed_same_log() {
    for seed in [1, 0xC0FFEE] {
        let first = run(seed);
        let second = run(seed);
        assert!(
            first == second,
            "seed {seed}: the two runs differ\n{}",
            first_difference(&first, &second)
        );
        // The workload did exercise the interesting paths.
        for needle in [
            "observer deleted",
            "session Expired",
            "session Suspended",
            "ConnectionLoss",
            "locked",
            "resync",
        ] {
            assert!(first.contains(needle), "seed {seed}: no {needle:?} in the log:\n{first}");
        }
    }
    assert_ne!(run(1), run(2), "the seed drives the run");
}

fn first_difference(a: &str, b: &str) -> String {
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {i}:\n  {x}\n  {y}");
        }
    }
    format!(
        "one log is a prefix of the other ({} vs {} lines)",
        a.lines().count(),
        b.lines().count()
    )
}
