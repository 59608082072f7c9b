//! The gRPC channel to etcd, with HTTP/2 flow-control windows sized for a watch of many ranges.
//!
//! tonic's defaults (64 KiB per stream and per connection) let etcd send a client that much
//! before it must wait for the client to grant more. A scheduler's one watch stream carries
//! the events of every job it runs, and shares the connection with the scope's reads: under a
//! burst (jobs registering) etcd's sending stalls on the window, its buffer of 128 responses
//! per watch stream fills, and etcd holds back the watches it cannot send to, whose events
//! then come out of the registry's order (the watch task resyncs). `etcd-client` builds the
//! endpoints itself and does not expose the windows; its balanced-channel hook does, so the
//! endpoints it makes (with its TLS, keep-alive and timeouts) get the windows on their way in.

use etcd_client::{BalancedChannelBuilder, Channel};
use tonic::transport::channel::Change;
use tonic::transport::Endpoint;

/// Where etcd-client sends the endpoints it makes (`etcd_client::channel::EndpointUpdater`,
/// which the crate does not export).
type Updater = tokio::sync::mpsc::Sender<Change<tonic::codegen::http::Uri, Endpoint>>;

/// What etcd may send on one stream before the client grants more.
const STREAM_WINDOW: u32 = 4 << 20;
/// What etcd may send on the whole connection before the client grants more.
const CONNECTION_WINDOW: u32 = 16 << 20;

/// tonic's balanced channel, whose endpoints get wider windows.
pub(crate) struct WideWindows;

impl BalancedChannelBuilder for WideWindows {
    type Error = tonic::transport::Error;

    fn balanced_channel(self, buffer_size: usize) -> Result<(Channel, Updater), Self::Error> {
        let (channel, inner) = tonic::transport::Channel::balance_channel(buffer_size);
        let (outer, mut changes) = tokio::sync::mpsc::channel(buffer_size.max(1));
        // Ends when the client (which keeps the sender for endpoints added later) is dropped.
        tokio::spawn(async move {
            while let Some(change) = changes.recv().await {
                let change = match change {
                    Change::Insert(uri, endpoint) => Change::Insert(uri, widen(endpoint)),
                    other => other,
                };
                if inner.send(change).await.is_err() {
                    return;
                }
            }
        });
        Ok((Channel::Tonic(channel), outer))
    }
}

fn widen(endpoint: Endpoint) -> Endpoint {
    endpoint
        .initial_stream_window_size(Some(STREAM_WINDOW))
        .initial_connection_window_size(Some(CONNECTION_WINDOW))
}
