#!/usr/bin/env bash
# Regenerates BENCHMARKS.md (or one section of it) with throw-away registry servers.
#
#   scripts/bench.sh all [--quick]          every section (about 40 minutes; --quick: about 8)
#   scripts/bench.sh precision [FLAGS]      one section: precision, memory, registry, projection,
#                                           failover, sim or micro; flags as `shardcron-bench
#                                           --help` says
#
# Builds the bench, the `shardcron` CLI (whose `worker` command the failover section runs) and
# the `shardcron-sim` binary (which the sim section runs, one process per seed) in release
# mode, starts a ZooKeeper and an etcd on free loopback ports in target/bench-servers
# (apart from the test servers), runs `shardcron-bench` with their addresses, and stops them on
# exit, also on failure or Ctrl-C. ZooKeeper is started with sessions of up to 20 s allowed,
# so that the failover section can use 8 s sessions.
set -euo pipefail
cd "$(dirname "$0")/.."

[[ $# -ge 1 ]] || { sed -n '2,14p' "$0" >&2; exit 2; }

state="$PWD/target/bench-servers"
cleanup() {
  scripts/zookeeper.sh stop "$state/zookeeper" >/dev/null 2>&1 || true
  SHARDCRON_SERVERS_DIR="$state" scripts/etcd.sh stop >/dev/null 2>&1 || true
}
trap cleanup EXIT

cargo build --release -p shardcron-bench -p shardcron-cli -p shardcron-sim --features shardcron-cli/etcd

case "$1" in
  all | memory | registry | failover)
    ZK_MAX_SESSION_TIMEOUT_MS=20000 scripts/zookeeper.sh start "$state/zookeeper" >/dev/null
    SHARDCRON_SERVERS_DIR="$state" scripts/etcd.sh start
    # shellcheck disable=SC1091
    source "$state/zookeeper/env"
    # shellcheck disable=SC1091
    source "$state/etcd.env"
    ;;
esac

export SHARDCRON_BENCH_COMMAND="scripts/bench.sh $*"
target/release/shardcron-bench "$@"
