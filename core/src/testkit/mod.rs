//! The registry behaviour suite: one set of cases, written against the contract in
//! [`crate::registry`], that every backend runs unchanged.
//!
//! A backend's test file provides a [`Backend`] and expands
//! [`registry_behaviour_suite!`](crate::registry_behaviour_suite):
//!
//! ```text
//! shardcron_core::registry_behaviour_suite! {
//!     #[tokio::test(start_paused = true)]
//!     backend = my_backend()
//! }
//! ```
//!
//! Every case gets its own namespace, so cases may run concurrently against one shared server.
//! Where backends legitimately differ the cases consult [`Capability`](crate::registry::Capability).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

// Each case is a test named after the clause of the contract it checks (`create_existing_fails`,
// `watch_sees_deletes`...), with the signature the module documentation gives; a doc line
// per case would repeat its name.
#[allow(missing_docs)]
pub mod cases;
pub mod proxy;
mod support;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use crate::registry::CoordinatorRegistry;

/// A client made for a test case, with the power to break its session.
pub struct TestClient {
    /// The client under test.
    pub registry: Arc<dyn CoordinatorRegistry>,
    /// What the case uses to break that client's session (expire it, cut its link).
    pub control: Box<dyn SessionControl>,
}

impl fmt::Debug for TestClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestClient").field("registry", &self.registry).finish()
    }
}

/// Fault powers over one client's session, done for real on the backend's server.
#[async_trait]
pub trait SessionControl: Send + Sync {
    /// Makes the server expire the client's session (its ephemerals are deleted), and waits
    /// until the server has done so. The client then reports `Expired` and opens a new session.
    async fn expire(&self);

    /// Cuts the client off silently, as a network partition does: from now on nothing it sends
    /// reaches the server and nothing comes back, and no connection is closed or reset (on a
    /// real server: a [`proxy::LinkProxy`] frozen between the two). The server keeps the
    /// session until its own timeout runs out.
    async fn cut(&self);

    /// Ends a [`cut`](Self::cut): traffic flows again, what was held back first.
    async fn heal(&self);
}

/// What the suite needs from a backend under test.
#[async_trait]
pub trait Backend: Send + Sync {
    /// A new client, with its own session, in namespace `namespace` (a valid path segment,
    /// unique per test case; every client of one case gets the same one).
    async fn client(&self, namespace: &str) -> TestClient;
}
