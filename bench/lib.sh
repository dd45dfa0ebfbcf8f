# bench/lib.sh: what the bench scripts share, sourced after `set -eu` and a
# cd to the top of the tree:
#   bench_out
#       $BUILD, the build directory of $BIN (TB_BIN_DIR, default
#       build-rel/bin), and $OUT, its bench/ (made), for what a bench
#       compiles (bench_oai.sh).
# and the start-up the service benches share (bench_api.sh,
# bench_probe.sh, bench_limits.sh):
#   bench_setup NAME [BINARY...]
#       NAME is the bench, for its messages; each BINARY must be in $BIN
#       (TB_BIN_DIR, default build-rel/bin).  Makes $tmp (removed on exit,
#       with every pid in $pids killed and PostgreSQL stopped), a private
#       PostgreSQL there (scripts/tb-pg) migrated, its URL in $url, an admin
#       key of project "bench" in $key, a master key in $master, and the
#       api's port and base URL in $port and $base.
#   bench_start_api [VAR=VALUE...]
#       (Re)starts tokbench-api on $port with the common settings
#       (the database, the port, TOKBENCH_EGRESS_ALLOW=loopback, log level
#       warn, $master) and these (later ones win), its log appended to
#       $tmp/api.log; waits for /readyz.  Its pid is $api_pid.
#   freeport: prints a free TCP port of 127.0.0.1.
BIN=${TB_BIN_DIR:-build-rel/bin}
pids=""
api_pid=""
tmp=""

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

bench_out() {
  BUILD=$(dirname "$BIN")
  [ "$BUILD" = "." ] && BUILD=build
  OUT=$BUILD/bench
  mkdir -p "$OUT"
}

bench_cleanup() {
  for p in $api_pid $pids; do kill "$p" 2>/dev/null || true; done
  for p in $api_pid $pids; do wait "$p" 2>/dev/null || true; done
  if [ -n "$tmp" ]; then
    scripts/tb-pg stop "$tmp/pg" >/dev/null 2>&1 || true
    rm -rf "$tmp"
  fi
}

bench_setup() {
  bench_name=$1
  shift
  for b in "$@"; do
    [ -x "$BIN/$b" ] || { echo "$bench_name: $BIN/$b missing (make MODE=release)" >&2; exit 1; }
  done
  tmp=$(mktemp -d)
  chmod 0755 "$tmp"
  trap bench_cleanup EXIT
  trap 'exit 1' INT TERM
  pgport=$(freeport)
  scripts/tb-pg init "$tmp/pg" >/dev/null
  scripts/tb-pg start "$tmp/pg" "$pgport" >/dev/null
  url=$(scripts/tb-pg url "$tmp/pg" "$pgport")
  TOKBENCH_DATABASE_URL=$url "$BIN/tokbench" migrate >/dev/null
  key=$(TOKBENCH_DATABASE_URL=$url "$BIN/tokbench" keys create --admin --project bench)
  master=$(openssl rand -hex 32)
  port=$(freeport)
  base="http://127.0.0.1:$port"
}

bench_start_api() {
  if [ -n "$api_pid" ]; then
    kill "$api_pid" 2>/dev/null || true
    wait "$api_pid" 2>/dev/null || true
  fi
  env TOKBENCH_DATABASE_URL="$url" TOKBENCH_LISTEN_PORT="$port" TOKBENCH_LOG_LEVEL=warn \
    TOKBENCH_EGRESS_ALLOW=loopback TOKBENCH_MASTER_KEY="$master" \
    "$@" "$BIN/tokbench-api" >>"$tmp/api.log" 2>&1 &
  api_pid=$!
  i=0
  until curl -fs "$base/readyz" >/dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 "$api_pid" 2>/dev/null; then
      echo "$bench_name: api did not start" >&2; cat "$tmp/api.log" >&2; exit 1
    fi
    sleep 0.1
  done
}
