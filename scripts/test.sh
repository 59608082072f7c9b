#!/usr/bin/env bash
# Runs every check and test of shardcron, on a fresh machine as on a developer's:
#   1. installs the system packages the tests need when they are missing,
#   2. checks formatting and lints (warnings are errors),
#   3. runs every test of the workspace.
# Servers the tests need (etcd, ZooKeeper, PostgreSQL) are started here on free loopback ports
# with temp dirs and stopped on exit, also on failure; the backend tests then must find them
# (they fail, not skip, because SHARDCRON_REQUIRE_SERVERS=1).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

# Debian packages the tests use:
#   libquartz2-java    Quartz 2.3, the oracle of the cron differential test
#   default-jdk-headless javac/java to run that oracle
#   zookeeper, etcd-server: the registry servers the backend tests run against
#   protobuf-compiler, libprotobuf-dev: protoc and its well-known .proto files, for etcd-client
#   chromium, chromium-driver: the browser and its WebDriver, for the console's browser test
#   postgresql: the execution trace's PostgreSQL tests
REQUIRED_PACKAGES=(libquartz2-java default-jdk-headless zookeeper etcd-server protobuf-compiler libprotobuf-dev chromium chromium-driver postgresql)

install_missing_packages() {
  local missing=()
  for pkg in "${REQUIRED_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    return
  fi
  log "installing ${missing[*]}"
  local sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo apt-get update -qq
  # Packages with services must not start them: the tests start their own on loopback ports.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_missing_packages

# The cron differential test must run against real Quartz here, not skip; the console's browser
# test against real chromium.
export SHARDCRON_REQUIRE_QUARTZ=1
export SHARDCRON_REQUIRE_BROWSER=1

stop_servers() {
  scripts/etcd.sh stop || true
  scripts/zookeeper.sh stop || true
  scripts/postgres.sh stop || true
}
trap stop_servers EXIT

log "starting test servers"
scripts/etcd.sh start
scripts/zookeeper.sh start
scripts/postgres.sh start
# shellcheck source=/dev/null
source target/test-servers/etcd.env   # SHARDCRON_ETCD
# shellcheck source=/dev/null
source target/zookeeper/env           # SHARDCRON_ZK
# shellcheck source=/dev/null
source target/postgres/env            # SHARDCRON_POSTGRES, SHARDCRON_POSTGRES_SCRIPT
export SHARDCRON_REQUIRE_SERVERS=1

# Disk: a CI machine may have only a few GiB free. A run builds the workspace once and never
# rebuilds it in place, so incremental caches only take space (they double target/), and full
# debug info is the bulk of every test binary; line tables keep file:line in backtraces.
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
export CARGO_PROFILE_TEST_DEBUG=line-tables-only

log "cargo fmt --check"
cargo fmt --all -- --check

log "cargo clippy (all targets and features, warnings are errors)"
cargo clippy --workspace --all-targets --all-features -- -D warnings

log "cargo test"
cargo test --workspace --all-features

log "cargo doc: the API documentation builds without warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features

log "simulator determinism: 20 random seeds, each run twice, traces compared byte for byte"
cargo run -q -p shardcron-sim -- check-determinism --random --seeds 20
log "simulator determinism of the lag profiles (watches held back on timers): 5 random seeds each"
cargo run -q -p shardcron-sim -- check-determinism --random --seeds 5 --profile lag
cargo run -q -p shardcron-sim -- check-determinism --random --seeds 5 --profile victim

log "simulator example: an ElasticJob deployment with a custom strategy and user invariants, 200 seeds"
cargo run -q -p shardcron-sim --example deployment

disk_report() { log "disk: target/ holds $(du -sh target | cut -f1), $(df -h . | awk 'NR==2 {print $4}') free"; }
disk_report
log "cargo package: every published crate packages, and builds alone from its package"
# One invocation: cargo packages the crates, then builds each from its .crate file in dependency
# order against the others' packages (none is on crates.io yet), so a file left out of a
# package, or a path dependency without a version, fails here. It reuses the dependencies the
# steps above compiled. Cargo takes a registry crate of a given name and version to be
# immutable: the sources an earlier run extracted under CARGO_HOME and the builds it made of
# them would be reused as they are, verifying the old code. Both are removed first (this is the
# last step: the workspace's own crates, whose build records go too, rebuild next time), and
# target/package after (it holds a copy of every crate).
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/shardcron*
# The test, example and tool binaries are done with; the packages' builds need their room.
find target/debug/deps target/debug/examples -maxdepth 1 -type f -perm -u+x ! -name '*.*' -delete 2>/dev/null || true
rm -rf target/doc
rm -rf target/debug/.fingerprint/shardcron*
cargo package --allow-dirty -p shardcron-core -p shardcron-registry-mem \
    -p shardcron-registry-zk -p shardcron-registry-etcd -p shardcron-observe -p shardcron \
    -p shardcron-sim -p shardcron-console -p shardcron-cli
rm -rf target/package
disk_report
