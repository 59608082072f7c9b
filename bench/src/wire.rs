//! What a registry server says it received: ZooKeeper's `srvr` four-letter command and etcd's
//! Prometheus metrics, read over plain TCP on loopback. This counts the traffic the registry
//! trait does not see: session keep-alives, and anything a backend sends behind a trait call.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `request` to `addr` and reads the whole reply (the server closes the connection).
fn ask(addr: &str, request: &[u8]) -> Option<String> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(request).ok()?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply).ok()?;
    Some(reply)
}

/// ZooKeeper's count of packets received from all clients (requests and pings).
pub fn zookeeper_received(addr: &str) -> Option<BTreeMap<String, u64>> {
    let reply = ask(addr, b"srvr")?;
    parse_srvr(&reply)
}

fn parse_srvr(reply: &str) -> Option<BTreeMap<String, u64>> {
    let received = reply.lines().find_map(|l| l.strip_prefix("Received:"))?.trim().parse().ok()?;
    Some(BTreeMap::from([("packets".to_owned(), received)]))
}

/// etcd's count of gRPC messages received, by method (`Txn`, `Range`, `LeaseKeepAlive`, ...).
pub fn etcd_received(addr: &str) -> Option<BTreeMap<String, u64>> {
    let request = format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    let reply = ask(addr, request.as_bytes())?;
    Some(parse_metrics(&reply))
}

fn parse_metrics(text: &str) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("grpc_server_msg_received_total{") else { continue };
        let Some((labels, value)) = rest.split_once("} ") else { continue };
        let method = labels
            .split(',')
            .find_map(|l| l.strip_prefix("grpc_method=\""))
            .map(|m| m.trim_end_matches('"'));
        let value: f64 = value.trim().parse().unwrap_or(0.0);
        if let (Some(method), true) = (method, value > 0.0) {
            *counts.entry(method.to_owned()).or_default() += value as u64;
        }
    }
    counts
}

/// `after − before`, key by key, keeping only what grew; `None` if either is missing.
pub fn delta(
    before: Option<BTreeMap<String, u64>>,
    after: Option<BTreeMap<String, u64>>,
) -> Option<BTreeMap<String, u64>> {
    let (before, after) = (before?, after?);
    Some(
        after
            .into_iter()
            .map(|(k, v)| {
                let old = before.get(&k).copied().unwrap_or(0);
                (k, v.saturating_sub(old))
            })
            .filter(|(_, v)| *v > 0)
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_servers_counters() {
        let srvr =
            "Zookeeper version: 3.8.4\nLatency min/avg/max: 0/0.1/5\nReceived: 1234\nSent: 1233\n";
        assert_eq!(parse_srvr(srvr), Some(BTreeMap::from([("packets".to_owned(), 1234)])));
        let metrics = "# HELP x\n\
            grpc_server_msg_received_total{grpc_method=\"Txn\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 42\n\
            grpc_server_msg_received_total{grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 0\n\
            grpc_server_msg_received_total{grpc_method=\"LeaseKeepAlive\",grpc_service=\"etcdserverpb.Lease\",grpc_type=\"bidi_stream\"} 7\n";
        let m = parse_metrics(metrics);
        assert_eq!(m.get("Txn"), Some(&42));
        assert_eq!(m.get("LeaseKeepAlive"), Some(&7));
        assert_eq!(m.get("Range"), None);
        let d = delta(
            Some(m.clone()),
            Some(BTreeMap::from([("Txn".into(), 50), ("LeaseKeepAlive".into(), 7)])),
        );
        assert_eq!(d, Some(BTreeMap::from([("Txn".to_owned(), 8)])));
    }
}
