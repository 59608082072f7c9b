#!/usr/bin/env bash
# A throw-away ZooKeeper server for the tests: loopback only, a free port, a temp data dir, a
# short tick (200 ms: sessions may be as short as 400 ms, so expiry tests are quick), a raised
# jute.maxbuffer (the registry contract allows 1 MiB of data per node), no admin server; the
# four-letter commands ruok and srvr (health, counts) and wchp (the watches by path, which the
# watch tests read to see what a client left on the server).
#
#   scripts/zookeeper.sh start   [STATE_DIR]   start, wait until it answers, print SHARDCRON_ZK=...
#   scripts/zookeeper.sh stop    [STATE_DIR]   stop it and remove its data and state
#   scripts/zookeeper.sh restart [STATE_DIR]   stop the process and start it again on the same
#                                              port and data dir (sessions survive if it is back
#                                              within their timeout)
#   scripts/zookeeper.sh status  [STATE_DIR]   exit 0 if it answers
#
# STATE_DIR (default: $SHARDCRON_ZK_STATE, else target/zookeeper in the repo) holds zoo.cfg, the
# pid, the server log and `env`, a file to source: `export SHARDCRON_ZK=127.0.0.1:PORT`.
#
# Environment: ZK_TICK_MS (200), ZK_MAX_SESSION_TIMEOUT_MS (20 ticks), ZK_JUTE_MAXBUFFER
# (4194304), ZOOKEEPER_CLASSPATH (Debian's /usr/share/java/zookeeper.jar), JAVA (java).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-}"
state="${2:-${SHARDCRON_ZK_STATE:-$repo/target/zookeeper}}"
tick="${ZK_TICK_MS:-200}"
max_session="${ZK_MAX_SESSION_TIMEOUT_MS:-$((tick * 20))}"
maxbuffer="${ZK_JUTE_MAXBUFFER:-4194304}"
classpath="${ZOOKEEPER_CLASSPATH:-/usr/share/java/zookeeper.jar}"
java="${JAVA:-java}"

die() { echo "zookeeper.sh: $*" >&2; exit 1; }

# Whether something answers "imok" on the port.
answers() {
  local port="$1" reply=""
  reply="$( (exec 3<>"/dev/tcp/127.0.0.1/$port" && printf 'ruok' >&3 && timeout 2 cat <&3) 2>/dev/null)" || true
  [[ "$reply" == "imok" ]]
}

# Whether the port is free (nothing accepts connections on it).
port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

running_pid() {
  [[ -f "$state/pid" ]] || return 1
  local pid
  pid="$(cat "$state/pid")"
  kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# Starts the server described by $state/zoo.cfg; fails if it does not answer within 60 s.
launch() {
  local port="$1"
  (
    cd "$state"
    # setsid: its own process group, untouched by the caller's job control; exec keeps the pid.
    exec setsid "$java" -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
      -Djute.maxbuffer="$maxbuffer" -Dzookeeper.admin.enableServer=false \
      -Dzookeeper.4lw.commands.whitelist=ruok,srvr,wchp \
      -cp "$classpath" org.apache.zookeeper.server.ZooKeeperServerMain "$state/zoo.cfg" \
      >>"$state/server.log" 2>&1 </dev/null
  ) &
  echo $! >"$state/pid"
  local pid=$! i
  for ((i = 0; i < 600; i++)); do
    answers "$port" && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  return 1
}

# Stops the process (TERM, then KILL after 10 s) and waits until it is gone.
halt() {
  local pid i
  pid="$(running_pid)" || return 0
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

start() {
  command -v "$java" >/dev/null || die "java not found: install default-jdk-headless (apt-get install default-jdk-headless)"
  [[ -f "${classpath%%:*}" ]] || die "$classpath not found: install the zookeeper package (apt-get install zookeeper) or set ZOOKEEPER_CLASSPATH"
  if running_pid >/dev/null; then
    # Left over from an interrupted run in the same STATE_DIR: it is ours and throw-away.
    echo "zookeeper.sh: stopping the server left running in $state" >&2
    stop
  fi
  [[ -f "$state/datadir" ]] && rm -rf "$(cat "$state/datadir")"
  rm -rf "$state"
  mkdir -p "$state"
  local data attempt port
  data="$(mktemp -d "${TMPDIR:-/tmp}/shardcron-zk.XXXXXX")"
  echo "$data" >"$state/datadir"
  for attempt in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 40000))
    port_free "$port" || continue
    cat >"$state/zoo.cfg" <<EOF
tickTime=$tick
dataDir=$data
clientPort=$port
clientPortAddress=127.0.0.1
maxSessionTimeout=$max_session
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,wchp
EOF
    if launch "$port"; then
      echo "$port" >"$state/port"
      echo "export SHARDCRON_ZK=127.0.0.1:$port" >"$state/env"
      echo "SHARDCRON_ZK=127.0.0.1:$port"
      return 0
    fi
    echo "zookeeper.sh: no answer on port $port (attempt $attempt), see $state/server.log" >&2
    halt
  done
  die "could not start ZooKeeper; last log lines:$(echo; tail -n 20 "$state/server.log" 2>/dev/null)"
}

stop() {
  halt
  if [[ -f "$state/datadir" ]]; then
    rm -rf "$(cat "$state/datadir")"
  fi
  rm -rf "$state"
}

restart() {
  [[ -f "$state/port" ]] || die "not started (no $state/port)"
  local port
  port="$(cat "$state/port")"
  halt
  launch "$port" || die "restart on port $port failed; see $state/server.log"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  restart) restart ;;
  status) [[ -f "$state/port" ]] && answers "$(cat "$state/port")" ;;
  *) die "usage: $0 start|stop|restart|status [STATE_DIR]" ;;
esac
