//! For backends' connect errors: what a plain TCP connection to each server address finds, so
//! that "no session after 48 s" also says "connection refused: nothing listens there".

use std::io;
use std::time::Duration;

/// How long one probe waits for the TCP handshake.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// `host:port (what a TCP connection finds)` for each address, joined by `", "`. Addresses
/// without a port get `default_port`; an `http://` or `https://` prefix is ignored.
pub async fn describe_addresses(addresses: &[String], default_port: u16) -> String {
    let probes = addresses.iter().map(|address| async move {
        let target = with_port(address, default_port);
        format!("{target} ({})", probe(&target).await)
    });
    futures::future::join_all(probes).await.join(", ")
}

fn with_port(address: &str, default_port: u16) -> String {
    let host = address.trim_start_matches("http://").trim_start_matches("https://");
    let host = host.trim_end_matches('/');
    // `host:port` and `[v6]:port` have a port; `host` and `[v6]` do not.
    let has_port = match host.rsplit_once(':') {
        Some((before, _)) => {
            !before.is_empty() && (!host.starts_with('[') || before.ends_with(']'))
        }
        None => false,
    };
    if has_port {
        host.to_owned()
    } else {
        format!("{host}:{default_port}")
    }
}

async fn probe(target: &str) -> String {
    match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(target)).await {
        Ok(Ok(_)) => "accepts TCP connections".to_owned(),
        Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionRefused => {
            "connection refused: nothing listens there".to_owned()
        }
        Ok(Err(e)) => format!("cannot connect: {e}"),
        Err(_) => format!(
            "no answer to a TCP connection within {} s: host down, or a firewall drops it",
            PROBE_TIMEOUT.as_secs()
        ),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn addresses_get_the_default_port_when_they_have_none() {
        assert_eq!(with_port("zk1", 2181), "zk1:2181");
        assert_eq!(with_port("zk1:2182", 2181), "zk1:2182");
        assert_eq!(with_port("[::1]", 2181), "[::1]:2181");
        assert_eq!(with_port("[::1]:2182", 2181), "[::1]:2182");
        assert_eq!(with_port("http://127.0.0.1:2379", 2379), "127.0.0.1:2379");
    }

    #[tokio::test]
    async fn a_closed_port_is_refused_and_a_listening_one_accepts() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let open = listener.local_addr().unwrap().to_string();
        // A port that was free a moment ago: bound, then released.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let text = describe_addresses(&[open.clone(), closed.clone()], 1).await;
        assert_eq!(
            text,
            format!(
                "{open} (accepts TCP connections), {closed} (connection refused: nothing \
                 listens there)"
            )
        );
    }
}
