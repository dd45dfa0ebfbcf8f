#!/bin/sh
# make run: tokbench on its embedded default.
#
# Without TOKBENCH_DATABASE_URL: a private PostgreSQL cluster under var/pg
# (created once, found again next time).  Then tokbench-api on
# 127.0.0.1:8080, one tokbench-worker, and a tokbench-sim endpoint registered
# as a demo.  Prints an admin API key and a curl line to try.  Ctrl-C stops
# everything, the database included.
#
# Knobs: TOKBENCH_LISTEN_PORT (8080), TOKBENCH_PG_PORT (54329),
# TOKBENCH_SIM_PORT (8001), TOKBENCH_SIM_PROFILE (tiny), TB_BIN_DIR (bin),
# TB_VAR_DIR (var: the cluster, keys and logs).
#
# Stopping (issue 13, finding 10): SIGINT or SIGTERM at any moment of the
# start-up stops everything started so far within a few seconds.
# - A shell started with SIGINT ignored (any background job of a
#   non-interactive shell: `make run &`, CI runners) cannot trap it, and
#   would carry on starting things after a Ctrl-C meant for its group: the
#   script re-executes itself once with the default actions back.
# - The trap runs between commands; each command of the start-up is short
#   (curl has a time limit) or dies of the same signal (it is in the group).
# - PostgreSQL is ours to stop from the moment its start begins (pg_ctl runs
#   it in a session of its own: the group's signal does not reach it).
# - While stopping, further signals are ignored, so a second Ctrl-C cannot
#   cut the stop short; a child that does not end within 10 s is killed.
set -eu
if [ -z "${TB_RUN_SIGNALS_RESET:-}" ] && env --default-signal=INT true 2>/dev/null; then
  TB_RUN_SIGNALS_RESET=1 exec env --default-signal=INT,QUIT,TERM sh "$0" "$@"
fi
cd "$(dirname "$0")/.."
top=$(pwd)
bindir=${TB_BIN_DIR:-bin}
var=${TB_VAR_DIR:-"$top/var"}
mkdir -p "$var"
var=$(cd "$var" && pwd)
chmod 0755 "$var"
api_port=${TOKBENCH_LISTEN_PORT:-8080}
pg_port=${TOKBENCH_PG_PORT:-54329}
sim_port=${TOKBENCH_SIM_PORT:-8001}
sim_profile=${TOKBENCH_SIM_PROFILE:-tiny}
own_pg=0
pids=""

stop_all() {
  trap '' INT TERM
  trap - EXIT
  echo
  echo "tokbench: stopping"
  for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
  # up to 10 s for them to end (the worker hands its job back), then KILL
  i=0
  while [ $i -lt 100 ]; do
    alive=""
    for p in $pids; do kill -0 "$p" 2>/dev/null && alive="$alive $p"; done
    [ -z "$alive" ] && break
    i=$((i + 1))
    sleep 0.1
  done
  for p in $pids; do kill -KILL "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  if [ "$own_pg" = 1 ]; then scripts/tb-pg stop "$var/pg"; fi
  echo "tokbench: stopped"
}
trap 'stop_all; exit 0' INT TERM
trap 'stop_all' EXIT

# spawn LOG CMD ARGS...: CMD in the background, its pid in $pids.  A signal
# between the fork and the record of the pid would stop everything but it
# (started with SIGINT ignored, as every background job of a script): it
# is noted, and acted on once the pid is known.
interrupted=0
spawn() {
  log=$1
  shift
  trap 'interrupted=1' INT TERM
  "$@" >>"$log" 2>&1 &
  pids="$pids $!"
  trap 'stop_all; exit 0' INT TERM
  if [ "$interrupted" = 1 ]; then stop_all; exit 0; fi
}

if [ -z "${TOKBENCH_DATABASE_URL:-}" ]; then
  scripts/tb-pg init "$var/pg"
  own_pg=1 # from here on: a start cut short may still leave it running
  scripts/tb-pg start "$var/pg" "$pg_port"
  TOKBENCH_DATABASE_URL=$(scripts/tb-pg url "$var/pg" "$pg_port")
fi
export TOKBENCH_DATABASE_URL

# The master key that seals endpoint API keys at rest: generated once.
if [ -z "${TOKBENCH_MASTER_KEY:-}" ] && [ -z "${TOKBENCH_MASTER_KEY_FILE:-}" ]; then
  if [ ! -f "$var/master.key" ]; then
    (umask 077; openssl rand -hex 32 > "$var/master.key")
  fi
  export TOKBENCH_MASTER_KEY_FILE="$var/master.key"
fi

# The key finished results are signed with (docs/verify.md): generated once.
if [ -z "${TOKBENCH_SIGNING_KEY_FILE:-}" ]; then
  if [ ! -f "$var/signing.key" ]; then
    (umask 077; openssl genpkey -algorithm ed25519 -out "$var/signing.key")
  fi
  export TOKBENCH_SIGNING_KEY_FILE="$var/signing.key"
fi

export TOKBENCH_LISTEN_PORT="$api_port"
# The egress policy refuses loopback by default (docs/deploy.md); the demo
# simulator listens on 127.0.0.1, so make run allows it.
export TOKBENCH_EGRESS_ALLOW="${TOKBENCH_EGRESS_ALLOW:-loopback}"
spawn "$var/api.log" "$bindir/tokbench-api"
# Ready when /readyz answers 200 (the migrations are then applied).
i=0
until curl -fs -m 2 "http://127.0.0.1:$api_port/readyz" >/dev/null 2>&1; do
  i=$((i + 1))
  if [ $i -gt 100 ]; then echo "tokbench: the api did not start; see $var/api.log" >&2; tail -n 5 "$var/api.log" >&2; exit 1; fi
  sleep 0.1
done

if [ -x "$bindir/tokbench-sim" ]; then
  spawn "$var/sim.log" "$bindir/tokbench-sim" --port "$sim_port" --flavour vllm \
    --profile "sim/profiles/$sim_profile.json"
fi
spawn "$var/worker.log" "$bindir/tokbench-worker"

# The demo project, its admin key (kept in var/admin.key, 0600, for this
# embedded default only) and the simulated endpoint.
if [ ! -s "$var/admin.key" ] && "$bindir/tokbench" keys --help >/dev/null 2>&1; then
  (umask 077; "$bindir/tokbench" keys create --admin --project demo > "$var/admin.key")
fi
key=$(cat "$var/admin.key" 2>/dev/null || true)
if [ -n "$key" ] && [ -x "$bindir/tokbench-sim" ]; then
  auth="Authorization: Bearer $key"
  sim_url="http://127.0.0.1:$sim_port"
  ep=$(curl -fs -m 5 -H "$auth" "http://127.0.0.1:$api_port/v1/endpoints" |
       jq -r '.endpoints[] | select(.name == "demo-sim") | .id' 2>/dev/null || true)
  if [ -z "$ep" ]; then
    curl -fs -m 5 -o /dev/null -H "$auth" -H 'Content-Type: application/json' \
      -d "{\"name\":\"demo-sim\",\"base_url\":\"$sim_url\",\"hardware\":{\"gpu\":\"simulated ($sim_profile)\",\"count\":1}}" \
      "http://127.0.0.1:$api_port/v1/endpoints" || echo "tokbench: could not register the demo endpoint" >&2
  else
    # the simulator may listen elsewhere this time (TOKBENCH_SIM_PORT)
    curl -fs -m 5 -o /dev/null -X PATCH -H "$auth" -H 'Content-Type: application/json' \
      -d "{\"base_url\":\"$sim_url\"}" "http://127.0.0.1:$api_port/v1/endpoints/$ep" || true
  fi
fi

cat <<MSG

tokbench is running: http://127.0.0.1:$api_port  (logs in $var/*.log; Ctrl-C stops it)
  admin API key: ${key:-"(none yet)"}
  try:  curl -H "Authorization: Bearer ${key:-KEY}" http://127.0.0.1:$api_port/v1/endpoints
        curl http://127.0.0.1:$api_port/healthz

MSG
wait
