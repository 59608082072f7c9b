//! The behaviour cases. Each is `pub async fn name(backend: &dyn Backend)`, checks one clause of
//! the contract in [`crate::registry`], and panics with a message saying which when it fails.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;

use super::support::*;
use super::Backend;
use crate::registry::ext::await_leadership;
use crate::registry::{
    CreateMode, Leadership, Node, RegistryError, RegistryExt, SessionEvent, TxnOp, TxnResult,
    WatchEvent, WatchScope, MAX_DATA_SIZE,
};

// ---------------------------------------------------------------- nodes and versions

pub async fn create_and_get(b: &dyn Backend) {
    let c = fresh(b, "create_and_get").await;
    let r = &c.registry;
    let path = r.create("/a", b"hello", CreateMode::Persistent).await.unwrap();
    assert_eq!(path, "/a");
    let node = r.get("/a").await.unwrap().expect("created node is readable");
    assert_eq!(node.data, b"hello");
    assert_eq!(node.version, 0, "a new node has version 0");
    assert!(!node.ephemeral);
}

pub async fn create_existing_fails(b: &dyn Backend) {
    let c = fresh(b, "create_existing_fails").await;
    let r = &c.registry;
    r.create("/a", b"one", CreateMode::Persistent).await.unwrap();
    let err = r.create("/a", b"two", CreateMode::Persistent).await.unwrap_err();
    assert!(matches!(err, RegistryError::NodeExists { ref path, .. } if path == "/a"), "{err}");
    assert_eq!(
        r.get("/a").await.unwrap().unwrap().data,
        b"one",
        "the failed create changed nothing"
    );
}

pub async fn create_makes_parents(b: &dyn Backend) {
    let c = fresh(b, "create_makes_parents").await;
    let r = &c.registry;
    r.create("/p/q/r", b"leaf", CreateMode::Ephemeral).await.unwrap();
    for parent in ["/p", "/p/q"] {
        let node = r.get(parent).await.unwrap().unwrap_or_else(|| panic!("{parent} created"));
        assert!(!node.ephemeral, "{parent} is persistent");
        assert!(node.data.is_empty(), "{parent} has empty data");
    }
    assert!(r.get("/p/q/r").await.unwrap().unwrap().ephemeral);
}

pub async fn get_missing_is_none(b: &dyn Backend) {
    let c = fresh(b, "get_missing_is_none").await;
    assert_eq!(c.registry.get("/nothing/here").await.unwrap(), None);
    assert!(!c.registry.exists("/nothing").await.unwrap());
}

pub async fn exists_follows_create_and_delete(b: &dyn Backend) {
    let c = fresh(b, "exists_follows_create_and_delete").await;
    let r = &c.registry;
    assert!(!r.exists("/e").await.unwrap());
    r.create("/e", b"", CreateMode::Persistent).await.unwrap();
    assert!(r.exists("/e").await.unwrap());
    r.delete("/e", None).await.unwrap();
    assert!(!r.exists("/e").await.unwrap());
}

pub async fn set_increments_version(b: &dyn Backend) {
    let c = fresh(b, "set_increments_version").await;
    let r = &c.registry;
    r.create("/v", b"0", CreateMode::Persistent).await.unwrap();
    for expected in 1..=5u64 {
        let v = r.set("/v", expected.to_string().as_bytes(), None).await.unwrap();
        assert_eq!(v, expected, "each set adds exactly one to the version");
    }
    let node = r.get("/v").await.unwrap().unwrap();
    assert_eq!((node.data.as_slice(), node.version), (&b"5"[..], 5));
}

pub async fn set_with_expected_version(b: &dyn Backend) {
    let c = fresh(b, "set_with_expected_version").await;
    let r = &c.registry;
    r.create("/v", b"a", CreateMode::Persistent).await.unwrap();
    assert_eq!(r.set("/v", b"b", Some(0)).await.unwrap(), 1);
    assert_eq!(r.set("/v", b"c", Some(1)).await.unwrap(), 2);
}

pub async fn set_stale_version_fails(b: &dyn Backend) {
    let c = fresh(b, "set_stale_version_fails").await;
    let r = &c.registry;
    r.create("/v", b"a", CreateMode::Persistent).await.unwrap();
    r.set("/v", b"b", None).await.unwrap();
    let err = r.set("/v", b"stale", Some(0)).await.unwrap_err();
    assert!(
        matches!(err, RegistryError::BadVersion { expected: 0, ref path, .. } if path == "/v"),
        "{err}"
    );
    let node = r.get("/v").await.unwrap().unwrap();
    assert_eq!(
        (node.data.as_slice(), node.version),
        (&b"b"[..], 1),
        "a failed set changes nothing"
    );
}

pub async fn set_missing_fails(b: &dyn Backend) {
    let c = fresh(b, "set_missing_fails").await;
    let err = c.registry.set("/none", b"x", None).await.unwrap_err();
    assert!(matches!(err, RegistryError::NoNode { ref path, .. } if path == "/none"), "{err}");
    assert!(!c.registry.exists("/none").await.unwrap(), "set never creates");
}

pub async fn delete_with_version(b: &dyn Backend) {
    let c = fresh(b, "delete_with_version").await;
    let r = &c.registry;
    r.create("/d", b"", CreateMode::Persistent).await.unwrap();
    r.set("/d", b"x", None).await.unwrap();
    let err = r.delete("/d", Some(0)).await.unwrap_err();
    assert!(matches!(err, RegistryError::BadVersion { .. }), "{err}");
    assert!(r.exists("/d").await.unwrap(), "a failed delete deletes nothing");
    r.delete("/d", Some(1)).await.unwrap();
    assert!(!r.exists("/d").await.unwrap());
}

pub async fn delete_missing_fails(b: &dyn Backend) {
    let c = fresh(b, "delete_missing_fails").await;
    let err = c.registry.delete("/none", None).await.unwrap_err();
    assert!(matches!(err, RegistryError::NoNode { ref path, .. } if path == "/none"), "{err}");
}

pub async fn delete_with_children_fails(b: &dyn Backend) {
    let c = fresh(b, "delete_with_children_fails").await;
    let r = &c.registry;
    r.create("/p/c", b"", CreateMode::Persistent).await.unwrap();
    let err = r.delete("/p", None).await.unwrap_err();
    assert!(matches!(err, RegistryError::NotEmpty { ref path, .. } if path == "/p"), "{err}");
    assert!(r.exists("/p/c").await.unwrap());
}

pub async fn delete_recursive_removes_subtree(b: &dyn Backend) {
    let c = fresh(b, "delete_recursive_removes_subtree").await;
    let r = &c.registry;
    for p in ["/t/a/x", "/t/a/y", "/t/b", "/t2/keep"] {
        r.create(p, b"", CreateMode::Persistent).await.unwrap();
    }
    r.create("/t/e", b"", CreateMode::Ephemeral).await.unwrap();
    r.delete_recursive("/t").await.unwrap();
    for p in ["/t", "/t/a", "/t/a/x", "/t/b", "/t/e"] {
        assert!(!r.exists(p).await.unwrap(), "{p} deleted");
    }
    assert!(r.exists("/t2/keep").await.unwrap(), "a sibling with a common prefix survives");
}

pub async fn delete_recursive_missing_is_ok(b: &dyn Backend) {
    let c = fresh(b, "delete_recursive_missing_is_ok").await;
    c.registry.delete_recursive("/not/there").await.unwrap();
}

pub async fn children_sorted(b: &dyn Backend) {
    let c = fresh(b, "children_sorted").await;
    let r = &c.registry;
    for name in ["m", "b", "z", "a10", "a2", "A"] {
        r.create(&format!("/p/{name}"), b"", CreateMode::Persistent).await.unwrap();
    }
    r.create("/p/b/deeper", b"", CreateMode::Persistent).await.unwrap();
    assert_eq!(r.children("/p").await.unwrap(), vec!["A", "a10", "a2", "b", "m", "z"]);
    assert!(r.children("/p/z").await.unwrap().is_empty(), "a leaf has no children");
}

pub async fn children_of_missing_fails(b: &dyn Backend) {
    let c = fresh(b, "children_of_missing_fails").await;
    let err = c.registry.children("/none").await.unwrap_err();
    assert!(matches!(err, RegistryError::NoNode { ref path, .. } if path == "/none"), "{err}");
    assert!(c.registry.children_or_empty("/none").await.unwrap().is_empty());
}

pub async fn binary_and_empty_data(b: &dyn Backend) {
    let c = fresh(b, "binary_and_empty_data").await;
    let r = &c.registry;
    let all_bytes: Vec<u8> = (0..=255u8).collect();
    r.create("/bin", &all_bytes, CreateMode::Persistent).await.unwrap();
    assert_eq!(r.get("/bin").await.unwrap().unwrap().data, all_bytes);
    r.create("/empty", b"", CreateMode::Persistent).await.unwrap();
    assert!(r.get("/empty").await.unwrap().unwrap().data.is_empty());
    r.set("/bin", b"", None).await.unwrap();
    assert!(r.get("/bin").await.unwrap().unwrap().data.is_empty());
}

pub async fn data_size_limit(b: &dyn Backend) {
    let c = fresh(b, "data_size_limit").await;
    let r = &c.registry;
    let big = vec![b'x'; MAX_DATA_SIZE + 1];
    let err = r.create("/big", &big, CreateMode::Persistent).await.unwrap_err();
    assert!(
        matches!(err, RegistryError::DataTooLarge { size, limit, .. } if size == MAX_DATA_SIZE + 1 && limit == MAX_DATA_SIZE),
        "{err}"
    );
    assert!(!r.exists("/big").await.unwrap(), "rejected data leaves no node");
    let fits = vec![b'y'; MAX_DATA_SIZE - 64 * 1024];
    r.create("/fits", &fits, CreateMode::Persistent).await.unwrap();
    let err = r.set("/fits", &big, None).await.unwrap_err();
    assert!(matches!(err, RegistryError::DataTooLarge { .. }), "{err}");
    assert_eq!(r.get("/fits").await.unwrap().unwrap().data.len(), fits.len(), "data unchanged");
    let err =
        r.transaction(vec![TxnOp::create("/t", big, CreateMode::Persistent)]).await.unwrap_err();
    assert!(
        matches!(err.transaction_failure(), Some((0, RegistryError::DataTooLarge { .. }))),
        "{err}"
    );
}

// ---------------------------------------------------------------- sequential nodes

fn seq_of(path: &str) -> u64 {
    let digits = &path[path.len() - 10..];
    assert!(digits.bytes().all(|d| d.is_ascii_digit()), "10-digit suffix in {path}");
    digits.parse().unwrap()
}

pub async fn sequential_names(b: &dyn Backend) {
    let c = fresh(b, "sequential_names").await;
    let r = &c.registry;
    let mut seqs = Vec::new();
    for _ in 0..5 {
        let p = r.create("/q/item-", b"", CreateMode::PersistentSequential).await.unwrap();
        assert!(p.starts_with("/q/item-") && p.len() == "/q/item-".len() + 10, "{p}");
        seqs.push(seq_of(&p));
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "sequence strictly increases: {seqs:?}");
    if r.capability().contiguous_sequence {
        assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "contiguous: {seqs:?}");
    }
    let names = r.children("/q").await.unwrap();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "padded names sort in creation order");
}

pub async fn sequential_per_parent(b: &dyn Backend) {
    let c = fresh(b, "sequential_per_parent").await;
    let r = &c.registry;
    let a0 = seq_of(&r.create("/a/n-", b"", CreateMode::PersistentSequential).await.unwrap());
    for _ in 0..3 {
        r.create("/b/n-", b"", CreateMode::PersistentSequential).await.unwrap();
    }
    let a1 = seq_of(&r.create("/a/n-", b"", CreateMode::PersistentSequential).await.unwrap());
    assert!(a1 > a0);
    if r.capability().contiguous_sequence {
        assert_eq!(a1, a0 + 1, "creates under another parent do not advance this parent's counter");
    }
}

pub async fn sequential_never_reused(b: &dyn Backend) {
    let c = fresh(b, "sequential_never_reused").await;
    let r = &c.registry;
    let first = r.create("/q/x-", b"", CreateMode::PersistentSequential).await.unwrap();
    r.delete(&first, None).await.unwrap();
    let second = r.create("/q/x-", b"", CreateMode::PersistentSequential).await.unwrap();
    assert!(seq_of(&second) > seq_of(&first), "{second} after deleting {first}");
}

pub async fn ephemeral_sequential(b: &dyn Backend) {
    let c = fresh(b, "ephemeral_sequential").await;
    let r = &c.registry;
    let p = r.create("/q/e-", b"me", CreateMode::EphemeralSequential).await.unwrap();
    seq_of(&p);
    let node = r.get(&p).await.unwrap().unwrap();
    assert!(node.ephemeral);
    assert_eq!(node.data, b"me");
}

// ---------------------------------------------------------------- ephemeral nodes and sessions

pub async fn ephemeral_dies_on_close(b: &dyn Backend) {
    let owner = fresh(b, "ephemeral_dies_on_close").await;
    let observer = another(b, "ephemeral_dies_on_close").await;
    owner.registry.create("/live/e", b"", CreateMode::Ephemeral).await.unwrap();
    owner.registry.create("/live/p", b"", CreateMode::Persistent).await.unwrap();
    assert!(observer.registry.exists("/live/e").await.unwrap());
    owner.registry.close().await.unwrap();
    assert!(!observer.registry.exists("/live/e").await.unwrap(), "ephemeral gone after close");
    assert!(observer.registry.exists("/live/p").await.unwrap(), "persistent survives close");
}

pub async fn ephemeral_dies_on_expiry(b: &dyn Backend) {
    let owner = fresh(b, "ephemeral_dies_on_expiry").await;
    let observer = another(b, "ephemeral_dies_on_expiry").await;
    owner.registry.create("/live/e", b"", CreateMode::Ephemeral).await.unwrap();
    owner.registry.create("/live/p", b"", CreateMode::Persistent).await.unwrap();
    owner.control.expire().await;
    assert!(!observer.registry.exists("/live/e").await.unwrap(), "ephemeral gone after expiry");
    assert!(observer.registry.exists("/live/p").await.unwrap(), "persistent survives expiry");
}

pub async fn ephemeral_has_no_children(b: &dyn Backend) {
    let c = fresh(b, "ephemeral_has_no_children").await;
    let r = &c.registry;
    r.create("/e", b"", CreateMode::Ephemeral).await.unwrap();
    for mode in [CreateMode::Persistent, CreateMode::Ephemeral, CreateMode::PersistentSequential] {
        let err = r.create("/e/child", b"", mode).await.unwrap_err();
        assert!(matches!(err, RegistryError::EphemeralParent { .. }), "{mode:?}: {err}");
    }
    let err = r.create("/e/deep/child", b"", CreateMode::Persistent).await.unwrap_err();
    assert!(matches!(err, RegistryError::EphemeralParent { .. }), "{err}");
    assert!(r.children("/e").await.unwrap().is_empty());
}

pub async fn closed_client_fails(b: &dyn Backend) {
    let c = fresh(b, "closed_client_fails").await;
    let r = &c.registry;
    r.close().await.unwrap();
    r.close().await.unwrap();
    let err = r.get("/x").await.unwrap_err();
    assert!(matches!(err, RegistryError::Closed { .. }), "{err}");
    let err = r.create("/x", b"", CreateMode::Persistent).await.unwrap_err();
    assert!(matches!(err, RegistryError::Closed { .. }), "{err}");
}

pub async fn session_stream_opens_connected(b: &dyn Backend) {
    let c = fresh(b, "session_stream_opens_connected").await;
    let mut events = c.registry.session_events();
    let first = next_session_event(&mut events).await;
    assert!(matches!(first, SessionEvent::Connected { .. }), "{first:?}");
}

pub async fn session_expiry_then_new_session(b: &dyn Backend) {
    let c = fresh(b, "session_expiry_then_new_session").await;
    let mut events = c.registry.session_events();
    let SessionEvent::Connected { session: old } = next_session_event(&mut events).await else {
        panic!("stream opens with Connected");
    };
    c.control.expire().await;
    wait_session(&mut events, |e| matches!(e, SessionEvent::Expired)).await;
    let ev = wait_session(&mut events, |e| matches!(e, SessionEvent::Connected { .. })).await;
    assert!(
        matches!(ev, SessionEvent::Connected { session } if session != old),
        "a new session id: {ev:?}"
    );
    // The new session works, ephemerals included.
    c.registry.create("/after", b"", CreateMode::Ephemeral).await.unwrap();
    assert!(c.registry.get("/after").await.unwrap().unwrap().ephemeral);
}

pub async fn session_close_ends_stream(b: &dyn Backend) {
    let c = fresh(b, "session_close_ends_stream").await;
    let mut events = c.registry.session_events();
    next_session_event(&mut events).await;
    c.registry.close().await.unwrap();
    assert_eq!(next_session_event(&mut events).await, SessionEvent::Closed);
    let end = tokio::time::timeout(PATIENCE, events.next()).await.expect("stream ends");
    assert_eq!(end, None);
}

// ---------------------------------------------------------------- the lease

/// A client cut off without a word (a silent partition: nothing closed, nothing reset) reports
/// `Suspended`, then `Lost` at its local lease deadline, and that comes before the server
/// expires its session, as another client sees by its ephemeral node vanishing. Its leader
/// latch reports the leadership lost. Healed, the client never resumes the lost session:
/// `Expired`, then a new session, never `Reconnected`. Prints the measured margin.
pub async fn session_lost_before_server_expiry(b: &dyn Backend) {
    let ns = "session_lost_before_server_expiry";
    let c = fresh(b, ns).await;
    let observer = another(b, ns).await;
    let backend = c.registry.capability().backend;
    let mut events = c.registry.session_events();
    let SessionEvent::Connected { session: old } = next_session_event(&mut events).await else {
        panic!("stream opens with Connected");
    };
    let mut latch = c.registry.leader_latch("/lease/latch", "cut").await.unwrap();
    await_leadership(latch.as_mut(), PATIENCE).await.unwrap();
    c.registry.create("/lease/owner", b"", CreateMode::Ephemeral).await.unwrap();
    let (mut watch, nodes) = watch_with_snapshot(observer.registry.as_ref(), "/lease/owner").await;
    assert!(nodes.contains_key("/lease/owner"), "the observer sees the ephemeral: {nodes:?}");

    let cut_at = tokio::time::Instant::now();
    c.control.cut().await;
    let (mut suspended, mut lost, mut expired) = (None, None, None);
    while lost.is_none() || expired.is_none() {
        tokio::select! {
            biased;
            ev = next_session_event(&mut events), if lost.is_none() => match ev {
                SessionEvent::Suspended => {
                    suspended.get_or_insert_with(tokio::time::Instant::now);
                }
                SessionEvent::Lost => {
                    assert!(suspended.is_some(), "{backend}: Lost without Suspended first");
                    lost = Some(tokio::time::Instant::now());
                }
                other => panic!("{backend}: cut off, before Lost: unexpected {other:?}"),
            },
            ev = next_event(&mut watch), if expired.is_none() => {
                let gone = match &ev {
                    WatchEvent::Deleted { path } => path == "/lease/owner",
                    WatchEvent::Resync { nodes } => !nodes.contains_key("/lease/owner"),
                    _ => false,
                };
                if gone {
                    expired = Some(tokio::time::Instant::now());
                }
            }
        }
    }
    let (suspended, lost, expired) =
        (suspended.unwrap_or(cut_at), lost.unwrap_or(cut_at), expired.unwrap_or(cut_at));
    assert!(
        lost < expired,
        "{backend}: Lost came {:?} after the cut, the server expired the session {:?} after it: \
         the holder of a lost session was still unaware while others could take over",
        lost - cut_at,
        expired - cut_at
    );
    report(&format!(
        "{backend}: cut link: Suspended after {:?}, Lost after {:?}, server-side expiry seen \
         after {:?}: Lost came {:?} before the expiry",
        suspended - cut_at,
        lost - cut_at,
        expired - cut_at,
        expired - lost
    ));
    let told = tokio::time::timeout(PATIENCE, latch.changed()).await.expect("latch told").unwrap();
    assert_eq!(told, Leadership::Lost, "{backend}: the latch reports leadership lost");
    assert!(!latch.is_leader());

    // Healed: the lost session is never resumed.
    c.control.heal().await;
    let mut saw_expired = false;
    let new = loop {
        match next_session_event(&mut events).await {
            SessionEvent::Expired => saw_expired = true,
            SessionEvent::Connected { session } => break session,
            // The link may blink while the old session is dealt with.
            SessionEvent::Suspended => {}
            other => panic!("{backend}: after Lost: unexpected {other:?}"),
        }
    };
    assert!(saw_expired, "{backend}: Expired comes before the new session");
    assert_ne!(new, old, "{backend}: a new session after Lost");
    c.registry.create("/lease/again", b"", CreateMode::Ephemeral).await.unwrap();
    assert!(observer.registry.get("/lease/again").await.unwrap().unwrap().ephemeral);
    await_leadership(latch.as_mut(), PATIENCE).await.unwrap();
}

// ---------------------------------------------------------------- paths and namespaces

const BAD_PATHS: [&str; 8] = [
    "",
    "relative",
    "/trailing/",
    "/double//slash",
    "/dot/./x",
    "/up/../x",
    "/nul\0x",
    "/ctl\u{7}x",
];

pub async fn invalid_paths_rejected(b: &dyn Backend) {
    let c = fresh(b, "invalid_paths_rejected").await;
    let r = &c.registry;
    for bad in BAD_PATHS {
        let results = [
            r.create(bad, b"", CreateMode::Persistent).await.map(|_| ()),
            r.get(bad).await.map(|_| ()),
            r.set(bad, b"", None).await.map(|_| ()),
            r.delete(bad, None).await,
            r.exists(bad).await.map(|_| ()),
            r.children(bad).await.map(|_| ()),
            r.delete_recursive(bad).await,
            r.transaction(vec![TxnOp::check(bad, None)]).await.map(|_| ()),
            r.watch(bad).await.map(|_| ()),
        ];
        for (i, res) in results.into_iter().enumerate() {
            let err = res.expect_err("an invalid path must be rejected");
            let inner = err.transaction_failure().map_or(&err, |(_, e)| e);
            assert!(
                matches!(inner, RegistryError::InvalidPath { path, .. } if path == bad),
                "op #{i} on {bad:?}: {err}"
            );
        }
    }
    assert!(r.children("/").await.unwrap().is_empty(), "nothing was created");
}

pub async fn root_is_read_only(b: &dyn Backend) {
    let c = fresh(b, "root_is_read_only").await;
    let r = &c.registry;
    assert!(matches!(
        r.create("/", b"", CreateMode::Persistent).await,
        Err(RegistryError::InvalidPath { .. })
    ));
    assert!(matches!(r.delete("/", None).await, Err(RegistryError::InvalidPath { .. })));
    assert!(matches!(r.set("/", b"x", None).await, Err(RegistryError::InvalidPath { .. })));
    r.create("/x", b"", CreateMode::Persistent).await.unwrap();
    assert_eq!(r.children("/").await.unwrap(), vec!["x"]);
}

pub async fn namespaces_isolated(b: &dyn Backend) {
    let one = fresh(b, "namespaces_isolated_one").await;
    let two = fresh(b, "namespaces_isolated_two").await;
    one.registry.create("/same/name", b"one", CreateMode::Persistent).await.unwrap();
    assert!(!two.registry.exists("/same/name").await.unwrap(), "namespaces do not see each other");
    two.registry.create("/same/name", b"two", CreateMode::Persistent).await.unwrap();
    assert_eq!(one.registry.get("/same/name").await.unwrap().unwrap().data, b"one");
    assert_eq!(two.registry.get("/same/name").await.unwrap().unwrap().data, b"two");
}

// ---------------------------------------------------------------- transactions

pub async fn transaction_commits_all(b: &dyn Backend) {
    let c = fresh(b, "transaction_commits_all").await;
    let r = &c.registry;
    r.create("/t/set", b"old", CreateMode::Persistent).await.unwrap();
    r.create("/t/del", b"", CreateMode::Persistent).await.unwrap();
    let results = r
        .transaction(vec![
            TxnOp::check("/t", Some(0)),
            TxnOp::create("/t/new", b"n".to_vec(), CreateMode::Persistent),
            TxnOp::set("/t/set", b"new".to_vec(), Some(0)),
            TxnOp::delete("/t/del", None),
            TxnOp::create("/t/seq-", b"".to_vec(), CreateMode::PersistentSequential),
        ])
        .await
        .unwrap();
    assert_eq!(results.len(), 5);
    assert_eq!(results[0], TxnResult::Checked);
    assert_eq!(results[1], TxnResult::Created { path: "/t/new".into() });
    assert_eq!(results[2], TxnResult::Set { version: 1 });
    assert_eq!(results[3], TxnResult::Deleted);
    let TxnResult::Created { path: seq } = &results[4] else { panic!("{:?}", results[4]) };
    seq_of(seq);
    assert_eq!(r.get("/t/new").await.unwrap().unwrap().data, b"n");
    assert_eq!(r.get("/t/set").await.unwrap().unwrap().data, b"new");
    assert!(!r.exists("/t/del").await.unwrap());
    assert!(r.exists(seq).await.unwrap());
}

pub async fn transaction_failure_leaves_no_trace(b: &dyn Backend) {
    let c = fresh(b, "transaction_failure_leaves_no_trace").await;
    let r = &c.registry;
    r.create("/t/set", b"old", CreateMode::Persistent).await.unwrap();
    r.create("/t/del", b"", CreateMode::Persistent).await.unwrap();
    r.create("/t/exists", b"", CreateMode::Persistent).await.unwrap();
    let before = read_tree(r.as_ref(), "/t").await;
    let err = r
        .transaction(vec![
            TxnOp::create("/t/new", b"n".to_vec(), CreateMode::Persistent),
            TxnOp::set("/t/set", b"new".to_vec(), None),
            TxnOp::delete("/t/del", None),
            TxnOp::create("/t/exists", b"".to_vec(), CreateMode::Persistent),
        ])
        .await
        .unwrap_err();
    let (index, cause) = err.transaction_failure().expect("a transaction error");
    assert_eq!(index, 3, "the failing op is reported: {err}");
    assert!(
        matches!(cause, RegistryError::NodeExists { path, .. } if path == "/t/exists"),
        "{cause}"
    );
    assert_eq!(
        read_tree(r.as_ref(), "/t").await,
        before,
        "nothing of a failed transaction applies"
    );
}

pub async fn transaction_check_version(b: &dyn Backend) {
    let c = fresh(b, "transaction_check_version").await;
    let r = &c.registry;
    r.create("/flag", b"", CreateMode::Persistent).await.unwrap();
    r.set("/flag", b"again", None).await.unwrap();
    let err = r
        .transaction(vec![
            TxnOp::check("/flag", Some(0)),
            TxnOp::create("/out", b"".to_vec(), CreateMode::Persistent),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(err.transaction_failure(), Some((0, RegistryError::BadVersion { .. }))),
        "{err}"
    );
    let err = r.transaction(vec![TxnOp::check("/missing", None)]).await.unwrap_err();
    assert!(matches!(err.transaction_failure(), Some((0, RegistryError::NoNode { .. }))), "{err}");
    assert!(!r.exists("/out").await.unwrap());
    r.transaction(vec![
        TxnOp::check("/flag", Some(1)),
        TxnOp::create("/out", b"".to_vec(), CreateMode::Persistent),
    ])
    .await
    .unwrap();
    assert!(r.exists("/out").await.unwrap());
}

/// `TxnOp::Absent` where the backend says it checks absence (fails with `NodeExists`, at its
/// index, when the node exists; sees the transaction's own earlier ops); elsewhere the backend
/// refuses it, whole, with an error that is not a transaction failure.
pub async fn transaction_check_absent(b: &dyn Backend) {
    let c = fresh(b, "transaction_check_absent").await;
    let r = &c.registry;
    r.create("/here", b"x", CreateMode::Persistent).await.unwrap();
    let guarded = |absent: &str| {
        vec![TxnOp::absent(absent), TxnOp::create("/out", b"".to_vec(), CreateMode::Persistent)]
    };
    if !r.capability().absent_check {
        let err = r.transaction(guarded("/missing")).await.unwrap_err();
        assert!(err.transaction_failure().is_none_or(|(_, e)| !e.is_node_exists()), "{err}");
        assert!(!r.exists("/out").await.unwrap(), "a refused transaction wrote");
        return;
    }
    let err = r.transaction(guarded("/here")).await.unwrap_err();
    assert!(
        matches!(err.transaction_failure(), Some((0, RegistryError::NodeExists { .. }))),
        "{err}"
    );
    assert!(!r.exists("/out").await.unwrap());
    // A node whose parent is missing is absent too.
    let results = r.transaction(guarded("/no/such/parent")).await.unwrap();
    assert_eq!(results, vec![TxnResult::Checked, TxnResult::Created { path: "/out".into() }]);
    // The transaction's own ops count: absent once deleted, present once created.
    r.transaction(vec![TxnOp::delete("/here", None), TxnOp::absent("/here")]).await.unwrap();
    let err = r
        .transaction(vec![
            TxnOp::create("/here", b"y".to_vec(), CreateMode::Persistent),
            TxnOp::absent("/here"),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(err.transaction_failure(), Some((1, RegistryError::NodeExists { .. }))),
        "{err}"
    );
    assert!(!r.exists("/here").await.unwrap(), "the failed transaction left its create");
}

pub async fn transaction_create_needs_parent(b: &dyn Backend) {
    let c = fresh(b, "transaction_create_needs_parent").await;
    let err = c
        .registry
        .transaction(vec![TxnOp::create("/no/parent", b"".to_vec(), CreateMode::Persistent)])
        .await
        .unwrap_err();
    assert!(matches!(err.transaction_failure(), Some((0, RegistryError::NoNode { .. }))), "{err}");
    assert!(!c.registry.exists("/no").await.unwrap());
}

pub async fn transaction_sees_its_own_ops(b: &dyn Backend) {
    let c = fresh(b, "transaction_sees_its_own_ops").await;
    let r = &c.registry;
    r.create("/t", b"", CreateMode::Persistent).await.unwrap();
    // Later ops see earlier ones: create a parent then its child, then check the child.
    r.transaction(vec![
        TxnOp::create("/t/p", b"".to_vec(), CreateMode::Persistent),
        TxnOp::create("/t/p/c", b"".to_vec(), CreateMode::Persistent),
        TxnOp::set("/t/p/c", b"x".to_vec(), Some(0)),
        TxnOp::check("/t/p/c", Some(1)),
    ])
    .await
    .unwrap();
    assert_eq!(r.get("/t/p/c").await.unwrap().unwrap().version, 1);
    // A delete followed by a check of the same node fails the whole transaction.
    let err = r
        .transaction(vec![TxnOp::delete("/t/p/c", None), TxnOp::check("/t/p/c", None)])
        .await
        .unwrap_err();
    assert!(matches!(err.transaction_failure(), Some((1, RegistryError::NoNode { .. }))), "{err}");
    assert!(r.exists("/t/p/c").await.unwrap());
}

pub async fn transaction_delete_rules(b: &dyn Backend) {
    let c = fresh(b, "transaction_delete_rules").await;
    let r = &c.registry;
    r.create("/t/c", b"", CreateMode::Persistent).await.unwrap();
    let err = r.transaction(vec![TxnOp::delete("/t", None)]).await.unwrap_err();
    assert!(
        matches!(err.transaction_failure(), Some((0, RegistryError::NotEmpty { .. }))),
        "{err}"
    );
    let err = r.transaction(vec![TxnOp::delete("/t/c", Some(3))]).await.unwrap_err();
    assert!(
        matches!(err.transaction_failure(), Some((0, RegistryError::BadVersion { .. }))),
        "{err}"
    );
    r.transaction(vec![TxnOp::delete("/t/c", Some(0)), TxnOp::delete("/t", None)]).await.unwrap();
    assert!(!r.exists("/t").await.unwrap());
}

/// Every condition a transaction op carries, failing alone at a later index while the ops
/// before it would pass: the error names that op and its cause, and nothing applies.
pub async fn transaction_each_condition_fails_alone(b: &dyn Backend) {
    let c = fresh(b, "transaction_each_condition_fails_alone").await;
    let r = &c.registry;
    r.create("/t/full", b"x", CreateMode::Persistent).await.unwrap();
    r.create("/t/empty", b"", CreateMode::Persistent).await.unwrap();
    r.create("/t/kids/a", b"", CreateMode::Persistent).await.unwrap();
    r.create("/t/kids/b", b"", CreateMode::Persistent).await.unwrap();
    r.create("/t/eph", b"e", CreateMode::Ephemeral).await.unwrap();
    let before = read_tree(r.as_ref(), "/t").await;
    let ok = || {
        vec![
            TxnOp::check("/t/full", Some(0)),
            TxnOp::check("/t/empty", Some(0)),
            TxnOp::create("/t/new", b"n".to_vec(), CreateMode::Persistent),
        ]
    };
    type Cause = fn(&RegistryError) -> bool;
    let failing: Vec<(TxnOp, Cause)> = vec![
        (TxnOp::check("/t/full", Some(1)), |e| matches!(e, RegistryError::BadVersion { .. })),
        (TxnOp::check("/t/empty", Some(1)), |e| matches!(e, RegistryError::BadVersion { .. })),
        (TxnOp::check("/t/none", None), |e| matches!(e, RegistryError::NoNode { .. })),
        (TxnOp::create("/t/full", b"".to_vec(), CreateMode::Persistent), |e| e.is_node_exists()),
        (TxnOp::create("/t/no/x", b"".to_vec(), CreateMode::Persistent), |e| e.is_no_node()),
        (TxnOp::create("/t/eph/x", b"".to_vec(), CreateMode::Persistent), |e| {
            matches!(e, RegistryError::EphemeralParent { .. })
        }),
        (TxnOp::set("/t/full", b"y".to_vec(), Some(4)), |e| {
            matches!(e, RegistryError::BadVersion { .. })
        }),
        (TxnOp::set("/t/none", b"y".to_vec(), Some(0)), |e| e.is_no_node()),
        (TxnOp::delete("/t/kids", None), |e| matches!(e, RegistryError::NotEmpty { .. })),
        (TxnOp::delete("/t/empty", Some(2)), |e| matches!(e, RegistryError::BadVersion { .. })),
        (TxnOp::delete("/t/none", None), |e| e.is_no_node()),
    ];
    for (op, expected) in failing {
        let mut ops = ok();
        ops.push(op.clone());
        let err = r.transaction(ops).await.unwrap_err();
        let (index, cause) = err.transaction_failure().expect("a transaction error");
        assert_eq!(index, 3, "{op:?} is the failing op: {err}");
        assert!(expected(cause), "{op:?} fails for its own reason: {cause}");
        assert_eq!(cause.path(), Some(op.path()), "{op:?}: {cause}");
        assert_eq!(read_tree(r.as_ref(), "/t").await, before, "{op:?}: nothing applies");
    }
    // The same ops with the failing one left out commit, a version check of a node with empty
    // data included.
    r.transaction(ok()).await.unwrap();
    assert!(r.exists("/t/new").await.unwrap());
}

/// The shapes that depend on earlier ops of the same transaction: a parent emptied by the
/// transaction can be deleted, one child left is enough to refuse; a node deleted and
/// re-created, created and deleted, created and set; a set keeps an ephemeral node ephemeral.
pub async fn transaction_ops_build_on_each_other(b: &dyn Backend) {
    let c = fresh(b, "transaction_ops_build_on_each_other").await;
    let r = &c.registry;
    for name in ["a", "b", "c"] {
        r.create(&format!("/p/{name}"), b"", CreateMode::Persistent).await.unwrap();
    }
    let err = r
        .transaction(vec![
            TxnOp::delete("/p/a", None),
            TxnOp::delete("/p/c", Some(0)),
            TxnOp::delete("/p", None),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(err.transaction_failure(), Some((2, RegistryError::NotEmpty { .. }))),
        "one child left: {err}"
    );
    assert_eq!(r.children("/p").await.unwrap(), vec!["a", "b", "c"]);
    let err = r
        .transaction(vec![
            TxnOp::delete("/p/a", None),
            TxnOp::create("/p/d", b"".to_vec(), CreateMode::Persistent),
            TxnOp::delete("/p/b", None),
            TxnOp::delete("/p/c", None),
            TxnOp::delete("/p", None),
        ])
        .await
        .unwrap_err();
    assert!(
        matches!(err.transaction_failure(), Some((4, RegistryError::NotEmpty { .. }))),
        "a child the transaction created: {err}"
    );
    r.transaction(vec![
        TxnOp::delete("/p/b", None),
        TxnOp::delete("/p/a", None),
        TxnOp::delete("/p/c", None),
        TxnOp::delete("/p", None),
    ])
    .await
    .unwrap();
    assert!(!r.exists("/p").await.unwrap());

    r.create("/q/held", b"old", CreateMode::Ephemeral).await.unwrap();
    let results = r
        .transaction(vec![
            TxnOp::delete("/q/held", Some(0)),
            TxnOp::create("/q/held", b"mine".to_vec(), CreateMode::Ephemeral),
            TxnOp::create("/q/gone", b"".to_vec(), CreateMode::Persistent),
            TxnOp::delete("/q/gone", Some(0)),
            TxnOp::create("/q/twice", b"1".to_vec(), CreateMode::Persistent),
            TxnOp::set("/q/twice", b"2".to_vec(), Some(0)),
        ])
        .await
        .unwrap();
    assert_eq!(results[5], TxnResult::Set { version: 1 });
    let held = r.get("/q/held").await.unwrap().unwrap();
    assert_eq!((held.data.as_slice(), held.version, held.ephemeral), (&b"mine"[..], 0, true));
    assert!(!r.exists("/q/gone").await.unwrap());
    let twice = r.get("/q/twice").await.unwrap().unwrap();
    assert_eq!((twice.data.as_slice(), twice.version), (&b"2"[..], 1));

    r.transaction(vec![TxnOp::set("/q/held", b"again".to_vec(), Some(0))]).await.unwrap();
    let held = r.get("/q/held").await.unwrap().unwrap();
    assert!(held.ephemeral, "a set keeps the node ephemeral: {held:?}");
    // `expire` returns once the server has ended the session.
    c.control.expire().await;
    let observer = another(b, "transaction_ops_build_on_each_other").await;
    assert!(!observer.registry.exists("/q/held").await.unwrap(), "it dies with its session");
    assert!(observer.registry.exists("/q/twice").await.unwrap());
}

pub async fn empty_transaction(b: &dyn Backend) {
    let c = fresh(b, "empty_transaction").await;
    assert!(c.registry.transaction(Vec::new()).await.unwrap().is_empty());
}

pub async fn failed_transaction_emits_nothing(b: &dyn Backend) {
    let c = fresh(b, "failed_transaction_emits_nothing").await;
    let r = &c.registry;
    r.create("/w/taken", b"", CreateMode::Persistent).await.unwrap();
    let (mut stream, _) = watch_with_snapshot(r.as_ref(), "/w").await;
    let err = r
        .transaction(vec![
            TxnOp::create("/w/a", b"".to_vec(), CreateMode::Persistent),
            TxnOp::create("/w/taken", b"".to_vec(), CreateMode::Persistent),
        ])
        .await;
    assert!(err.is_err());
    assert_quiet(&mut stream, "a failed transaction").await;
}

// ---------------------------------------------------------------- concurrency

pub async fn concurrent_create_one_wins(b: &dyn Backend) {
    let ns = "concurrent_create_one_wins";
    fresh(b, ns).await;
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(another(b, ns).await);
    }
    let wins = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (i, c) in clients.iter().enumerate() {
        let r = shared(c);
        let wins = wins.clone();
        tasks.push(tokio::spawn(async move {
            match r.create("/race", i.to_string().as_bytes(), CreateMode::Ephemeral).await {
                Ok(_) => {
                    wins.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => assert!(e.is_node_exists(), "losers see NodeExists: {e}"),
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(wins.load(Ordering::SeqCst), 1, "exactly one create wins");
}

pub async fn concurrent_compare_and_set(b: &dyn Backend) {
    let ns = "concurrent_compare_and_set";
    let first = fresh(b, ns).await;
    first.registry.create("/counter", b"0", CreateMode::Persistent).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let r = shared(&another(b, ns).await);
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
                loop {
                    let node = r.get("/counter").await.unwrap().unwrap();
                    let n: u64 = node.text().parse().unwrap();
                    match r
                        .set("/counter", (n + 1).to_string().as_bytes(), Some(node.version))
                        .await
                    {
                        Ok(_) => break,
                        Err(RegistryError::BadVersion { .. }) => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let node = first.registry.get("/counter").await.unwrap().unwrap();
    assert_eq!(node.text(), "40", "no update lost under compare-and-set");
    assert_eq!(node.version, 40);
}

// ---------------------------------------------------------------- watches

pub async fn watch_opens_with_snapshot(b: &dyn Backend) {
    let c = fresh(b, "watch_opens_with_snapshot").await;
    let r = &c.registry;
    r.create("/w/a", b"1", CreateMode::Persistent).await.unwrap();
    r.create("/w/a/b", b"2", CreateMode::Ephemeral).await.unwrap();
    r.create("/other", b"", CreateMode::Persistent).await.unwrap();
    let (_stream, snapshot) = watch_with_snapshot(r.as_ref(), "/w").await;
    let paths: Vec<&str> = snapshot.keys().map(String::as_str).collect();
    assert_eq!(paths, vec!["/w", "/w/a", "/w/a/b"]);
    assert_eq!(snapshot["/w/a"].data, b"1");
    assert!(snapshot["/w/a/b"].ephemeral);
}

pub async fn watch_missing_path(b: &dyn Backend) {
    let c = fresh(b, "watch_missing_path").await;
    let r = &c.registry;
    let (mut stream, snapshot) = watch_with_snapshot(r.as_ref(), "/later/x").await;
    assert!(snapshot.is_empty());
    r.create("/later/x/y", b"v", CreateMode::Persistent).await.unwrap();
    let first = next_event(&mut stream).await;
    assert_eq!(
        first.path(),
        Some("/later/x"),
        "the watched node's creation comes first: {first:?}"
    );
    assert!(matches!(first, WatchEvent::Created { .. }));
    let second = next_event(&mut stream).await;
    assert!(
        matches!(second, WatchEvent::Created { ref path, ref node } if path == "/later/x/y" && node.data == b"v"),
        "{second:?}"
    );
}

pub async fn watch_reports_changes_in_order(b: &dyn Backend) {
    let c = fresh(b, "watch_reports_changes_in_order").await;
    let r = &c.registry;
    r.create("/w", b"", CreateMode::Persistent).await.unwrap();
    let (mut stream, _) = watch_with_snapshot(r.as_ref(), "/w").await;
    r.create("/w/n", b"a", CreateMode::Persistent).await.unwrap();
    r.set("/w/n", b"b", None).await.unwrap();
    r.set("/w/n", b"c", None).await.unwrap();
    r.delete("/w/n", None).await.unwrap();
    r.create("/w/n", b"d", CreateMode::Ephemeral).await.unwrap();
    let mut got = Vec::new();
    for _ in 0..5 {
        got.push(next_event(&mut stream).await);
    }
    let summary: Vec<String> = got
        .iter()
        .map(|e| match e {
            WatchEvent::Created { path, node } => {
                format!("created {path} {} v{}", node.text(), node.version)
            }
            WatchEvent::Changed { path, node } => {
                format!("changed {path} {} v{}", node.text(), node.version)
            }
            WatchEvent::Deleted { path } => format!("deleted {path}"),
            WatchEvent::Resync { .. } => "resync".into(),
            WatchEvent::Rescoped { .. } => "rescoped".into(),
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            "created /w/n a v0",
            "changed /w/n b v1",
            "changed /w/n c v2",
            "deleted /w/n",
            "created /w/n d v0"
        ]
    );
    assert_quiet(&mut stream, "after the five changes").await;
}

pub async fn watch_subtree_scoping(b: &dyn Backend) {
    let c = fresh(b, "watch_subtree_scoping").await;
    let r = &c.registry;
    r.create("/job", b"", CreateMode::Persistent).await.unwrap();
    let (mut stream, _) = watch_with_snapshot(r.as_ref(), "/job").await;
    r.create("/jobs/x", b"", CreateMode::Persistent).await.unwrap();
    r.create("/job2", b"", CreateMode::Persistent).await.unwrap();
    r.create("/other/job", b"", CreateMode::Persistent).await.unwrap();
    r.create("/job/deep/er/node", b"", CreateMode::Persistent).await.unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(next_event(&mut stream).await.path().unwrap_or_default().to_owned());
    }
    assert_eq!(
        seen,
        vec!["/job/deep", "/job/deep/er", "/job/deep/er/node"],
        "only the subtree, deep included"
    );
    assert_quiet(&mut stream, "outside the subtree").await;
}

pub async fn watch_complete_under_concurrent_writers(b: &dyn Backend) {
    let ns = "watch_complete_under_concurrent_writers";
    let watcher = fresh(b, ns).await;
    watcher.registry.create("/w", b"", CreateMode::Persistent).await.unwrap();
    let (mut stream, mut view) = watch_with_snapshot(watcher.registry.as_ref(), "/w").await;
    const WRITERS: usize = 4;
    const WRITES: u64 = 15;
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let r = shared(&another(b, ns).await);
        tasks.push(tokio::spawn(async move {
            let p = format!("/w/writer-{w}");
            r.create(&p, b"0", CreateMode::Persistent).await.unwrap();
            for i in 1..=WRITES {
                r.set(&p, i.to_string().as_bytes(), None).await.unwrap();
            }
            r.create(&format!("{p}-done"), b"", CreateMode::Persistent).await.unwrap();
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let events = events_until(&mut stream, &mut view, |v| {
        (0..WRITERS).all(|w| v.contains_key(&format!("/w/writer-{w}-done")))
    })
    .await;
    assert_eq!(
        view,
        read_tree(watcher.registry.as_ref(), "/w").await,
        "the watch view equals the registry"
    );
    // Per path, versions arrive in order and, with exact watches, every one of them.
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    let mut count: BTreeMap<String, u64> = BTreeMap::new();
    for ev in &events {
        if let WatchEvent::Created { path, node } | WatchEvent::Changed { path, node } = ev {
            if let Some(prev) = last.insert(path.clone(), node.version) {
                assert!(node.version > prev, "{path}: version {} after {prev}", node.version);
            }
            *count.entry(path.clone()).or_default() += 1;
        }
    }
    if watcher.registry.capability().exact_watch {
        for w in 0..WRITERS {
            assert_eq!(
                count[&format!("/w/writer-{w}")],
                WRITES + 1,
                "every write of writer {w} seen once"
            );
        }
    }
}

pub async fn watch_sees_other_sessions_ephemerals_vanish(b: &dyn Backend) {
    let ns = "watch_sees_other_sessions_ephemerals_vanish";
    let watcher = fresh(b, ns).await;
    let owner = another(b, ns).await;
    owner.registry.create("/w/e1", b"", CreateMode::Ephemeral).await.unwrap();
    owner.registry.create("/w/e2", b"", CreateMode::Ephemeral).await.unwrap();
    let (mut stream, mut view) = watch_with_snapshot(watcher.registry.as_ref(), "/w").await;
    owner.control.expire().await;
    let events = events_until(&mut stream, &mut view, |v| {
        !v.contains_key("/w/e1") && !v.contains_key("/w/e2")
    })
    .await;
    assert!(events.iter().all(|e| matches!(e, WatchEvent::Deleted { .. })), "{events:?}");
}

pub async fn watch_resyncs_after_expiry(b: &dyn Backend) {
    let ns = "watch_resyncs_after_expiry";
    let watcher = fresh(b, ns).await;
    let writer = another(b, ns).await;
    writer.registry.create("/w/keep", b"1", CreateMode::Persistent).await.unwrap();
    let mut session = watcher.registry.session_events();
    let (mut stream, _) = watch_with_snapshot(watcher.registry.as_ref(), "/w").await;
    watcher.control.expire().await;
    await_new_session(&mut session).await;
    writer.registry.set("/w/keep", b"2", None).await.unwrap();
    writer.registry.create("/w/new", b"", CreateMode::Persistent).await.unwrap();
    // Whatever the backend delivers, a resync comes and the view converges to the registry.
    let mut view: BTreeMap<String, Node> = BTreeMap::new();
    let mut resynced = false;
    while !(resynced
        && view.contains_key("/w/new")
        && view.get("/w/keep").is_some_and(|n| n.data == b"2"))
    {
        let ev = next_event(&mut stream).await;
        resynced |= matches!(ev, WatchEvent::Resync { .. });
        if resynced {
            ev.apply_to(&mut view);
        }
    }
    assert_eq!(view, read_tree(watcher.registry.as_ref(), "/w").await);
}

pub async fn watch_ends_on_close(b: &dyn Backend) {
    let c = fresh(b, "watch_ends_on_close").await;
    let (mut stream, _) = watch_with_snapshot(c.registry.as_ref(), "/w").await;
    c.registry.close().await.unwrap();
    let end = tokio::time::timeout(PATIENCE, stream.next()).await.expect("stream ends after close");
    assert_eq!(end, None);
}

pub async fn watch_many_subscribers(b: &dyn Backend) {
    let ns = "watch_many_subscribers";
    let writer = fresh(b, ns).await;
    let mut streams = Vec::new();
    for _ in 0..3 {
        let c = another(b, ns).await;
        let (s, _) = watch_with_snapshot(c.registry.as_ref(), "/w").await;
        streams.push((c, s));
    }
    writer.registry.create("/w/x", b"1", CreateMode::Persistent).await.unwrap();
    for (_, s) in &mut streams {
        let ev = next_event(s).await;
        assert!(matches!(ev, WatchEvent::Created { ref path, .. } if path == "/w"), "{ev:?}");
        let ev = next_event(s).await;
        assert!(matches!(ev, WatchEvent::Created { ref path, .. } if path == "/w/x"), "{ev:?}");
    }
}

// ---------------------------------------------------------------- watch scopes

pub async fn watch_scope_node_entry(b: &dyn Backend) {
    let c = fresh(b, "watch_scope_node_entry").await;
    let r = &c.registry;
    let scope = WatchScope::node("/w/n");
    let (mut stream, snapshot) = watch_scope_with_snapshot(r.as_ref(), &scope).await;
    assert!(snapshot.is_empty(), "the node does not exist yet: {snapshot:?}");
    // The parent /w is created too, uncovered.
    r.create("/w/n", b"a", CreateMode::Persistent).await.unwrap();
    assert_eq!(next_summaries(&mut stream, 1).await, vec!["created /w/n a v0"]);
    // Children and siblings are not the node.
    r.create("/w/n/child", b"c", CreateMode::Persistent).await.unwrap();
    r.set("/w/n/child", b"c2", None).await.unwrap();
    r.create("/w/m", b"", CreateMode::Persistent).await.unwrap();
    r.set("/w", b"parent", None).await.unwrap();
    r.set("/w/n", b"b", None).await.unwrap();
    assert_eq!(
        next_summaries(&mut stream, 1).await,
        vec!["changed /w/n b v1"],
        "the next event after changes of its children, sibling and parent is the node's own"
    );
    r.delete("/w/n/child", None).await.unwrap();
    r.delete("/w/n", None).await.unwrap();
    r.create("/w/n", b"again", CreateMode::Ephemeral).await.unwrap();
    assert_eq!(next_summaries(&mut stream, 2).await, vec!["deleted /w/n", "created /w/n again v0"]);
    assert_quiet(&mut stream, "after the node's last change").await;

    // A node entry's snapshot holds the node, not its children.
    r.create("/w/p/kid", b"k", CreateMode::Persistent).await.unwrap();
    let (_again, snapshot) = watch_scope_with_snapshot(r.as_ref(), &WatchScope::node("/w/p")).await;
    assert_eq!(snapshot.keys().collect::<Vec<_>>(), vec!["/w/p"]);
}

pub async fn watch_scope_mixed_entries(b: &dyn Backend) {
    let c = fresh(b, "watch_scope_mixed_entries").await;
    let r = &c.registry;
    for (p, d) in [
        ("/a/x", "1"),
        ("/b/c/y", "2"),
        ("/b/z", "3"),
        ("/d", "4"),
        ("/d/kid", "5"),
        ("/e/f", "6"),
        ("/e/g", "7"),
    ] {
        r.create(p, d.as_bytes(), CreateMode::Persistent).await.unwrap();
    }
    let scope = WatchScope::subtree("/a").with_subtree("/b/c").with_node("/d").with_node("/e/f");
    let (mut stream, snapshot) = watch_scope_with_snapshot(r.as_ref(), &scope).await;
    assert_eq!(
        snapshot.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["/a", "/a/x", "/b/c", "/b/c/y", "/d", "/e/f"],
        "the opening resync holds exactly the covered nodes, sorted"
    );
    assert_eq!(snapshot, read_scope(r.as_ref(), &scope).await);
    r.set("/b/z", b"out", None).await.unwrap();
    r.set("/e/f", b"6b", None).await.unwrap();
    r.create("/a/x/deep", b"in", CreateMode::Persistent).await.unwrap();
    r.set("/e/g", b"out", None).await.unwrap();
    r.create("/d/kid2", b"out", CreateMode::Persistent).await.unwrap();
    r.delete("/b/c/y", None).await.unwrap();
    r.set("/d", b"4b", None).await.unwrap();
    r.create("/b/cc", b"out", CreateMode::Persistent).await.unwrap();
    r.transaction(vec![
        TxnOp::set("/a/x", b"1b".to_vec(), None),
        TxnOp::set("/b/z", b"out".to_vec(), None),
        TxnOp::delete("/e/f", None),
    ])
    .await
    .unwrap();
    let mut got = next_summaries(&mut stream, 6).await;
    // The last two came from one transaction: in any order across entries.
    got[4..].sort();
    assert_eq!(
        got,
        vec![
            "changed /e/f 6b v1",
            "created /a/x/deep in v0",
            "deleted /b/c/y",
            "changed /d 4b v1",
            "changed /a/x 1b v1",
            "deleted /e/f",
        ]
    );
    assert_quiet(&mut stream, "only covered nodes").await;
}

/// Entries under one parent (the many entries of a job's scope, all under its root) among
/// nodes of that parent they do not cover: children of a node entry, look-alike names, the
/// parent itself. Backends may read such entries as the parent's subtree and filter it.
pub async fn watch_scope_entries_sharing_a_parent(b: &dyn Backend) {
    let c = fresh(b, "watch_scope_entries_sharing_a_parent").await;
    let r = &c.registry;
    for p in [
        "/j/config/a",
        "/j/configs",
        "/j/leader/election",
        "/j/sharding/0/running",
        "/j/sharding/1/instance",
        "/j/trigger/me",
        "/k/config",
    ] {
        r.create(p, p.as_bytes(), CreateMode::Persistent).await.unwrap();
    }
    let scope = WatchScope::subtree("/j/config")
        .with_node("/j/leader")
        .with_node("/j/sharding/0")
        .with_node("/j/trigger/me")
        .with_node("/j/absent");
    let (mut stream, snapshot) = watch_scope_with_snapshot(r.as_ref(), &scope).await;
    assert_eq!(
        snapshot.keys().map(String::as_str).collect::<Vec<_>>(),
        vec!["/j/config", "/j/config/a", "/j/leader", "/j/sharding/0", "/j/trigger/me"],
        "exactly the covered nodes: not the parent, a node entry's children, look-alikes"
    );
    assert_eq!(snapshot, read_scope(r.as_ref(), &scope).await);
    r.set("/j/configs", b"out", None).await.unwrap();
    r.set("/j/sharding/0/running", b"out", None).await.unwrap();
    r.set("/j/trigger/me", b"in", None).await.unwrap();
    assert_eq!(next_summaries(&mut stream, 1).await, vec!["changed /j/trigger/me in v1"]);
    // Entries added under the same parent bring exactly what they cover.
    let scoper = stream.scoper().expect("a backend's stream can change its scope");
    let wider = scope.clone().with_node("/j/configs").with_subtree("/j/sharding/1");
    scoper.rescope(scope.change_to(&wider, 1)).await.unwrap();
    match next_event(&mut stream).await {
        WatchEvent::Rescoped { added, .. } => assert_eq!(
            added.keys().map(String::as_str).collect::<Vec<_>>(),
            vec!["/j/configs", "/j/sharding/1", "/j/sharding/1/instance"],
            "what the change adds, and nothing else of the parent"
        ),
        other => panic!("expected the Rescoped event, got {other:?}"),
    }
    assert_quiet(&mut stream, "only covered nodes").await;
}

pub async fn watch_scope_overlap_reported_once(b: &dyn Backend) {
    let c = fresh(b, "watch_scope_overlap_reported_once").await;
    let r = &c.registry;
    // A node inside a subtree, a subtree inside another, a node that is also a subtree root.
    let scope = WatchScope::subtree("/o")
        .with_node("/o/x")
        .with_subtree("/o/y")
        .with_node("/o/y")
        .with_node("/o/y/z");
    let (mut stream, snapshot) = watch_scope_with_snapshot(r.as_ref(), &scope).await;
    assert!(snapshot.is_empty(), "{snapshot:?}");
    r.create("/o/x", b"1", CreateMode::Persistent).await.unwrap();
    r.set("/o/x", b"2", None).await.unwrap();
    r.create("/o/y/z", b"3", CreateMode::Persistent).await.unwrap();
    r.delete("/o/y/z", None).await.unwrap();
    assert_eq!(
        next_summaries(&mut stream, 6).await,
        vec![
            "created /o  v0",
            "created /o/x 1 v0",
            "changed /o/x 2 v1",
            "created /o/y  v0",
            "created /o/y/z 3 v0",
            "deleted /o/y/z",
        ],
        "each change once"
    );
    assert_quiet(&mut stream, "after the changes, each reported once").await;
    let (_again, snapshot) = watch_scope_with_snapshot(r.as_ref(), &scope).await;
    assert_eq!(snapshot.keys().collect::<Vec<_>>(), vec!["/o", "/o/x", "/o/y"]);
}

pub async fn watch_scope_outside_reaches_nothing(b: &dyn Backend) {
    let ns = "watch_scope_outside_reaches_nothing";
    let watcher = fresh(b, ns).await;
    let writer = another(b, ns).await;
    let w = &writer.registry;
    w.create("/job/sharding/0/instance", b"me", CreateMode::Persistent).await.unwrap();
    w.create("/job/config", b"c", CreateMode::Persistent).await.unwrap();
    let scope = WatchScope::subtree("/job/config").with_node("/job/sharding/0/instance");
    let (mut stream, _) = watch_scope_with_snapshot(watcher.registry.as_ref(), &scope).await;
    // A fire's markers and ledger, as another instance writes them: outside the scope.
    for round in 0..5 {
        w.create("/job/sharding/0/running", b"", CreateMode::Ephemeral).await.unwrap();
        w.create(&format!("/job/ledger/i{round}"), b"{}", CreateMode::Persistent).await.unwrap();
        w.delete("/job/sharding/0/running", None).await.unwrap();
    }
    w.set("/job/sharding/0/instance", b"other", None).await.unwrap();
    let ev = next_event(&mut stream).await;
    assert_eq!(
        summary(&ev),
        "changed /job/sharding/0/instance other v1",
        "the first event after changes outside the scope is the next covered change"
    );
    assert_quiet(&mut stream, "after the covered change").await;
}

pub async fn watch_scope_resyncs_after_expiry(b: &dyn Backend) {
    let ns = "watch_scope_resyncs_after_expiry";
    let watcher = fresh(b, ns).await;
    let writer = another(b, ns).await;
    let w = &writer.registry;
    for p in ["/r/n/kid", "/r/s/a", "/r/other"] {
        w.create(p, b"1", CreateMode::Persistent).await.unwrap();
    }
    let scope = WatchScope::node("/r/n").with_subtree("/r/s");
    let mut session = watcher.registry.session_events();
    let (mut stream, _) = watch_scope_with_snapshot(watcher.registry.as_ref(), &scope).await;
    watcher.control.expire().await;
    await_new_session(&mut session).await;
    w.set("/r/n", b"2", None).await.unwrap();
    w.create("/r/s/b", b"", CreateMode::Persistent).await.unwrap();
    w.create("/r/n/kid2", b"", CreateMode::Persistent).await.unwrap();
    w.set("/r/other", b"2", None).await.unwrap();
    let mut view: BTreeMap<String, Node> = BTreeMap::new();
    let mut resynced = false;
    while !(resynced
        && view.contains_key("/r/s/b")
        && view.get("/r/n").is_some_and(|n| n.data == b"2"))
    {
        let ev = next_event(&mut stream).await;
        if let WatchEvent::Resync { nodes } = &ev {
            resynced = true;
            assert!(
                nodes.keys().all(|p| scope.covers(p)),
                "the resync holds only covered nodes: {:?}",
                nodes.keys().collect::<Vec<_>>()
            );
        } else if let Some(p) = ev.path() {
            assert!(scope.covers(p), "an event outside the scope: {ev:?}");
        }
        if resynced {
            ev.apply_to(&mut view);
        }
    }
    assert_eq!(view, read_scope(watcher.registry.as_ref(), &scope).await);
}

pub async fn watch_scope_empty(b: &dyn Backend) {
    let c = fresh(b, "watch_scope_empty").await;
    let r = &c.registry;
    r.create("/x", b"", CreateMode::Persistent).await.unwrap();
    let (mut stream, snapshot) = watch_scope_with_snapshot(r.as_ref(), &WatchScope::new()).await;
    assert!(snapshot.is_empty(), "{snapshot:?}");
    r.create("/x/y", b"", CreateMode::Persistent).await.unwrap();
    r.set("/x", b"1", None).await.unwrap();
    assert_quiet(&mut stream, "an empty scope").await;
}

pub async fn watch_scope_invalid_paths(b: &dyn Backend) {
    let c = fresh(b, "watch_scope_invalid_paths").await;
    let r = &c.registry;
    let bad = [
        WatchScope::subtree("/ok").with_node("relative"),
        WatchScope::node("/ok").with_subtree("/trailing/"),
        WatchScope::subtree("/a//b"),
        WatchScope::node(""),
    ];
    for scope in bad {
        match r.watch_scope(scope.clone()).await {
            Err(RegistryError::InvalidPath { .. }) => {}
            Err(other) => panic!("{scope}: {other}"),
            Ok(_) => panic!("{scope}: accepted"),
        }
    }
}

pub async fn watch_scope_streams_of_one_client(b: &dyn Backend) {
    let c = fresh(b, "watch_scope_streams_of_one_client").await;
    let r = &c.registry;
    let (mut node, _) = watch_scope_with_snapshot(r.as_ref(), &WatchScope::node("/t/n")).await;
    let (mut wide, _) = watch_scope_with_snapshot(r.as_ref(), &WatchScope::subtree("/t")).await;
    r.create("/t/n", b"1", CreateMode::Persistent).await.unwrap();
    assert_eq!(next_summaries(&mut node, 1).await, vec!["created /t/n 1 v0"]);
    assert_eq!(next_summaries(&mut wide, 2).await, vec!["created /t  v0", "created /t/n 1 v0"]);
    // Dropping the wider stream leaves the node entry of the other as it was.
    drop(wide);
    r.create("/t/n/kid", b"", CreateMode::Persistent).await.unwrap();
    r.create("/t/m", b"", CreateMode::Persistent).await.unwrap();
    r.set("/t/n", b"2", None).await.unwrap();
    assert_eq!(next_summaries(&mut node, 1).await, vec!["changed /t/n 2 v1"]);
    // A subtree rooted at the node entry's path, on another stream.
    let (mut below, snapshot) =
        watch_scope_with_snapshot(r.as_ref(), &WatchScope::subtree("/t/n")).await;
    assert_eq!(snapshot.keys().collect::<Vec<_>>(), vec!["/t/n", "/t/n/kid"]);
    r.set("/t/n/kid", b"k", None).await.unwrap();
    r.set("/t/n", b"3", None).await.unwrap();
    assert_eq!(
        next_summaries(&mut below, 2).await,
        vec!["changed /t/n/kid k v1", "changed /t/n 3 v2"]
    );
    assert_eq!(next_summaries(&mut node, 1).await, vec!["changed /t/n 3 v2"]);
    drop(below);
    r.create("/t/n/kid2", b"", CreateMode::Persistent).await.unwrap();
    r.set("/t/n", b"4", None).await.unwrap();
    assert_eq!(
        next_summaries(&mut node, 1).await,
        vec!["changed /t/n 4 v3"],
        "after the subtree stream is gone, the node stream still sees its node and nothing else"
    );
    assert_quiet(&mut node, "the node's children").await;
}

/// A scope swapped the way a scheduler narrows and widens its watch (open the new stream,
/// then drop the old one) while another client writes what both cover: the new stream ends up
/// showing the registry, whichever direction the swap went. On ZooKeeper a swap changes the
/// client's server-side watches; the events that reached the client through a watch being
/// replaced must not go with it.
pub async fn watch_scope_swapped_under_writers(b: &dyn Backend) {
    let ns = "watch_scope_swapped_under_writers";
    let c = fresh(b, ns).await;
    let r = c.registry.clone();
    let writer = shared(&another(b, ns).await);
    r.create("/s", b"", CreateMode::Persistent).await.unwrap();
    const ROUNDS: usize = 4;
    const NODES: usize = 60;
    let wide = WatchScope::subtree("/s");
    for round in 0..ROUNDS {
        let paths: Vec<String> = (0..NODES).map(|i| format!("/s/r{round}-{i}")).collect();
        let narrow = paths.iter().fold(WatchScope::new(), |s, p| s.with_node(p.clone()));
        // Wide to narrow while the writer creates the nodes.
        let (old, _) = watch_scope_with_snapshot(r.as_ref(), &wide).await;
        let (mut new, mut view) = watch_scope_with_snapshot(r.as_ref(), &narrow).await;
        let (started, write) = writes(&writer, &paths, round, true);
        let _ = started.await;
        drop(old);
        write.await.unwrap();
        settle(&mut new, &mut view, &read_scope(r.as_ref(), &narrow).await, "wide to narrow").await;
        // Narrow to wide while the writer sets them.
        let (started, write) = writes(&writer, &paths, round, false);
        let _ = started.await;
        let (mut widened, mut view) = watch_scope_with_snapshot(r.as_ref(), &wide).await;
        drop(new);
        write.await.unwrap();
        settle(&mut widened, &mut view, &read_tree(r.as_ref(), "/s").await, "narrow to wide").await;
    }
}

/// A stream's scope changed in place: one `Rescoped` event in the stream's order, with the
/// nodes the new scope adds; nothing more of what it drops; what both cover goes on as before.
pub async fn watch_rescope_adds_and_drops(b: &dyn Backend) {
    let c = fresh(b, "watch_rescope_adds_and_drops").await;
    let r = &c.registry;
    for p in ["/r/a", "/r/b", "/r/x/1", "/r/y/1"] {
        r.create(p, p.as_bytes(), CreateMode::Persistent).await.unwrap();
    }
    let old = WatchScope::node("/r/a").with_subtree("/r/x");
    let (mut stream, snapshot) = watch_scope_with_snapshot(r.as_ref(), &old).await;
    assert_eq!(snapshot.keys().collect::<Vec<_>>(), vec!["/r/a", "/r/x", "/r/x/1"]);
    let scoper = stream.scoper().expect("a backend's stream can change its scope");
    assert!(
        matches!(
            scoper.rescope(old.change_to(&WatchScope::node("no/slash"), 1)).await,
            Err(RegistryError::InvalidPath { .. })
        ),
        "an invalid entry is refused"
    );
    let new = WatchScope::node("/r/b").with_subtree("/r/x").with_subtree("/r/y");
    let change = old.change_to(&new, 1);
    assert_eq!(change.remove, WatchScope::node("/r/a"));
    scoper.rescope(change.clone()).await.unwrap();
    match next_event(&mut stream).await {
        WatchEvent::Rescoped { change: applied, added } => {
            assert_eq!(applied, change, "the event names the change");
            assert_eq!(
                added.keys().collect::<Vec<_>>(),
                vec!["/r/b", "/r/y", "/r/y/1"],
                "what the new scope adds, and nothing the old one covered"
            );
            assert_eq!(added["/r/y/1"].text(), "/r/y/1");
        }
        other => panic!("expected the Rescoped event, got {other:?}"),
    }
    r.set("/r/a", b"dropped", None).await.unwrap();
    r.set("/r/b", b"added", None).await.unwrap();
    r.create("/r/x/2", b"kept", CreateMode::Persistent).await.unwrap();
    r.create("/r/y/2", b"added", CreateMode::Persistent).await.unwrap();
    assert_eq!(
        next_summaries(&mut stream, 3).await,
        vec!["changed /r/b added v1", "created /r/x/2 kept v0", "created /r/y/2 added v0"],
        "the dropped node is no longer reported; the kept and added ones are"
    );
    // A retry of the change (its answer lost, say) changes nothing and says nothing.
    scoper.rescope(change).await.unwrap();
    // Narrowed back: nothing added; the dropped subtree goes quiet.
    scoper.rescope(new.change_to(&WatchScope::subtree("/r/x"), 2)).await.unwrap();
    match next_event(&mut stream).await {
        WatchEvent::Rescoped { added, .. } => assert!(added.is_empty(), "{added:?}"),
        other => panic!("expected the Rescoped event, got {other:?}"),
    }
    r.set("/r/y/1", b"gone", None).await.unwrap();
    r.set("/r/x/1", b"still", None).await.unwrap();
    assert_eq!(next_summaries(&mut stream, 1).await, vec!["changed /r/x/1 still v1"]);
    assert_quiet(&mut stream, "the nodes the scope dropped").await;
    // Dropping the stream ends what its scoper can do.
    drop(stream);
    let dropped = scoper.rescope(WatchScope::new().change_to(&WatchScope::subtree("/r"), 3)).await;
    assert!(
        matches!(dropped, Err(RegistryError::Closed { .. })),
        "the stream is gone: {dropped:?}"
    );
}

/// Scopes changed in place back and forth (the scheduler's narrow and wide scopes) while
/// another client writes what they cover: the stream's view ends up showing the registry.
pub async fn watch_rescope_under_writers(b: &dyn Backend) {
    let ns = "watch_rescope_under_writers";
    let c = fresh(b, ns).await;
    let r = c.registry.clone();
    let writer = shared(&another(b, ns).await);
    r.create("/s", b"", CreateMode::Persistent).await.unwrap();
    const ROUNDS: usize = 4;
    const NODES: usize = 60;
    let wide = WatchScope::subtree("/s");
    let (mut stream, mut view) = watch_scope_with_snapshot(r.as_ref(), &wide).await;
    let scoper = stream.scoper().expect("a backend's stream can change its scope");
    let mut generation = 0;
    for round in 0..ROUNDS {
        let paths: Vec<String> = (0..NODES).map(|i| format!("/s/r{round}-{i}")).collect();
        let narrow = paths.iter().fold(WatchScope::new(), |s, p| s.with_node(p.clone()));
        let (started, write) = writes(&writer, &paths, round, true);
        let _ = started.await;
        generation += 1;
        scoper.rescope(wide.change_to(&narrow, generation)).await.unwrap();
        write.await.unwrap();
        settle(&mut stream, &mut view, &read_scope(r.as_ref(), &narrow).await, "wide to narrow")
            .await;
        let (started, write) = writes(&writer, &paths, round, false);
        let _ = started.await;
        generation += 1;
        scoper.rescope(narrow.change_to(&wide, generation)).await.unwrap();
        write.await.unwrap();
        settle(&mut stream, &mut view, &read_tree(r.as_ref(), "/s").await, "narrow to wide").await;
    }
}

/// A subtree's scope changed in place for its root's node and each child's (and back), the
/// way a scheduler watches an item it owns whole and one it does not node by node, while
/// another client writes every child: the stream's view ends up showing the registry. On
/// ZooKeeper, which keeps one watch per path and client, a node watch on the root takes the
/// place of the root's recursive watch the moment it is registered: a child written before its
/// own node watch is in place would be lost for good.
pub async fn watch_rescope_subtree_for_its_nodes_under_writers(b: &dyn Backend) {
    let ns = "watch_rescope_subtree_for_its_nodes_under_writers";
    let c = fresh(b, ns).await;
    let r = c.registry.clone();
    let writer = shared(&another(b, ns).await);
    const ROUNDS: usize = 6;
    const CHILDREN: usize = 80;
    let children: Vec<String> = (0..CHILDREN).map(|i| format!("/s/item/c{i:02}")).collect();
    for p in &children {
        r.create(p, b"", CreateMode::Persistent).await.unwrap();
    }
    // Written in the reverse of the order the watches are registered in: the last child
    // watched is among the first written.
    let mut reversed = children.clone();
    reversed.reverse();
    let whole = WatchScope::subtree("/s/item");
    let by_node = children.iter().fold(WatchScope::node("/s/item"), |s, p| s.with_node(p.clone()));
    let (mut stream, mut view) = watch_scope_with_snapshot(r.as_ref(), &whole).await;
    let scoper = stream.scoper().expect("a backend's stream can change its scope");
    let mut generation = 0;
    for round in 0..ROUNDS {
        for (from, to) in [(&whole, &by_node), (&by_node, &whole)] {
            let (started, write) = writes(&writer, &reversed, round, false);
            let _ = started.await;
            generation += 1;
            scoper.rescope(from.change_to(to, generation)).await.unwrap();
            write.await.unwrap();
            let what = if to == &whole { "nodes to subtree" } else { "subtree to nodes" };
            settle(&mut stream, &mut view, &read_scope(r.as_ref(), to).await, what).await;
        }
    }
}

/// Writes every path (creates, or sets), one after the other, on a task; the receiver hears
/// when a quarter of them are written.
fn writes(
    writer: &Arc<dyn crate::registry::CoordinatorRegistry>,
    paths: &[String],
    round: usize,
    create: bool,
) -> (tokio::sync::oneshot::Receiver<()>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (writer, paths) = (writer.clone(), paths.to_vec());
    let task = tokio::spawn(async move {
        let mut tx = Some(tx);
        for (i, p) in paths.iter().enumerate() {
            let data = format!("{round}.{i}");
            if create {
                writer.create(p, data.as_bytes(), CreateMode::Persistent).await.unwrap();
            } else {
                writer.set(p, data.as_bytes(), None).await.unwrap();
            }
            if i == paths.len() / 4 {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(());
                }
            }
        }
    });
    (rx, task)
}

/// Applies `stream`'s events to `view` until it equals `expected`; fails, saying what differs,
/// when no event comes for a while before it does.
async fn settle(
    stream: &mut crate::registry::WatchStream,
    view: &mut BTreeMap<String, Node>,
    expected: &BTreeMap<String, Node>,
    what: &str,
) {
    while view != expected {
        match tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
            Ok(Some(ev)) => ev.apply_to(view),
            Ok(None) => panic!("{what}: the stream ended"),
            Err(_) => {
                let wrong: Vec<&String> = expected
                    .iter()
                    .filter(|(p, n)| view.get(*p) != Some(n))
                    .map(|(p, _)| p)
                    .chain(view.keys().filter(|p| !expected.contains_key(*p)))
                    .collect();
                panic!("{what}: the stream's view differs from the registry at {wrong:?}");
            }
        }
    }
}

// ---------------------------------------------------------------- latches

pub async fn latch_exclusive_among_five(b: &dyn Backend) {
    let ns = "latch_exclusive_among_five";
    fresh(b, ns).await;
    let mut members = Vec::new();
    for i in 0..5 {
        let c = another(b, ns).await;
        let latch = c.registry.leader_latch("/election", &format!("member-{i}")).await.unwrap();
        members.push((c, latch));
    }
    // Exactly one acquires; give everybody time to settle.
    let mut leaders = Vec::new();
    for (i, (_, latch)) in members.iter_mut().enumerate() {
        if let Ok(Ok(Leadership::Acquired)) = tokio::time::timeout(QUIET * 3, latch.changed()).await
        {
            leaders.push(i);
        }
    }
    assert_eq!(leaders.len(), 1, "exactly one leader: {leaders:?}");
    let leader = leaders[0];
    let named = members[0].1.leader().await.unwrap();
    assert_eq!(named, Some(format!("member-{leader}")), "leader() names the holder");
    assert_eq!(members.iter().filter(|(_, l)| l.is_leader()).count(), 1);
}

pub async fn latch_handover_on_leave(b: &dyn Backend) {
    let ns = "latch_handover_on_leave";
    fresh(b, ns).await;
    let a = another(b, ns).await;
    let bb = another(b, ns).await;
    let mut la = a.registry.leader_latch("/election", "a").await.unwrap();
    await_leadership(la.as_mut(), PATIENCE).await.unwrap();
    let mut lb = bb.registry.leader_latch("/election", "b").await.unwrap();
    assert!(tokio::time::timeout(QUIET, lb.changed()).await.is_err(), "b must wait while a leads");
    la.leave().await.unwrap();
    await_leadership(lb.as_mut(), PATIENCE).await.unwrap();
    assert_eq!(lb.leader().await.unwrap().as_deref(), Some("b"));
}

pub async fn latch_handover_on_expiry(b: &dyn Backend) {
    let ns = "latch_handover_on_expiry";
    fresh(b, ns).await;
    let holder = another(b, ns).await;
    let mut contenders = Vec::new();
    let mut lh = holder.registry.leader_latch("/election", "holder").await.unwrap();
    await_leadership(lh.as_mut(), PATIENCE).await.unwrap();
    for i in 0..4 {
        let c = another(b, ns).await;
        let l = c.registry.leader_latch("/election", &format!("c{i}")).await.unwrap();
        contenders.push((c, l));
    }
    holder.control.expire().await;
    let lost = tokio::time::timeout(PATIENCE, lh.changed()).await.expect("holder told").unwrap();
    assert_eq!(lost, Leadership::Lost, "the holder is told it lost leadership");
    assert!(!lh.is_leader());
    // The longest-waiting contender takes over, exactly one.
    let (_, first) = &mut contenders[0];
    await_leadership(first.as_mut(), PATIENCE).await.unwrap();
    for (_, other) in contenders.iter_mut().skip(1) {
        assert!(tokio::time::timeout(QUIET, other.changed()).await.is_err(), "only one takes over");
    }
    // The expired holder rejoined on its new session and waits at the back.
    assert!(
        tokio::time::timeout(QUIET, lh.changed()).await.is_err(),
        "old holder is a follower now"
    );
    let _keep = holder;
}

pub async fn latch_rejoins_after_expiry(b: &dyn Backend) {
    let ns = "latch_rejoins_after_expiry";
    fresh(b, ns).await;
    let a = another(b, ns).await;
    let other = another(b, ns).await;
    let mut la = a.registry.leader_latch("/election", "a").await.unwrap();
    await_leadership(la.as_mut(), PATIENCE).await.unwrap();
    let lo = other.registry.leader_latch("/election", "other").await.unwrap();
    a.control.expire().await;
    assert_eq!(la.changed().await.unwrap(), Leadership::Lost);
    lo.leave().await.unwrap();
    // With the other member gone, `a` (re-joined on its new session) leads again.
    await_leadership(la.as_mut(), PATIENCE).await.unwrap();
    assert_eq!(la.leader().await.unwrap().as_deref(), Some("a"));
}

pub async fn latch_rejects_bad_participant(b: &dyn Backend) {
    let c = fresh(b, "latch_rejects_bad_participant").await;
    let err = c.registry.leader_latch("/election", "a/b").await.unwrap_err();
    assert!(matches!(err, RegistryError::InvalidPath { .. }), "{err}");
    let err = c.registry.leader_latch("bad path", "a").await.unwrap_err();
    assert!(matches!(err, RegistryError::InvalidPath { .. }), "{err}");
}

// ---------------------------------------------------------------- mutex

pub async fn mutex_excludes(b: &dyn Backend) {
    let ns = "mutex_excludes";
    let first = fresh(b, ns).await;
    first.registry.create("/count", b"0", CreateMode::Persistent).await.unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for w in 0..4 {
        let r = shared(&another(b, ns).await);
        let inside = inside.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let guard = r.lock("/lock", &format!("w{w}"), PATIENCE).await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                // Read-modify-write without a version: only the mutex protects it.
                let n: u64 = r.get("/count").await.unwrap().unwrap().text().parse().unwrap();
                tokio::time::sleep(Duration::from_millis(5)).await;
                r.set("/count", (n + 1).to_string().as_bytes(), None).await.unwrap();
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(first.registry.get_text("/count").await.unwrap().as_deref(), Some("20"));
}

pub async fn mutex_timeout_leaves_no_waiter(b: &dyn Backend) {
    let ns = "mutex_timeout_leaves_no_waiter";
    let a = fresh(b, ns).await;
    let bb = another(b, ns).await;
    let held = a.registry.lock("/lock", "a", PATIENCE).await.unwrap();
    let err = bb.registry.lock("/lock", "b", QUIET).await.unwrap_err();
    assert!(matches!(err, RegistryError::Timeout { .. }), "{err}");
    assert_eq!(a.registry.children("/lock").await.unwrap().len(), 1, "the timed-out waiter left");
    held.release().await.unwrap();
    let again = bb.registry.lock("/lock", "b", PATIENCE).await.unwrap();
    again.release().await.unwrap();
    assert!(a.registry.children("/lock").await.unwrap().is_empty());
}

pub async fn mutex_freed_by_holder_expiry(b: &dyn Backend) {
    let ns = "mutex_freed_by_holder_expiry";
    let a = fresh(b, ns).await;
    let bb = another(b, ns).await;
    let _held = a.registry.lock("/lock", "a", PATIENCE).await.unwrap();
    a.control.expire().await;
    let got = bb.registry.lock("/lock", "b", PATIENCE).await.unwrap();
    got.release().await.unwrap();
}

// ---------------------------------------------------------------- time

pub async fn registry_time_is_sane(b: &dyn Backend) {
    let c = fresh(b, "registry_time_is_sane").await;
    let t1 = c.registry.registry_time().await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let t2 = c.registry.registry_time().await.unwrap();
    assert!(t1 > 946_684_800_000, "after the year 2000: {t1}");
    assert!(t2 >= t1, "does not go back: {t1} then {t2}");
}

/// Expands to one test per case of the behaviour suite. See the [module docs](crate::testkit).
#[macro_export]
macro_rules! registry_behaviour_suite {
    ($(#[$attr:meta])* backend = $backend:expr) => {
        $crate::registry_behaviour_suite!(@cases [$(#[$attr])*] ($backend)
            create_and_get create_existing_fails create_makes_parents get_missing_is_none
            exists_follows_create_and_delete set_increments_version set_with_expected_version
            set_stale_version_fails set_missing_fails delete_with_version delete_missing_fails
            delete_with_children_fails delete_recursive_removes_subtree delete_recursive_missing_is_ok
            children_sorted children_of_missing_fails binary_and_empty_data data_size_limit
            sequential_names sequential_per_parent sequential_never_reused ephemeral_sequential
            ephemeral_dies_on_close ephemeral_dies_on_expiry ephemeral_has_no_children
            closed_client_fails session_stream_opens_connected session_expiry_then_new_session
            session_close_ends_stream session_lost_before_server_expiry invalid_paths_rejected root_is_read_only namespaces_isolated
            transaction_commits_all transaction_failure_leaves_no_trace transaction_check_version
            transaction_check_absent
            transaction_create_needs_parent transaction_sees_its_own_ops transaction_delete_rules
            transaction_each_condition_fails_alone transaction_ops_build_on_each_other
            empty_transaction failed_transaction_emits_nothing concurrent_create_one_wins
            concurrent_compare_and_set watch_opens_with_snapshot watch_missing_path
            watch_reports_changes_in_order watch_subtree_scoping watch_complete_under_concurrent_writers
            watch_sees_other_sessions_ephemerals_vanish watch_resyncs_after_expiry watch_ends_on_close
            watch_many_subscribers watch_scope_node_entry watch_scope_mixed_entries
            watch_scope_entries_sharing_a_parent
            watch_scope_overlap_reported_once watch_scope_outside_reaches_nothing
            watch_scope_resyncs_after_expiry watch_scope_empty watch_scope_invalid_paths
            watch_scope_streams_of_one_client watch_scope_swapped_under_writers
            watch_rescope_adds_and_drops watch_rescope_under_writers
            watch_rescope_subtree_for_its_nodes_under_writers
            latch_exclusive_among_five latch_handover_on_leave
            latch_handover_on_expiry latch_rejoins_after_expiry latch_rejects_bad_participant
            mutex_excludes mutex_timeout_leaves_no_waiter mutex_freed_by_holder_expiry
            registry_time_is_sane
        );
    };
    // Two steps because the attributes repeat per case: `$attrs` travels as one token tree.
    (@cases $attrs:tt ($backend:expr) $($case:ident)*) => {
        $( $crate::registry_behaviour_suite!(@case $attrs ($backend) $case); )*
    };
    (@case [$(#[$attr:meta])*] ($backend:expr) $case:ident) => {
        $(#[$attr])*
        async fn $case() {
            let backend = $backend;
            $crate::testkit::cases::$case(&backend).await;
        }
    };
}
