//! What the tests against a real ZooKeeper share: finding the server, options with short
//! timeouts, forcing a real session expiry, a loopback proxy that can cut the link, and the
//! behaviour-suite backend.
//!
//! The server comes from `SHARDCRON_ZK` (`host:port`, as `scripts/zookeeper.sh start` writes it
//! to `target/zookeeper/env`). Without it the tests print a note and pass, unless
//! `SHARDCRON_REQUIRE_SERVERS=1` says a server must be there: then they fail.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use shardcron_core::testkit::proxy::LinkProxy;
use shardcron_core::testkit::{Backend, SessionControl, TestClient};
use shardcron_registry_zk::zookeeper_client as zk;
use shardcron_registry_zk::{RetryPolicy, ZkOptions, ZkRegistry};

/// The server's address, or `None` (after a printed note) when the test should skip.
pub fn server(test: &str) -> Option<String> {
    match std::env::var("SHARDCRON_ZK") {
        Ok(addr) if !addr.trim().is_empty() => Some(addr.trim().to_owned()),
        _ if std::env::var("SHARDCRON_REQUIRE_SERVERS").as_deref() == Ok("1") => panic!(
            "{test}: SHARDCRON_REQUIRE_SERVERS=1 but SHARDCRON_ZK is not set; start a server with \
             `scripts/zookeeper.sh start` and `source target/zookeeper/env`"
        ),
        _ => {
            // Once per test binary, and past libtest's capture (which hides what passing tests
            // print with `eprintln!`), so the skip is seen.
            static NOTED: AtomicBool = AtomicBool::new(false);
            if !NOTED.swap(true, Ordering::SeqCst) {
                let _ = writeln!(
                    std::io::stderr(),
                    "note: SHARDCRON_ZK is not set: skipping the ZooKeeper tests here, {test} \
                     first (scripts/zookeeper.sh start; source target/zookeeper/env)"
                );
            }
            None
        }
    }
}

/// A namespace prefix unique to this test process, so runs never see each other's leftovers.
pub fn run_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or_default();
        format!("/shardcron-test-{}-{millis}", std::process::id())
    })
}

/// `{run prefix}/{name}`.
pub fn namespace(name: &str) -> String {
    format!("{}/{name}", run_prefix())
}

/// A top-level namespace `{run prefix}-{name}`, for clients with digest credentials: the
/// parents of a namespace get the creating client's ACL, so a namespace with credentials must
/// not share its parent with the other tests.
pub fn top_namespace(name: &str) -> String {
    format!("{}-{name}", run_prefix())
}

/// Options for tests: short, but not flaky on a loaded 2-core machine.
pub fn options(hosts: &str, namespace: &str) -> ZkOptions {
    ZkOptions::new(hosts, namespace)
        .session_timeout(Duration::from_secs(4))
        .connect_timeout(Duration::from_secs(10))
        .operation_timeout(Duration::from_secs(15))
        .retry(RetryPolicy {
            base: Duration::from_millis(50),
            max: Duration::from_millis(500),
            attempts: 5,
        })
}

/// Makes the server expire `session` for real, and returns once it has (ephemerals deleted).
///
/// The session-id/password trick: a second connection that presents the same session takes it
/// over, and closing that connection closes the session on the server. If the original client
/// wins the session back before the close (it reconnects at once), the close does nothing, so
/// this repeats until the server answers a takeover attempt with "session expired".
pub async fn expire_session(hosts: &str, session: zk::SessionInfo) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(30) {
        let attempt = zk::Client::connector()
            .with_session(session.clone())
            .with_fail_eagerly()
            .with_connection_timeout(Duration::from_secs(2))
            .connect(hosts)
            .await;
        match attempt {
            Ok(client) => {
                let mut state = client.state_watcher();
                // The last clone gone: the client sends closeSession.
                drop(client);
                let closed = tokio::time::timeout(Duration::from_secs(5), async {
                    while !state.peek_state().is_terminated() {
                        tokio::select! {
                            _ = state.changed() => {}
                            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                        }
                    }
                })
                .await;
                if closed.is_err() {
                    eprintln!("expire_session: the takeover client did not close in 5 s; again");
                }
            }
            Err(zk::Error::SessionExpired) => return,
            Err(e) => {
                eprintln!("expire_session: takeover attempt failed: {e}; again");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    panic!("could not expire session {:?} within 30 s", session.id());
}

/// Expires `registry`'s session for real and waits until the client has noticed (its session
/// id changed): the link through `proxy` is cut first, so the client cannot win the session back
/// during the takeover (see [`expire_session`]), and restored after.
pub async fn expire_behind(proxy: &Proxy, hosts: &str, registry: &ZkRegistry) {
    let old = registry.session_id();
    let session = registry.zk_session().expect("a client to expire has a session");
    proxy.pause();
    expire_session(hosts, session).await;
    proxy.resume();
    eventually(Duration::from_secs(30), "the client notices its expired session", || async {
        registry.session_id() != old
    })
    .await;
}

/// The registry behaviour suite's view of a real server. Every client talks to the server
/// through its own [`Proxy`], so that its session can be expired cleanly.
pub struct ZkBackend {
    hosts: String,
}

impl ZkBackend {
    /// `None` (skip) when no server is configured; see [`server`].
    pub fn from_env(test: &str) -> Option<Self> {
        server(test).map(|hosts| ZkBackend { hosts })
    }
}

struct ZkControl {
    hosts: String,
    proxy: Proxy,
    registry: ZkRegistry,
}

#[async_trait]
impl SessionControl for ZkControl {
    async fn expire(&self) {
        expire_behind(&self.proxy, &self.hosts, &self.registry).await;
    }

    async fn cut(&self) {
        self.proxy.freeze();
    }

    async fn heal(&self) {
        self.proxy.thaw();
    }
}

#[async_trait]
impl Backend for ZkBackend {
    async fn client(&self, ns: &str) -> TestClient {
        let proxy = Proxy::start(&self.hosts).await;
        let registry = ZkRegistry::connect(options(&proxy.addr, &namespace(ns)))
            .await
            .unwrap_or_else(|e| panic!("connect to {} in {ns}: {e}", self.hosts));
        let control = ZkControl { hosts: self.hosts.clone(), proxy, registry: registry.clone() };
        TestClient { registry: Arc::new(registry), control: Box::new(control) }
    }
}

/// A loopback TCP proxy in front of the server (the testkit's [`LinkProxy`]) that can cut
/// every connection and refuse new ones for a while, or freeze the link silently: a network
/// partition as the client sees it. Its tasks live as long as the test's runtime (a client may
/// outlive the handle that made it).
pub struct Proxy {
    pub addr: String,
    link: LinkProxy,
}

impl Proxy {
    pub async fn start(upstream: &str) -> Proxy {
        let link = LinkProxy::start(upstream).await;
        Proxy { addr: link.addr(), link }
    }

    /// Cuts every open connection and refuses new ones until [`Proxy::resume`].
    pub fn pause(&self) {
        self.link.sever();
    }

    pub fn resume(&self) {
        self.link.restore();
    }

    /// Stops every byte both ways without closing anything, until [`Proxy::thaw`].
    pub fn freeze(&self) {
        self.link.freeze();
    }

    pub fn thaw(&self) {
        self.link.thaw();
    }

    /// Stops the proxy for good: every connection through it fails from now on.
    pub fn shut(&self) {
        self.link.shut();
    }
}

/// Polls `check` every 20 ms until it holds, at most `limit`.
pub async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(started.elapsed() < limit, "not within {limit:?}: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
