#!/bin/sh
# bench_history (issue 36, item 3): the read routes with the database empty,
# then with a year of history behind them.
#   1. 5 projects with 4 endpoints each (tokbench-sim, vLLM and SGLang
#      flavours); in project hist-0, templates: real jobs the worker runs to
#      the end (decode 4 contexts x 4 concurrencies, 4 prefill cells).
#   2. "empty": each route with BENCH_HISTORY_CONNS clients (wrk, 100) for
#      BENCH_HISTORY_SECONDS (5), over many paths (bench/paths.lua).
#   3. bench/history_seed.sql clones the templates into BENCH_HISTORY_JOBS
#      jobs (100,000: about 2M cells) over the 20 endpoints and a year.
#   4. "full": the same routes, over paths of the cloned jobs.
#   5. EXPLAIN (ANALYZE, BUFFERS) of every statement the routes ran, once
#      each, through auto_explain, into $OUT/history_plans.txt (docs/deploy.md
#      quotes them); a plan that reads many more rows than it returns is
#      named in the output.
# Rows: route, then p50 and p99 empty and full, and full's p99 / empty's.
# A route with answers that are not 2xx is FAILED and the script exits 1.
# Env: TB_BIN_DIR (build-rel/bin), BENCH_HISTORY_JOBS, BENCH_HISTORY_SECONDS,
#      BENCH_HISTORY_CONNS, BENCH_HISTORY_TEMPLATES (2), BENCH_HISTORY_CELL_S
#      (each template cell's measured seconds, 0.5), BENCH_HISTORY_PERF
#      (routes to profile with perf while they run full, e.g. "result pareto"),
#      BENCH_HISTORY_ROUTES (a subset of the routes, for a quicker look).
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
JOBS=${BENCH_HISTORY_JOBS:-100000}
SECS=${BENCH_HISTORY_SECONDS:-5}
CONNS=${BENCH_HISTORY_CONNS:-100}
TEMPLATES=${BENCH_HISTORY_TEMPLATES:-2}
command -v wrk >/dev/null || { echo "bench_history: wrk missing (make deps)" >&2; exit 1; }
bench_setup bench_history tokbench-api tokbench tokbench-worker tokbench-sim
bench_out
# a deployment's settings: info logs (a line per request), limits off so
# that what is measured is the route, not refusals
api_env="TOKBENCH_THREADS=8 TOKBENCH_DB_POOL=16 TOKBENCH_RATE_LIMIT=0 TOKBENCH_RATE_LIMIT_PROJECT=0
  TOKBENCH_LIMIT_QUEUED=0 TOKBENCH_LOG_LEVEL=info"
# shellcheck disable=SC2086
bench_start_api $api_env
psql_q() { psql -X -Atq -v ON_ERROR_STOP=1 -d "$url" "$@"; }
json_id() { python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }

for fl in vllm sglang; do
  p=$(freeport)
  "$BIN/tokbench-sim" --profile tiny --flavour "$fl" --port "$p" --time-scale 20 \
    >"$tmp/sim-$fl.log" 2>&1 &
  pids="$pids $!"
  eval "sim_$fl=http://127.0.0.1:$p"
done
# shellcheck disable=SC2154
for pr in 0 1 2 3 4; do
  k=$(TOKBENCH_DATABASE_URL=$url "$BIN/tokbench" keys create --admin --project "hist-$pr")
  eval "key_$pr=$k"
  for e in 0 1 2 3; do
    if [ $((e % 2)) = 0 ]; then su=$sim_vllm; else su=$sim_sglang; fi
    curl -fs -o /dev/null -H "Authorization: Bearer $k" -H 'Content-Type: application/json' \
      -d "{\"name\":\"hist-$pr-$e\",\"base_url\":\"$su\",\"hardware\":{\"gpu\":\"sim\",\"count\":1}}" \
      "$base/v1/endpoints"
  done
done
# shellcheck disable=SC2154
hkey=$key_0
auth="Authorization: Bearer $hkey"
pid0=$(psql_q -c "SELECT id FROM projects WHERE name = 'hist-0'")
TOKBENCH_DATABASE_URL=$url TOKBENCH_WORKER_ID=hist TOKBENCH_LOG_LEVEL=warn \
  TOKBENCH_EGRESS_ALLOW=loopback TOKBENCH_MASTER_KEY=$master "$BIN/tokbench-worker" \
  >"$tmp/worker.log" 2>&1 &
pids="$pids $!"

# the templates, one after another on the project's endpoints
spec='"contexts":[1024,2048,4096,8192],"concurrency":[1,2,4,8],"prefill_contexts":[1024,2048,4096,8192],"duration_s":'"${BENCH_HISTORY_CELL_S:-0.5}"',"max_output":32'
i=0
while [ $i -lt "$TEMPLATES" ]; do
  ep=$(psql_q -c "SELECT id FROM endpoints WHERE name = 'hist-0-$((i % 4))'")
  if [ $((i % 2)) = 0 ]; then eng=vllm; else eng=sglang; fi
  id=$(curl -fs -H "$auth" -H 'Content-Type: application/json' \
    -d "{\"endpoint_id\":\"$ep\",$spec,\"labels\":{\"suite\":\"nightly\",\"branch\":\"main\",\"engine\":\"$eng\"}}" \
    "$base/v1/jobs" | json_id)
  n=0
  while :; do
    st=$(psql_q -c "SELECT state FROM jobs WHERE id = '$id'")
    case "$st" in succeeded) break ;; failed|cancelled)
      echo "bench_history: template job $id $st" >&2; tail -5 "$tmp/worker.log" >&2; exit 1 ;; esac
    n=$((n + 1))
    [ $n -gt 1200 ] && { echo "bench_history: template job $id did not finish" >&2; exit 1; }
    sleep 0.1
  done
  i=$((i + 1))
done
kill $pids 2>/dev/null || true
pids=""
psql_q -c "CREATE TABLE templates AS SELECT id FROM jobs WHERE state = 'succeeded'"
psql_q -c "SELECT format('templates: %s jobs, %s cells each, result %s KB as text (%s KB stored), '
             'pareto_doc %s KB, GET /v1/jobs/{id} document %s KB',
             count(*), round(avg(cells_done)), round(avg(octet_length(result::text)) / 1024),
             round(avg(pg_column_size(result)) / 1024),
             round(avg(octet_length(pareto_doc::text)) / 1024),
             round(avg((SELECT sum(octet_length(c.cell::text)) FROM job_cells c
                        WHERE c.job_id = j.id)) / 1024))
           FROM jobs j WHERE state = 'succeeded'"

# the labels=... of each path read, URL-encoded
quote_labels() {
  python3 -c 'import sys, urllib.parse as u
for l in sys.stdin:
    a, b = l.rstrip("\n").split("&labels=")
    print(a + "&labels=" + u.quote(b, safe=""))'
}

# paths FILE: the paths of each route, from the jobs and endpoints of hist-0
paths() {
  d=$1
  mkdir -p "$d"
  # get: the templates, in both phases (what history does to one job's
  # read); get_many: any of the project's jobs (the job cache mostly misses)
  psql_q -c "SELECT '/v1/jobs/' || id FROM jobs WHERE id IN (SELECT id FROM templates)" >"$d/get"
  psql_q -c "SELECT '/v1/jobs/' || id FROM jobs WHERE project_id = '$pid0' ORDER BY random() LIMIT 2000" >"$d/get_many"
  sed 's|$|/result|' "$d/get_many" >"$d/result"
  sed 's|$|/report?format=md|' "$d/get_many" | head -n 300 >"$d/report"
  psql_q -c "SELECT '/v1/jobs?limit=50&endpoint_id=' || id FROM endpoints WHERE project_id = '$pid0'" >"$d/list"
  echo "/v1/jobs?limit=50" >>"$d/list"
  psql_q -c "SELECT '/v1/jobs?limit=50&state=failed&label=suite:pr&endpoint_id=' || id
             FROM endpoints WHERE project_id = '$pid0'" >"$d/list_filtered"
  psql_q -c "SELECT DISTINCT '/v1/series?endpoint_id=' || endpoint_id || '&phase=' || phase ||
               '&context=' || context || '&concurrency=' || concurrency || '&labels=' ||
               replace(labels::text, ' ', '')
             FROM series_points WHERE project_id = '$pid0' AND labels @> '{\"branch\":\"main\"}'" \
    | quote_labels >"$d/series"
  psql_q -c "SELECT DISTINCT '/v1/series?endpoint_id=' || endpoint_id || '&labels=' ||
               replace(labels::text, ' ', '')
             FROM series_points WHERE project_id = '$pid0' AND labels @> '{\"branch\":\"main\"}'" \
    | quote_labels >"$d/series_matrix"
  psql_q -c "SELECT '/v1/pareto?endpoint_id=' || id FROM endpoints WHERE project_id = '$pid0'" >"$d/pareto"
  echo "/v1/pareto" >>"$d/pareto"
  psql_q -c "SELECT '/v1/compare?base=' || a.id || '&head=' || b.id
             FROM (SELECT id, row_number() OVER () AS n FROM (SELECT id FROM jobs
                     WHERE project_id = '$pid0' AND state = 'succeeded' ORDER BY random() LIMIT 200) x) a
             JOIN (SELECT id, row_number() OVER () AS n FROM (SELECT id FROM jobs
                     WHERE project_id = '$pid0' AND state = 'succeeded' ORDER BY random() LIMIT 200) y) b
             USING (n)" >"$d/compare"
}

ROUTES=${BENCH_HISTORY_ROUTES:-"get get_many result report list list_filtered series series_matrix pareto compare"}
failed=0
measure() { # phase dir
  for r in $ROUTES; do
    # one answer first: a route that refuses is shown with its answer
    pth=$(head -n 1 "$2/$r")
    st=$(curl -s -o "$tmp/answer" -w '%{http_code}' -H "Authorization: Bearer $hkey" "$base$pth")
    case "$st" in 2*) ;; *) echo "bench_history: $1 $r: GET $pth: $st $(head -c 300 "$tmp/answer")" ;; esac
    prof=""
    case " ${BENCH_HISTORY_PERF:-} " in *" $r "*)
      [ "$1" = full ] && command -v perf >/dev/null && {
        perf record -q -g -o "$tmp/perf-$r.data" -p "$api_pid" -- sleep "$SECS" 2>/dev/null &
        prof=$!
      } ;;
    esac
    BENCH_PATHS="$2/$r" BENCH_KEY=$hkey wrk -t2 -c"$CONNS" -d"${SECS}s" --timeout 10s --latency \
      -s bench/paths.lua "$base" >"$tmp/$1-$r.txt" 2>&1 || true
    if [ -n "$prof" ]; then
      wait "$prof" || true
      echo "perf of tokbench-api under $r (full), the top symbols by self time:"
      perf report -q -i "$tmp/perf-$r.data" --no-children --sort symbol --percent-limit 2 \
        2>/dev/null | grep -v '^$' | grep '%' | head -n 15
    fi
  done
}
# wrk's latency in ms from "50%  1.23ms" (us, ms or s)
lat() { # file pct
  awk -v p="$2" '$1 == p { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
    if (u == "us") v /= 1000; else if (u == "s") v *= 1000; else if (u == "m") v *= 60000;
    printf "%.2f", v }' "$1"
}
bad() { # file: answers not 2xx plus socket errors
  awk '/Non-2xx or 3xx responses:/ {n += $5} /Socket errors:/ {gsub(",", ""); n += $4 + $6 + $8 + $10}
       END {print n + 0}' "$1"
}

paths "$tmp/paths-empty"
measure empty "$tmp/paths-empty"
echo "seeding $JOBS jobs..."
t0=$(date +%s)
psql -X -Atq -v ON_ERROR_STOP=1 -v jobs="$JOBS" -d "$url" -f bench/history_seed.sql
echo "seeded in $(( $(date +%s) - t0 )) s"
paths "$tmp/paths-full"
# shellcheck disable=SC2086
bench_start_api $api_env # a fresh cache and pool, as after a deploy
measure full "$tmp/paths-full"

printf '%-16s %9s %9s %8s   %9s %9s %8s   %s\n' route "empty p50" "p99" "req/s" "full p50" "p99" "req/s" \
  "p99 full/empty"
for r in $ROUTES; do
  e=$tmp/empty-$r.txt f=$tmp/full-$r.txt
  be=$(bad "$e") bf=$(bad "$f")
  if [ "$be" != 0 ] || [ "$bf" != 0 ] || ! grep -q '^Requests/sec' "$e" "$f" 2>/dev/null; then
    printf '%-16s FAILED: %s and %s answers not 2xx or socket errors\n' "$r" "$be" "$bf"
    failed=1
    # which answers: each path of the route once (up to 100)
    head -n 100 "$tmp/paths-full/$r" | while read -r pth; do
      st=$(curl -s -o "$tmp/answer" -w '%{http_code}' -H "$auth" "$base$pth")
      case "$st" in 2*) ;; *) echo "  GET $pth: $st $(head -c 200 "$tmp/answer")" ;; esac
    done | head -n 5
    continue
  fi
  e50=$(lat "$e" 50%) e99=$(lat "$e" 99%) f50=$(lat "$f" 50%) f99=$(lat "$f" 99%)
  er=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$e") fr=$(awk '/^Requests\/sec:/ {printf "%.0f", $2}' "$f")
  printf '%-16s %7s ms %6s ms %8s   %7s ms %6s ms %8s   %s\n' "$r" "$e50" "$e99" "$er" "$f50" "$f99" \
    "$fr" "$(awk -v a="$f99" -v b="$e99" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }')"
done

# How large each route's answer is (the first full path's), beside its time.
sizes=""
for r in $ROUTES; do
  b=$(curl -s -o /dev/null -w '%{size_download}' -H "$auth" "$base$(head -n 1 "$tmp/paths-full/$r")")
  sizes="$sizes $r $((b / 1024)) KB,"
done
echo "answer sizes (full):${sizes%,}"

# The plans: auto_explain of each statement once, over the full database.
psql_q -c "LOAD 'auto_explain'" -c "ALTER SYSTEM SET session_preload_libraries = 'auto_explain'" \
  -c "ALTER SYSTEM SET auto_explain.log_min_duration = 0" \
  -c "ALTER SYSTEM SET auto_explain.log_analyze = on" \
  -c "ALTER SYSTEM SET auto_explain.log_buffers = on" \
  -c "ALTER SYSTEM SET auto_explain.log_nested_statements = on" -c "SELECT pg_reload_conf()" >/dev/null
pglog="$tmp/pg/postgres.log"
mark=$(wc -c <"$pglog")
# shellcheck disable=SC2086
bench_start_api $api_env
for r in $ROUTES; do
  curl -fs -o /dev/null -H "$auth" "$base$(sed -n 2p "$tmp/paths-full/$r")" || true
done
sleep 0.5
tail -c +"$((mark + 1))" "$pglog" | python3 bench/history_plans.py "$OUT/history_plans.txt"
psql_q -c "ALTER SYSTEM RESET ALL" -c "SELECT pg_reload_conf()" >/dev/null
exit $failed
