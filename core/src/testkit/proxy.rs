//! A loopback TCP proxy a test puts between a client and its registry server, to break the
//! link the two ways networks break:
//!
//! - [`LinkProxy::freeze`]: a silent partition. Bytes stop flowing in both directions and
//!   nothing is closed or reset; new connections are accepted but get nowhere. Neither end
//!   learns anything until its own timeouts tell it. [`LinkProxy::thaw`] lets everything held
//!   back through, in order (closes included), as TCP would once the network heals.
//! - [`LinkProxy::sever`]: every connection is dropped at once and new ones are refused (the
//!   client sees its link fail) until [`LinkProxy::restore`].
//!
//! The proxy's tasks run on the runtime that started it, until [`LinkProxy::shut`] or until
//! that runtime ends: a client may outlive the handle that set its link up.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::AbortHandle;

/// What the proxy does with traffic right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Open,
    Frozen,
    Severed,
}

/// A loopback TCP proxy in front of one upstream address.
#[derive(Debug)]
pub struct LinkProxy {
    addr: SocketAddr,
    mode: watch::Sender<Mode>,
    links: Arc<Mutex<Vec<AbortHandle>>>,
    accept: AbortHandle,
}

impl LinkProxy {
    /// Listens on a free loopback port and forwards every connection to `upstream`
    /// (`host:port`).
    ///
    /// Panics when no loopback port can be bound (a test environment problem).
    pub async fn start(upstream: &str) -> LinkProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port");
        let addr = listener.local_addr().expect("a bound listener has an address");
        let (mode, _) = watch::channel(Mode::Open);
        let links: Arc<Mutex<Vec<AbortHandle>>> = Arc::default();
        let upstream = upstream.to_owned();
        let accept = {
            let (modes, links) = (mode.subscribe(), links.clone());
            tokio::spawn(async move {
                loop {
                    let Ok((client, _)) = listener.accept().await else { return };
                    if *modes.borrow() == Mode::Severed {
                        // Accept and hang up at once: the client sees the link fail.
                        drop(client);
                        continue;
                    }
                    let link = tokio::spawn(forward(client, upstream.clone(), modes.clone()));
                    let mut links = links.lock();
                    links.retain(|l| !l.is_finished());
                    links.push(link.abort_handle());
                }
            })
            .abort_handle()
        };
        LinkProxy { addr, mode, links, accept }
    }

    /// `127.0.0.1:PORT`, for the client to connect to.
    pub fn addr(&self) -> String {
        self.addr.to_string()
    }

    /// The port the proxy listens on.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Stops every byte, both ways, without closing anything.
    pub fn freeze(&self) {
        self.mode.send_replace(Mode::Frozen);
    }

    /// Lets traffic through again, what was held back first.
    pub fn thaw(&self) {
        self.mode.send_replace(Mode::Open);
    }

    /// Drops every connection and refuses new ones.
    pub fn sever(&self) {
        self.mode.send_replace(Mode::Severed);
        for link in self.links.lock().drain(..) {
            link.abort();
        }
    }

    /// Accepts connections again after [`sever`](Self::sever).
    pub fn restore(&self) {
        self.mode.send_replace(Mode::Open);
    }

    /// Stops the proxy for good: every connection through it fails from now on.
    pub fn shut(&self) {
        self.accept.abort();
        self.sever();
    }
}

/// Waits until traffic may flow; false once the proxy severs the link (or is gone).
async fn flowing(modes: &mut watch::Receiver<Mode>) -> bool {
    match modes.wait_for(|m| *m != Mode::Frozen).await {
        Ok(mode) => *mode == Mode::Open,
        Err(_) => false,
    }
}

/// One proxied connection: connects upstream once traffic may flow, then pumps both ways.
async fn forward(client: TcpStream, upstream: String, mut modes: watch::Receiver<Mode>) {
    if !flowing(&mut modes).await {
        return;
    }
    let Ok(server) = TcpStream::connect(&upstream).await else { return };
    // Forward each chunk at once: with Nagle's algorithm on the proxy's two legs, small
    // request/answer exchanges wait for delayed acknowledgements (tens of ms each).
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        pump(client_read, server_write, modes.clone()),
        pump(server_read, client_write, modes),
    );
}

/// Copies one direction chunk by chunk, holding each chunk (and the final close) while frozen.
async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut modes: watch::Receiver<Mode>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // A read error ends the direction like a close.
        let n: usize = from.read(&mut buf).await.unwrap_or_default();
        if !flowing(&mut modes).await {
            return;
        }
        if n == 0 {
            let _ = to.shutdown().await;
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
