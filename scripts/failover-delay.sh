#!/usr/bin/env bash
# Measures the failover delay of shardcron on ZooKeeper and etcd (the "Failover delay" sections of
# registry-zk/README.md and registry-etcd/README.md): three `shardcron worker` processes, one
# killed with kill -9 (or stopped with SIGTERM while its items outlast its shutdown timeout),
# repeated for several session timeouts / lease TTLs; prints Markdown tables.
#
#   scripts/failover-delay.sh                      # 2, 4 and 8 s, 4 runs of each scenario
#   SHARDCRON_E2E_SESSIONS_MS=2000,4000 SHARDCRON_E2E_REPEAT=2 scripts/failover-delay.sh
#
# It starts its own throw-away servers (state under target/failover-delay/), a ZooKeeper that
# allows session timeouts up to 60 s (the test script's caps them at 4 s), and stops them on
# exit. Takes about 10 minutes with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

state=target/failover-delay
zk_state="$PWD/$state/zookeeper"
export SHARDCRON_SERVERS_DIR="$state/etcd"

stop_servers() {
  scripts/etcd.sh stop || true
  scripts/zookeeper.sh stop "$zk_state" || true
}
trap stop_servers EXIT

ZK_MAX_SESSION_TIMEOUT_MS=60000 scripts/zookeeper.sh start "$zk_state" >/dev/null
scripts/etcd.sh start
# shellcheck source=/dev/null
source "$zk_state/env"
# shellcheck source=/dev/null
source "$SHARDCRON_SERVERS_DIR/etcd.env"
export SHARDCRON_REQUIRE_SERVERS=1

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'); machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'), $(uname -sr)"
cargo test -q -p shardcron-cli --features etcd --test multiprocess -- \
  --ignored --nocapture --test-threads 1 measure_failover_delay
