#!/usr/bin/env bash
# Starts or stops a throw-away etcd server for the tests.
#
#   scripts/etcd.sh start   # etcd on free loopback ports, data in a temp dir; writes the env file
#   scripts/etcd.sh stop    # kills it and removes the temp dir (safe to call when not running)
#
# `start` writes target/test-servers/etcd.env (override the directory with SHARDCRON_SERVERS_DIR):
#   export SHARDCRON_ETCD=http://127.0.0.1:PORT
# which the test script sources; the etcd tests read SHARDCRON_ETCD. The server accepts requests
# of up to 10 MiB (--max-request-bytes) so that transactions carrying several nodes of the
# contract's 1 MiB maximum fit. It keeps etcd's default of 128 ops per transaction
# (--max-txn-ops), as most deployments do: the backend fits large transactions into it (nested
# writes, guards by subtree), and a test that needs another limit starts a private server.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE_DIR=${SHARDCRON_SERVERS_DIR:-target/test-servers}
ENV_FILE=$STATE_DIR/etcd.env
PID_FILE=$STATE_DIR/etcd.pid
DATA_FILE=$STATE_DIR/etcd.datadir
LOG_FILE=$STATE_DIR/etcd.log
ETCD_BIN=${SHARDCRON_ETCD_BIN:-etcd}

log() { printf 'etcd.sh: %s\n' "$*" >&2; }

# A loopback port nobody listens on (bash's /dev/tcp connects or fails; no extra tools needed).
free_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  log "no free loopback port found"
  exit 1
}

# Whether etcd answers /health with "true" on the client port.
healthy() {
  local port=$1 reply
  reply=$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && cat <&3) 2>/dev/null || true)
  [[ $reply == *'"health":"true"'* ]]
}

running() {
  [[ -f $PID_FILE ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

start() {
  if running; then
    log "already running (pid $(cat "$PID_FILE")); env in $ENV_FILE"
    return
  fi
  command -v "$ETCD_BIN" >/dev/null || { log "$ETCD_BIN not found (apt-get install etcd-server)"; exit 1; }
  mkdir -p "$STATE_DIR"
  local data client peer
  data=$(mktemp -d "${TMPDIR:-/tmp}/shardcron-etcd.XXXXXX")
  client=$(free_port)
  peer=$(free_port)
  while [[ $peer == "$client" ]]; do peer=$(free_port); done
  echo "$data" >"$DATA_FILE"
  # setsid: the server must not die with the shell that started it, only with `stop`.
  setsid "$ETCD_BIN" \
    --name shardcron-test \
    --data-dir "$data" \
    --listen-client-urls "http://127.0.0.1:$client" \
    --advertise-client-urls "http://127.0.0.1:$client" \
    --listen-peer-urls "http://127.0.0.1:$peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$peer" \
    --initial-cluster "shardcron-test=http://127.0.0.1:$peer" \
    --max-request-bytes 10485760 \
    >"$LOG_FILE" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  for _ in $(seq 1 100); do
    if healthy "$client"; then
      printf 'export SHARDCRON_ETCD=http://127.0.0.1:%s\n' "$client" >"$ENV_FILE"
      log "etcd (pid $(cat "$PID_FILE")) serving on 127.0.0.1:$client; env in $ENV_FILE"
      return
    fi
    if ! running; then
      log "etcd exited during start-up; its log:"
      cat "$LOG_FILE" >&2
      stop
      exit 1
    fi
    sleep 0.1
  done
  log "etcd did not become healthy within 10 s; its log:"
  tail -n 30 "$LOG_FILE" >&2
  stop
  exit 1
}

stop() {
  if [[ -f $PID_FILE ]]; then
    local pid
    pid=$(cat "$PID_FILE")
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$PID_FILE"
  fi
  if [[ -f $DATA_FILE ]]; then
    rm -rf "$(cat "$DATA_FILE")"
    rm -f "$DATA_FILE"
  fi
  rm -f "$ENV_FILE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
