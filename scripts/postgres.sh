#!/usr/bin/env bash
# A throw-away PostgreSQL server for the tests: loopback only, a free port, a temp data dir,
# trust authentication, fsync off (test data only).
#
#   scripts/postgres.sh start   [STATE_DIR]   initdb, start, wait until it answers, write the env
#   scripts/postgres.sh stop    [STATE_DIR]   stop it and remove its data and state
#   scripts/postgres.sh pause   [STATE_DIR]   stop the server, keep its data and port (tests of
#                                             the database going away)
#   scripts/postgres.sh resume  [STATE_DIR]   start it again on the same port and data
#
# STATE_DIR (default: $SHARDCRON_PG_STATE, else target/postgres in the repo) holds the pid, the
# server log and `env`, a file to source:
#   export SHARDCRON_POSTGRES=postgres://shardcron@127.0.0.1:PORT/shardcron
#   export SHARDCRON_POSTGRES_SCRIPT=/abs/path/scripts/postgres.sh SHARDCRON_PG_STATE=STATE_DIR
# The tests read SHARDCRON_POSTGRES, and call the script (pause/resume) to take it away.
#
# PostgreSQL refuses to run as root: as root, the server runs as the `postgres` user that
# Debian's package creates. Environment: PG_BIN (Debian's newest /usr/lib/postgresql/*/bin).
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
cmd="${1:-}"
state="${2:-${SHARDCRON_PG_STATE:-$repo/target/postgres}}"
mkdir -p "$state"
state="$(cd "$state" && pwd)"

die() { echo "postgres.sh: $*" >&2; exit 1; }
log() { echo "postgres.sh: $*" >&2; }

pg_bin() {
  if [[ -n "${PG_BIN:-}" ]]; then echo "$PG_BIN"; return; fi
  local dir
  dir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$dir" ]] || die "PostgreSQL not found (apt-get install postgresql)"
  echo "$dir"
}

# Runs a server binary as an unprivileged user.
as_owner() {
  if [[ $(id -u) -eq 0 ]]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {
  local port
  for _ in $(seq 1 200); do
    port=$((20000 + RANDOM % 40000))
    if port_free "$port"; then echo "$port"; return; fi
  done
  die "no free loopback port found"
}

data_dir() { cat "$state/datadir"; }

server_start() {
  local bin="$1" data="$2" port="$3"
  as_owner "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $port -k $data -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null || { tail -n 30 "$data/server.log" >&2 || true; die "the server did not start"; }
}

start() {
  local bin data port
  bin="$(pg_bin)"
  if [[ -f "$state/datadir" ]] && [[ -f "$(data_dir)/postmaster.pid" ]]; then
    log "already running; env in $state/env"
    return
  fi
  data="$(mktemp -d "${TMPDIR:-/tmp}/shardcron-postgres.XXXXXX")"
  echo "$data" >"$state/datadir"
  if [[ $(id -u) -eq 0 ]]; then chown postgres "$data"; fi
  as_owner "$bin/initdb" -D "$data" -U shardcron --auth=trust -E UTF8 --no-sync >"$state/initdb.log" 2>&1 \
    || { cat "$state/initdb.log" >&2; die "initdb failed"; }
  port="$(free_port)"
  echo "$port" >"$state/port"
  server_start "$bin" "$data" "$port"
  as_owner "$bin/createdb" -h 127.0.0.1 -p "$port" -U shardcron shardcron
  cat >"$state/env" <<ENV
export SHARDCRON_POSTGRES=postgres://shardcron@127.0.0.1:$port/shardcron
export SHARDCRON_POSTGRES_SCRIPT=$repo/scripts/postgres.sh SHARDCRON_PG_STATE=$state
ENV
  log "PostgreSQL serving on 127.0.0.1:$port; env in $state/env"
}

pause() {
  [[ -f "$state/datadir" ]] || die "not started"
  as_owner "$(pg_bin)/pg_ctl" -D "$(data_dir)" -m fast -w stop >/dev/null
}

resume() {
  [[ -f "$state/datadir" ]] || die "not started"
  server_start "$(pg_bin)" "$(data_dir)" "$(cat "$state/port")"
}

stop() {
  if [[ -f "$state/datadir" ]]; then
    local data
    data="$(data_dir)"
    if [[ -f "$data/postmaster.pid" ]]; then
      as_owner "$(pg_bin)/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$data"
  fi
  rm -f "$state/datadir" "$state/port" "$state/env" "$state/initdb.log"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  pause) pause ;;
  resume) resume ;;
  *) echo "usage: $0 start|stop|pause|resume [STATE_DIR]" >&2; exit 2 ;;
esac
