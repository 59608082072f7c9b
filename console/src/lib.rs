//! # shardcron-console
//!
//! The web console of a shardcron (or ElasticJob-Lite) namespace, reading and writing the
//! registry alone: no scheduler runs in it. It serves
//!
//! - ElasticJob-UI's REST API under `/api` (same paths, same `{success, errorCode, errorMsg,
//!   model}` wrapper, same field names), so scripts written for ElasticJob-UI work, plus adding a
//!   job (`POST /api/jobs/config`), the live instances and a job's YAML for the editor;
//! - a page at `/`: jobs, servers, each job's items with their owner and live status, actions
//!   (trigger, disable, enable, shutdown) and a config editor showing validation errors;
//! - with a trace database ([`ConsoleOptions::trace`], the one the workers record to),
//!   ElasticJob-UI's event-trace searches (`/api/event-trace/execution` and `/status`, with their
//!   filters, paging and autocomplete) and the page's "Job trace" and "History status" tabs.
//!
//! Reading is open; every change needs the console's token (`Access-Token` header, or log in on
//! the page), and a read-only console refuses changes altogether. It listens on loopback unless
//! told otherwise.
//!
//! ```no_run
//! # async fn demo(registry: std::sync::Arc<dyn shardcron_core::registry::CoordinatorRegistry>) -> Result<(), shardcron_console::ConsoleError> {
//! use shardcron_console::{Console, ConsoleOptions};
//! let console = Console::bind(registry, ConsoleOptions::default()).await?;
//! println!("console on http://{}/ (token {})", console.local_addr(), console.token());
//! console.serve(std::future::pending()).await?;
//! # Ok(()) }
//! ```
//!
//! ## Layout
//! - `routes/`: `jobs.rs` and `servers.rs` (the registry's API), `trace.rs` (the event-trace
//!   searches), `page.rs` (the page's files, from `assets/`).
//! - `wrapper.rs`: the response wrapper and how errors map to it; `auth.rs`: token and login.

mod auth;
mod routes;
mod wrapper;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use shardcron_core::registry::CoordinatorRegistry;
use shardcron_observe::TraceReader;
use tokio::net::TcpListener;

pub use auth::random_token;

/// Where the console listens unless told otherwise: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8899";

/// How a console runs.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    pub listen: SocketAddr,
    /// The token changes need; `None`: a random one (see [`Console::token`]).
    pub token: Option<String>,
    /// Refuse every change.
    pub read_only: bool,
    /// What the page shows as the registry (a URL without its credentials).
    pub label: String,
    /// The execution trace to search ([`TraceReader::open`] on the database the workers record
    /// to); `None`: the event-trace endpoints answer that the console has none.
    pub trace: Option<TraceReader>,
}

impl Default for ConsoleOptions {
    fn default() -> Self {
        ConsoleOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 8899)),
            token: None,
            read_only: false,
            label: String::new(),
            trace: None,
        }
    }
}

/// Why the console could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    #[error("cannot listen on {addr}: {source}; pick another address with --listen")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the console's server failed: {0}")]
    Serve(#[source] std::io::Error),
    #[error("the token must not be empty")]
    EmptyToken,
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub(crate) struct AppState {
    pub registry: Arc<dyn CoordinatorRegistry>,
    pub token: Arc<str>,
    pub read_only: bool,
    pub label: Arc<str>,
    pub trace: Option<TraceReader>,
}

/// A console bound to its address, ready to serve.
#[derive(Debug)]
pub struct Console {
    listener: TcpListener,
    state: AppState,
}

impl Console {
    /// Binds the listening socket (so that a busy port fails here, before anything is served).
    pub async fn bind(
        registry: Arc<dyn CoordinatorRegistry>,
        options: ConsoleOptions,
    ) -> Result<Console, ConsoleError> {
        let token = match options.token {
            Some(t) if t.is_empty() => return Err(ConsoleError::EmptyToken),
            Some(t) => t,
            None => random_token(),
        };
        let listener = TcpListener::bind(options.listen)
            .await
            .map_err(|source| ConsoleError::Bind { addr: options.listen, source })?;
        let state = AppState {
            registry,
            token: token.into(),
            read_only: options.read_only,
            label: options.label.into(),
            trace: options.trace,
        };
        Ok(Console { listener, state })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
    }

    /// The token changes need.
    pub fn token(&self) -> &str {
        &self.state.token
    }

    /// Serves until `stop` completes; requests in flight then finish.
    pub async fn serve(
        self,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ConsoleError> {
        let app = routes::router(self.state);
        axum::serve(self.listener, app)
            .with_graceful_shutdown(stop)
            .await
            .map_err(ConsoleError::Serve)
    }
}

/// The console's routes on `registry` (and `trace`, if given), for serving them elsewhere or
/// testing them without a socket.
pub fn router(
    registry: Arc<dyn CoordinatorRegistry>,
    token: &str,
    read_only: bool,
    trace: Option<TraceReader>,
) -> axum::Router {
    routes::router(AppState { registry, token: token.into(), read_only, label: "".into(), trace })
}
