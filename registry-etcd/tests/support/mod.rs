//! What the etcd tests share: finding the test server, private servers a test may stop and
//! restart, a loopback proxy that cuts a client off, and the suite's backend.
//!
//! Every test needs `SHARDCRON_ETCD` (set by `scripts/etcd.sh start`). Without it a test prints
//! a note and passes, unless `SHARDCRON_REQUIRE_SERVERS=1`, in which case it fails loudly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::net::TcpListener as StdListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use shardcron_core::testkit::proxy::LinkProxy;
use shardcron_core::testkit::{Backend, SessionControl, TestClient};
use shardcron_registry_etcd::{EtcdOptions, EtcdRegistry};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// Session TTL of test clients: short enough that expiry tests are quick (keep-alives every
/// 1.3 s), long enough that a loaded machine does not expire sessions by accident.
pub const TEST_TTL: Duration = Duration::from_secs(4);

/// The shared test server's endpoint, or `None` (with a note) when the test should skip.
pub fn endpoint() -> Option<String> {
    match std::env::var("SHARDCRON_ETCD") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var("SHARDCRON_REQUIRE_SERVERS").is_ok_and(|v| v == "1") {
                panic!(
                    "SHARDCRON_REQUIRE_SERVERS=1 but SHARDCRON_ETCD is not set: start a server \
                     with scripts/etcd.sh start and source target/test-servers/etcd.env"
                );
            }
            // Once per test binary, and straight to stderr: the harness would swallow a
            // captured `eprintln!` of a passing test.
            static NOTED: std::sync::Once = std::sync::Once::new();
            NOTED.call_once(|| {
                use std::io::Write;
                let _ = writeln!(
                    std::io::stderr(),
                    "note: SHARDCRON_ETCD is not set; skipping the etcd tests of this binary \
                     (scripts/etcd.sh start, then source target/test-servers/etcd.env)"
                );
            });
            None
        }
    }
}

/// Test options: short TTL and timeouts.
pub fn options(endpoint: &str, namespace: &str) -> EtcdOptions {
    EtcdOptions::new([endpoint])
        .namespace(namespace)
        .lease_ttl(TEST_TTL)
        .connect_timeout(Duration::from_secs(10))
        .operation_timeout(Duration::from_secs(10))
}

pub async fn connect(endpoint: &str, namespace: &str) -> EtcdRegistry {
    EtcdRegistry::connect(options(endpoint, namespace))
        .await
        .unwrap_or_else(|e| panic!("connect to {endpoint} namespace {namespace}: {e}"))
}

/// A plain etcd client for doing things behind the registry's back.
pub async fn admin(endpoint: &str) -> etcd_client::Client {
    etcd_client::Client::connect([endpoint], None).await.expect("admin client")
}

/// A namespace no earlier run used, so that leftovers never interfere.
pub fn unique_namespace(name: &str) -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    let run = std::process::id();
    format!("/test/{name}-{run}-{}", N.fetch_add(1, Ordering::Relaxed))
}

// ------------------------------------------------------------------ the behaviour suite backend

pub struct EtcdBackend {
    endpoint: String,
}

impl EtcdBackend {
    /// `None` when the suite should skip.
    pub fn from_env() -> Option<Self> {
        endpoint().map(|endpoint| EtcdBackend { endpoint })
    }
}

/// Expires a client's session for real: revokes its lease from another connection. etcd deletes
/// the lease's keys before answering, so the ephemerals are gone when this returns. Cuts the
/// client off silently by freezing the proxy it talks to etcd through.
struct RevokeLease {
    registry: EtcdRegistry,
    endpoint: String,
    link: LinkProxy,
}

#[async_trait]
impl SessionControl for RevokeLease {
    async fn expire(&self) {
        let lease = self.registry.lease_id().expect("a client with a live session");
        admin(&self.endpoint).await.lease_revoke(lease).await.expect("revoke the lease");
    }

    async fn cut(&self) {
        self.link.freeze();
    }

    async fn heal(&self) {
        self.link.thaw();
    }
}

#[async_trait]
impl Backend for EtcdBackend {
    async fn client(&self, namespace: &str) -> TestClient {
        // One namespace per case, under a prefix of this suite; `fresh` empties it. Every
        // client talks to etcd through a proxy of its own, so that a case can cut it off.
        let link = LinkProxy::start(&format!("127.0.0.1:{}", port_of(&self.endpoint))).await;
        let through = format!("http://{}", link.addr());
        let registry = connect(&through, &format!("/behaviour/{namespace}")).await;
        let control =
            RevokeLease { registry: registry.clone(), endpoint: self.endpoint.clone(), link };
        TestClient { registry: Arc::new(registry), control: Box::new(control) }
    }
}

// ------------------------------------------------------------------ private servers

/// An etcd server of one test, on its own loopback ports and data dir. Killed and removed on
/// drop. `stop` and `start` keep ports and data, like a real restart.
pub struct PrivateServer {
    pub client_port: u16,
    peer_port: u16,
    data_dir: PathBuf,
    extra: Vec<String>,
    child: Option<Child>,
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl PrivateServer {
    /// Starts a server (`extra` are more etcd flags, e.g. TLS files) and waits until it serves.
    pub async fn start(name: &str, extra: &[&str]) -> Self {
        let data_dir = std::env::temp_dir().join(format!(
            "shardcron-etcd-test-{name}-{}-{}",
            std::process::id(),
            free_port()
        ));
        let mut server = PrivateServer {
            client_port: free_port(),
            peer_port: free_port(),
            data_dir,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        server.restart().await;
        server
    }

    fn scheme(&self) -> &'static str {
        if self.extra.iter().any(|a| a.starts_with("--cert-file")) {
            "https"
        } else {
            "http"
        }
    }

    /// `http(s)://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme(), self.client_port)
    }

    /// Starts the (stopped) server again on the same ports and data dir.
    pub async fn restart(&mut self) {
        assert!(self.child.is_none(), "already running");
        let bin = std::env::var("SHARDCRON_ETCD_BIN").unwrap_or_else(|_| "etcd".into());
        let client = format!("{}://127.0.0.1:{}", self.scheme(), self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new(bin)
            .args(["--name", "private", "--data-dir"])
            .arg(&self.data_dir)
            .args(["--listen-client-urls", &client, "--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer, "--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("private={peer}")])
            .args(["--max-request-bytes", "10485760"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn etcd (apt-get install etcd-server, or set SHARDCRON_ETCD_BIN)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", self.client_port)).await.is_err() {
            assert!(Instant::now() < deadline, "private etcd did not start listening");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills the server (SIGKILL: no goodbye to clients), keeping its data.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

// ------------------------------------------------------------------ a proxy that cuts links

/// A loopback TCP proxy in front of etcd. `cut` drops every connection and refuses new ones
/// (the client's keep-alives stop reaching the server); `heal` lets traffic through again.
pub struct Proxy {
    pub port: u16,
    open: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, open_rx) = watch::channel(true);
        let task = tokio::spawn(async move {
            loop {
                let Ok((inbound, _)) = listener.accept().await else { return };
                if !*open_rx.borrow() {
                    drop(inbound);
                    continue;
                }
                let mut open_rx = open_rx.clone();
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(("127.0.0.1", upstream_port)).await
                    else {
                        return;
                    };
                    let (mut ri, mut wi) = inbound.into_split();
                    let (mut ro, mut wo) = outbound.into_split();
                    let pipe = async {
                        tokio::select! {
                            _ = tokio::io::copy(&mut ri, &mut wo) => {}
                            _ = tokio::io::copy(&mut ro, &mut wi) => {}
                        }
                    };
                    tokio::select! {
                        () = pipe => {}
                        _ = open_rx.wait_for(|open| !*open) => {}
                    }
                });
            }
        });
        Proxy { port, open, task }
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn cut(&self) {
        self.open.send_replace(false);
    }

    pub fn heal(&self) {
        self.open.send_replace(true);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The port of an `http://127.0.0.1:PORT` endpoint.
pub fn port_of(endpoint: &str) -> u16 {
    endpoint
        .rsplit(':')
        .next()
        .and_then(|p| p.trim_end_matches('/').parse().ok())
        .expect("endpoint with a port")
}
