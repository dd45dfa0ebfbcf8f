#!/bin/sh
# docker/entrypoint.sh: the image's entrypoint.  Applies the database
# migrations, then execs the command (tokbench-api by default).
#
#   entrypoint.sh [COMMAND [ARGS...]]
#
# - tokbench-api and tokbench-worker migrate first (TOKBENCH_MIGRATE=0 turns
#   that off); any other command (tokbench, tokbench-sim, sh) runs as is
#   (TOKBENCH_MIGRATE=1 turns it on).  Migrations take an advisory lock, so
#   any number of replicas may start at once.
# - A first argument starting with '-' is an option of tokbench-api.
# - PostgreSQL may still be starting: migrate is retried for
#   TOKBENCH_DB_WAIT_S seconds (default 60) before giving up with status 1.
# - TOKBENCH_MASTER_KEY_FILE may name a Docker secret; nothing here reads or
#   prints a secret.
# Runs outside a container too (tests/integration/test_docker.py runs it
# against a throwaway PostgreSQL with the binaries on PATH).
set -eu

if [ $# -eq 0 ]; then
  set -- tokbench-api
fi
case "$1" in
  -*) set -- tokbench-api "$@" ;;
esac

case "$1" in
  tokbench-api|tokbench-worker|*/tokbench-api|*/tokbench-worker) migrate=${TOKBENCH_MIGRATE:-1} ;;
  *) migrate=${TOKBENCH_MIGRATE:-0} ;;
esac

log() {
  # one JSON object a line, like the binaries' own logs (messages are ours:
  # no quotes or backslashes to escape)
  printf '{"ts":"%s","level":"%s","component":"entrypoint","msg":"%s"}\n' \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$1" "$2" >&2
}

if [ "$migrate" = 1 ]; then
  if [ -z "${TOKBENCH_DATABASE_URL:-}" ]; then
    log error "TOKBENCH_DATABASE_URL is not set"
    exit 2
  fi
  wait_s=${TOKBENCH_DB_WAIT_S:-60}
  start=$(date +%s)
  until out=$(tokbench migrate 2>&1); do
    if [ $(( $(date +%s) - start )) -ge "$wait_s" ]; then
      log error "migrations failed; giving up after ${wait_s}s"
      printf '%s\n' "$out" >&2
      exit 1
    fi
    log warn "database not ready; retrying migrations"
    sleep 2
  done
  log info "migrations: $out"
fi

exec "$@"
