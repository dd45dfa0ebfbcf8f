#!/bin/bash
# docker/healthcheck.sh [PORT [PATH]]: exits 0 when
# http://127.0.0.1:PORT/PATH answers 200 within 5 s, 1 otherwise.
# Defaults: $TOKBENCH_LISTEN_PORT (8080) and /readyz.  Bash's /dev/tcp, so
# the runtime image needs no curl.
set -u
port=${1:-${TOKBENCH_LISTEN_PORT:-8080}}
path=${2:-/readyz}
{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || exit 1
printf 'GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&3
IFS= read -r -t 5 status <&3 || exit 1
exec 3<&-
case "$status" in
  "HTTP/1."?" 200 "*|"HTTP/1."?" 200") exit 0 ;;
esac
exit 1
