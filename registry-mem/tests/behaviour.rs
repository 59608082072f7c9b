//! The shared registry behaviour suite (`shardcron_core::testkit`) run against registry-mem.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use shardcron_core::handles::Handles;
use shardcron_core::testkit::{Backend, SessionControl, TestClient};
use shardcron_registry_mem::{ClientId, ConnectOptions, MemServer};

/// The session timeout of the suite's clients: as on the real servers' suites, shorter than the
/// cases' patience for one event (the lease case waits a whole timeout for one).
const SESSION: Duration = Duration::from_secs(4);

/// One server per test case; every client of the case connects to it.
struct MemBackend {
    server: MemServer,
}

impl MemBackend {
    /// Must be called inside the (paused-time) runtime: the simulated clock follows tokio's.
    fn new() -> Self {
        MemBackend { server: MemServer::new(Handles::simulated(1_700_000_000_000, 7)) }
    }
}

struct MemControl {
    server: MemServer,
    client: ClientId,
}

#[async_trait]
impl SessionControl for MemControl {
    async fn expire(&self) {
        // Synchronous on mem: the server has deleted the ephemerals when this returns.
        self.server.expire_session(self.client);
    }

    async fn cut(&self) {
        self.server.cut(self.client);
    }

    async fn heal(&self) {
        self.server.heal(self.client);
    }
}

#[async_trait]
impl Backend for MemBackend {
    async fn client(&self, namespace: &str) -> TestClient {
        let registry = self
            .server
            .connect(ConnectOptions::default().namespace(namespace).session_timeout(SESSION))
            .unwrap_or_else(|e| panic!("connect to namespace {namespace}: {e}"));
        let control = MemControl { server: self.server.clone(), client: registry.client_id() };
        TestClient { registry: Arc::new(registry), control: Box::new(control) }
    }
}

shardcron_core::registry_behaviour_suite! {
    #[tokio::test(start_paused = true)]
    backend = MemBackend::new()
}
