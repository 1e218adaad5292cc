#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, starts a private redis-server on
# loopback for the tests that need one, and runs the whole suite through ctest.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${TROUPE_BUILD_DIR:-$root/build}"
"$root/tools/build.sh"

redis_dir="$(mktemp -d)"
redis-server --port 0 --unixsocket "$redis_dir/redis.sock" --unixsocketperm 700 --save '' \
  --appendonly no --dir "$redis_dir" --logfile "$redis_dir/redis.log" --daemonize yes \
  --pidfile "$redis_dir/redis.pid"
for _ in $(seq 100); do
  redis-cli -s "$redis_dir/redis.sock" ping 2>/dev/null | grep -q PONG && break
  sleep 0.1
done
cleanup() {
  [ -f "$redis_dir/redis.pid" ] && kill "$(cat "$redis_dir/redis.pid")" 2>/dev/null || true
  rm -rf "$redis_dir"
}
trap cleanup EXIT
export TROUPE_TEST_REDIS_SOCKET="$redis_dir/redis.sock"

cd "$build"
ctest --output-on-failure -j "$(nproc)" "$@"
