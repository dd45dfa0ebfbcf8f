#!/bin/sh
# make bench-shards: one decode cell driven by 1, 2 and 4 worker processes
# (issue 24, item 6), against tokbench-sim's bench profile (one step of
# 20 ms / time scale at any batch: C streams give C x 50 x scale tokens/s).
# The simulator runs on CPU 1, the workers on CPU 0: the stream count is
# what two cores carry (BENCH_SHARDS_STREAMS, default 512; scale
# BENCH_SHARDS_SCALE, default 1).  For each shard count N a job of one cell
# with shards: N runs through a private PostgreSQL and N + 1 workers (one
# holds the job and merges, N drive the shards; N = 1 is one process
# measuring the cell itself).  Prints per N:
#   tokens/s measured against the model's (/sim/expected);
#   the shards' start skew p50 and max (the p99 of so few shards) and the
#   largest clock-offset uncertainty;
#   the merge's time (the coordinator reading, decoding, merging, writing);
#   CPU microseconds per token of each worker process (user + system over
#   the job, / the tokens of its shard), beside the single process's.
# Then one rate cell (Poisson arrivals at BENCH_SHARDS_RATE per second,
# default 200, for the window; 16 output tokens each) by the same 1, 2 and
# 4 shards (its schedule split as arrival i to shard i mod N): offered and
# achieved rates against the rate, schedule lag p99 and max, the
# inter-arrival CV of the union's starts, the merge's time, and CPU
# microseconds per request of each worker.
# Env: TB_BIN_DIR (release binaries), BENCH_SECONDS (window, default 5),
# BENCH_SHARDS_COUNTS (the shard counts, default "1 2 4").
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup bench_shards tokbench-worker tokbench-sim tokbench
SECS=${BENCH_SECONDS:-5}
C=${BENCH_SHARDS_STREAMS:-512}
SCALE=${BENCH_SHARDS_SCALE:-1}
PIN0="taskset -c 0"; PIN1="taskset -c 1"
command -v taskset >/dev/null 2>&1 || { PIN0=""; PIN1=""; }
[ "$(nproc)" -ge 2 ] || { PIN0=""; PIN1=""; }
psqlq() { psql -qtAX "$url" -c "$1"; }

simport=$(freeport)
$PIN1 "$BIN/tokbench-sim" --profile bench --port "$simport" --time-scale "$SCALE" \
  --max-conns 20000 >"$tmp/sim.log" 2>&1 &
pids="$pids $!"
i=0
until curl -fs "http://127.0.0.1:$simport/v1/models" >/dev/null 2>&1; do
  i=$((i + 1)); [ $i -lt 100 ] || { echo "bench_shards: sim did not start" >&2; exit 1; }
  sleep 0.1
done
model=$(curl -fs "http://127.0.0.1:$simport/sim/expected?context=1024&concurrency=$C" |
  python3 -c 'import json,sys; print(round(json.load(sys.stdin)["total_tok_s"]))')
project=$(psqlq "SELECT id FROM projects WHERE name = 'bench'")
ep=$(psqlq "INSERT INTO endpoints (project_id, name, base_url, hardware) VALUES ('$project',
  'sim', 'http://127.0.0.1:$simport', '{}') RETURNING id")

cpu_of() { # utime + stime of pid, in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

# start_workers TAG N: N + 1 workers named TAG-0 ... TAG-N on CPU 0 (pids
# in $wpids, their CPU so far in $before)
start_workers() {
  wpids=""
  for k in $(seq 0 "$2"); do
    env TOKBENCH_DATABASE_URL="$url" TOKBENCH_MASTER_KEY="$master" TOKBENCH_LOG_LEVEL=warn \
      TOKBENCH_EGRESS_ALLOW=loopback TOKBENCH_WORKER_ID="$1-$k" TOKBENCH_POLL_S=1 \
      TOKBENCH_SHARD_MAX_STREAMS=100000 \
      $PIN0 "$BIN/tokbench-worker" >>"$tmp/worker.log" 2>&1 &
    wpids="$wpids $!"
  done
  pids="$pids $wpids"
  sleep 1
  before=""
  for p in $wpids; do before="$before $(cpu_of "$p")"; done
}

# run_job SPEC: the job run to its end (its id in $jid, the workers' CPU
# after it in $after)
run_job() {
  jid=$(psqlq "WITH j AS (INSERT INTO jobs (project_id, endpoint_id, spec, busy_key)
    VALUES ('$project', '$ep', '$1', '$ep') RETURNING id)
    SELECT id FROM j, pg_notify('tb_jobs_queued', (SELECT id::text FROM j)) x")
  i=0
  while :; do
    st=$(psqlq "SELECT state FROM jobs WHERE id = '$jid'")
    case $st in succeeded|failed|cancelled) break ;; esac
    i=$((i + 1)); [ $i -lt 1200 ] || { echo "bench_shards: job $jid stuck ($st)" >&2; break; }
    sleep 0.1
  done
  after=""
  for p in $wpids; do after="$after $(cpu_of "$p")"; done
}

stop_workers() {
  for p in $wpids; do kill "$p" 2>/dev/null || true; done
  for p in $wpids; do wait "$p" 2>/dev/null || true; done
}

printf '%-7s %9s %9s %7s | %8s %8s %8s | %9s | %s\n' shards "model/s" "tok/s" ratio \
  "skew50" "skewmax" "clock+-" "merge" "CPU us/token of each worker (coordinator first)"
for n in ${BENCH_SHARDS_COUNTS:-1 2 4}; do
  start_workers "b$n" "$n"
  run_job "{\"contexts\": [1024], \"concurrency\": [$C], \"prefill_contexts\": [],
    \"duration_s\": $SECS, \"settle_s\": 0.5, \"max_output\": 4096, \"shards\": $n}"
  owner=$(psqlq "SELECT coalesce((SELECT data->>'worker' FROM job_events WHERE job_id = '$jid'
    AND kind = 'state' AND data->>'state' = 'running' ORDER BY id LIMIT 1), '')")
  # the cell by file: a decode cell with its samples is past ARG_MAX
  psqlq "SELECT cell FROM job_cells WHERE job_id = '$jid' AND phase = 'decode'" >"$tmp/cell.json"
  shard_workers=$(psqlq "SELECT string_agg(worker, ' ' ORDER BY shard) FROM cell_shards s
    JOIN cell_barriers b USING (job_id, cell_key, attempt) WHERE s.job_id = '$jid'
    AND b.state = 'merged'")
  python3 - "$n" "$model" "$(getconf CLK_TCK)" "$owner" "$shard_workers" "$wpids" "$before" \
    "$after" "$tmp/cell.json" <<'PY'
import json, sys
n, model, tck = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
owner, shard_workers = sys.argv[4], sys.argv[5].split()
pids, before, after = sys.argv[6].split(), sys.argv[7].split(), sys.argv[8].split()
text = open(sys.argv[9]).read().strip()
cell = json.loads(text) if text else {}
if cell.get("status") != "valid":
    print("%-7d no valid cell: %s" % (n, cell.get("reason", "no cell")))
    sys.exit(0)
tps, tokens = cell["total_tps"], cell["output_tokens"]
sh = cell.get("shards", {})
names = ["b%d-%d" % (n, k) for k in range(len(pids))]
cpu = {nm: (float(a) - float(b)) / tck for nm, a, b in zip(names, after, before)}
# each shard's tokens: its share of the streams (C / n) of the window's tokens
per = tokens / n
cols = []
order = [owner] + [w for w in names if w != owner]
for w in order:
    if w not in cpu:
        continue
    if n == 1 and w == owner:
        cols.append("%.2f (single)" % (cpu[w] / tokens * 1e6))
    elif w == owner:
        cols.append("%.2f (coord)" % (cpu[w] / tokens * 1e6))
    elif w in shard_workers:
        cols.append("%.2f" % (cpu[w] / per * 1e6))
print("%-7d %9.0f %9.0f %7.3f | %8s %8s %8s | %9s | %s" % (
    n, model, tps, tps / model,
    "%.3f" % sh["skew_p50_ms"] if sh else "-", "%.3f" % sh["skew_max_ms"] if sh else "-",
    "%.3f" % sh["clock_uncertainty_max_ms"] if sh else "-",
    "%.1f ms" % sh["merge_ms"] if sh else "-", "  ".join(cols)))
PY
  stop_workers
done

RATE=${BENCH_SHARDS_RATE:-200}
echo
printf '%-7s %7s %8s %8s | %8s %8s %6s | %9s | %s\n' "rate" "rps" offered achieved \
  "lag p99" "lag max" "CV" "merge" "CPU us/request of each worker (coordinator first)"
for n in ${BENCH_SHARDS_COUNTS:-1 2 4}; do
  start_workers "r$n" "$n"
  run_job "{\"rates\": [$RATE], \"rate_duration_s\": $SECS, \"arrival\": \"poisson\",
    \"seed\": 24, \"input_tokens\": \"256\", \"output_tokens\": \"16\", \"shards\": $n}"
  owner=$(psqlq "SELECT coalesce((SELECT data->>'worker' FROM job_events WHERE job_id = '$jid'
    AND kind = 'state' AND data->>'state' = 'running' ORDER BY id LIMIT 1), '')")
  psqlq "SELECT cell FROM job_cells WHERE job_id = '$jid' AND phase = 'rate'" >"$tmp/cell.json"
  python3 - "$n" "$RATE" "$(getconf CLK_TCK)" "$owner" "$wpids" "$before" "$after" "$tmp/cell.json" \
    <<'PY'
import json, sys
n, rate, tck, owner = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
pids, before, after = sys.argv[5].split(), sys.argv[6].split(), sys.argv[7].split()
text = open(sys.argv[8]).read().strip()
cell = json.loads(text) if text else {}
if cell.get("status") != "valid":
    print("%-7d no valid cell: %s" % (n, cell.get("reason", "no cell")))
    sys.exit(0)
names = ["r%d-%d" % (n, k) for k in range(len(pids))]
cpu = {nm: (float(a) - float(b)) / tck for nm, a, b in zip(names, after, before)}
reqs = cell["requests_started"]
per = reqs / n  # each shard's share of the schedule
cols = []
for w in [owner] + [w for w in names if w != owner]:
    if w not in cpu:
        continue
    if w == owner:
        cols.append("%.0f (%s)" % (cpu[w] / reqs * 1e6, "single" if n == 1 else "coord"))
    elif n > 1:  # N = 1: the one process measures it; the other worker idles
        cols.append("%.0f" % (cpu[w] / per * 1e6))
sh = cell.get("shards", {})
lag = cell["schedule_lag_ms"]
cv = cell.get("interarrival_cv")
print("%-7d %7.0f %8.1f %8.1f | %8.3f %8.3f %6s | %9s | %s" % (
    n, rate, cell["offered_rps"], cell["achieved_rps"], lag["p99"], lag["max"],
    "%.3f" % cv if cv is not None else "-", "%.1f ms" % sh["merge_ms"] if sh else "-",
    "  ".join(cols)))
PY
  stop_workers
done
echo "streams: $C, window: $SECS s, time scale: $SCALE; skew in ms (how late a shard opened"
echo "its window after t0 on the database's timeline: 0 when it read t0 before t0 came);"
echo "clock+-: the largest clock-offset uncertainty (half the tightest round trip), the bound"
echo "on how far two shards' windows can differ; merge: collect + decode + merge + write;"
echo "CPU: each worker process's user + system time over the job / its shard's tokens"
echo "(the coordinator's over the cell's tokens).  Rate rows: a Poisson schedule of $RATE/s"
echo "for $SECS s split i mod N; lag in ms (actual start - scheduled), CV of the union's"
echo "inter-start gaps (1 for Poisson launched on time); CPU per request of the shard's share"
echo "(the coordinator's over all requests).  load average: $(cut -d' ' -f1-3 /proc/loadavg)"
