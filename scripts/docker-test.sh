#!/bin/bash
# make docker-test: docker/Dockerfile built and run for real, with no registry.
#
#   scripts/docker-test.sh           the whole test (as root, on Debian 12)
#   scripts/docker-test.sh --probe   exit 0 when this machine can run it; else
#                                    print the reason and exit 1 (make test's SKIP)
#
# 1. The tools from the project's own list (scripts/deps.sh docker): podman,
#    buildah, runc, debootstrap, podman-compose, a PostgreSQL server.
# 2. A temporary directory holds everything podman makes: its storage, run
#    state, containers.conf (runtime runc; default_ulimits within the hard
#    limits), registries.conf (no registry to search) and network config,
#    pointed at by CONTAINERS_CONF, CONTAINERS_STORAGE_CONF and
#    CONTAINERS_REGISTRIES_CONF, so nothing of the machine's changes.
# 3. A base image made here: debootstrap --variant=minbase bookworm from the
#    Debian mirror apt already uses (read from the apt sources at run time),
#    with those sources copied in, imported as debian:12 and tagged
#    debian:12-slim.  `podman build --pull=never`: no registry is ever asked.
#    The base's tar is cached by the hash of what it is made from (below:
#    TB_DOCKER_CACHE, TB_DOCKER_BASE_DAYS), so a second run skips debootstrap.
# 4. Checks of the images: the runtime image's binaries find every library
#    they link against (ldd), and run as a non-root user.
# 5. One stack: a throwaway PostgreSQL cluster on the host (scripts/tb-pg, TCP
#    on 127.0.0.1), and the api, a worker and the simulator each in its own
#    container from the image, on the host's network (--network host: all
#    traffic stays on loopback).  docker/healthcheck.sh on the api and the
#    simulator (podman healthcheck run), an admin key from `tokbench keys
#    create` inside the api container, then the README's quick-start lines,
#    verbatim but for the port, to a succeeded job and its Markdown report.
# 6. docker/compose.yaml through `podman-compose config`; then the scaling
#    the compose file offers (--scale worker=3), done with the same image:
#    three worker containers on one queue run three jobs against three
#    simulated endpoints at once (three distinct lease owners seen together).
# 7. Shards (issue 24): a job with shards: 2 on those three workers: its one
#    cell driven by two worker containers, its percentiles equal to a
#    recomputation from the samples they stored, tokens/s within 2%.
# The last line says the job succeeded.  On exit, also on failure or Ctrl-C,
# every container, image and byte of storage it made is removed (but the
# cached base tar), and the cluster stopped and deleted.  Timings are printed as it goes.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
t_start=$(date +%s)

say() { printf 'docker-test: %s\n' "$*"; }
die() { printf 'docker-test: FAIL: %s\n' "$*" >&2; exit 1; }

# find_mirror: the Debian mirror apt already uses (scripts/mirror.sh).
# shellcheck source=mirror.sh
. scripts/mirror.sh

# Can this machine build and run containers the way this test does?
probe() {
  [ "$(uname -s)" = Linux ] || { echo "not Linux"; return 1; }
  [ "$(id -u)" -eq 0 ] || { echo "not root (podman here runs as root, with runc)"; return 1; }
  command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1 \
    || { echo "no apt-get/dpkg to install podman, runc and debootstrap"; return 1; }
  # shellcheck disable=SC1091
  [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" = bookworm ] \
    || { echo "not Debian 12 (bookworm)"; return 1; }
  find_mirror >/dev/null || { echo "no bookworm mirror in the apt sources"; return 1; }
  unshare --mount --pid --uts --ipc --fork true 2>/dev/null \
    || { echo "the kernel or sandbox refuses new namespaces (unshare)"; return 1; }
  return 0
}

if [ "${1:-}" = --probe ]; then
  probe
  exit
fi
why=$(probe) || die "this machine cannot run containers: $why"

# -- 1. the tools -------------------------------------------------------------
t=$(date +%s)
scripts/deps.sh docker
say "tools ready ($(($(date +%s) - t)) s): $(podman --version), runc $(runc --version | awk 'NR==1 { print $3 }')"

# -- 2. everything in one temporary directory --------------------------------
tmp=$(mktemp -d /tmp/tb-docker.XXXXXX)
chmod 0755 "$tmp"   # the postgres user reaches its cluster below
pg_dir="$tmp/pg"
podman_used=0
verdict=""
child=""   # the long step running now (bg_wait), ended first on a signal
# bg_wait CMD...: runs CMD as a child and waits for it, so that a signal
# reaches the traps at once, not when a long step ends.
# The child leads a process group of its own, which cleanup ends whole
# (debootstrap catches TERM and acts on it only when its own child ends).
bg_wait() {
  setsid "$@" &
  child=$!
  wait "$child"
  local st=$?
  child=""
  return "$st"
}
cleanup() {
  local rc=$?
  set +e
  trap - EXIT INT TERM ERR
  exec 1>&3 2>&4   # a signal may come inside a step whose output is redirected
  if [ -n "$child" ]; then
    kill -TERM -- "-$child" 2>/dev/null
    wait "$child" 2>/dev/null
  fi
  if [ "$podman_used" = 1 ]; then
    podman rm -a -f -t 2 >/dev/null 2>&1
    podman rmi -a -f >/dev/null 2>&1
    podman system reset -f >/dev/null 2>&1
    # what podman writes outside its configured places whatever the
    # configuration (containers/image's blob cache under /var/lib/containers)
    { find $machine_paths 2>/dev/null || true; } | sort >"$tmp/after"
    comm -13 "$tmp/before" "$tmp/after" | sort -r | while read -r p; do rm -rf "$p"; done
  fi
  [ -d "$pg_dir" ] && scripts/tb-pg stop "$pg_dir"
  # anything still mounted below the directory (overlay layers, shm)
  awk -v d="$tmp/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r |
    while read -r m; do umount -l "$m"; done
  rm -rf "$tmp"
  if [ -e "$tmp" ]; then echo "docker-test: could not remove $tmp" >&2; [ "$rc" = 0 ] && rc=1; fi
  say "removed every container and image it made, and $tmp"
  # the last line: the verdict
  if [ "$rc" = 0 ] && [ -n "$verdict" ]; then say "$verdict"; fi
  exit "$rc"
}
exec 3>&1 4>&2
trap cleanup EXIT
trap 'echo "docker-test: FAIL: status $? at line $LINENO: $BASH_COMMAND" >&2' ERR
trap 'echo "docker-test: FAIL: interrupted" >&2; exit 130' INT
trap 'echo "docker-test: FAIL: terminated" >&2; exit 143' TERM

mkdir -p "$tmp/storage" "$tmp/run" "$tmp/libpod" "$tmp/tmp" "$tmp/net" "$tmp/volumes"
cat >"$tmp/containers.conf" <<EOF
# make docker-test's own podman configuration (scripts/docker-test.sh)
[containers]
# podman's defaults (1048576 files) exceed this machine's hard limits:
# "setrlimit RLIMIT_NOFILE: Operation not permitted"
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]
[engine]
# crun refuses the hybrid cgroup layout ("cgroups in hybrid mode not supported")
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$tmp/events.log"
tmp_dir = "$tmp/libpod"
volume_path = "$tmp/volumes"
[network]
network_config_dir = "$tmp/net"
EOF
nofile=$(ulimit -Hn)
[ "$nofile" = unlimited ] && sed -i "s/nofile=unlimited:unlimited/nofile=1048576:1048576/" "$tmp/containers.conf"
[ "$(ulimit -Hu)" != unlimited ] && [ "$(ulimit -Hu)" -lt 32768 ] \
  && sed -i "s/nproc=32768:32768/nproc=$(ulimit -Hu):$(ulimit -Hu)/" "$tmp/containers.conf"
driver=overlay
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null || driver=vfs
cat >"$tmp/storage.conf" <<EOF
[storage]
driver = "$driver"
graphroot = "$tmp/storage"
runroot = "$tmp/run"
EOF
cat >"$tmp/registries.conf" <<EOF
# no registry to search: short names resolve to local images only
unqualified-search-registries = []
short-name-mode = "permissive"
EOF
export CONTAINERS_CONF="$tmp/containers.conf" CONTAINERS_STORAGE_CONF="$tmp/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$tmp/registries.conf" TMPDIR="$tmp/tmp"
# The machine's own podman places: what appears there during the run is removed
machine_paths="/var/lib/containers /run/containers /run/libpod /etc/containers /etc/cni /var/lib/cni"
{ find $machine_paths 2>/dev/null || true; } | sort >"$tmp/before"
podman_used=1

# -- 3. the base image, made here ---------------------------------------------
# make_base TAR: debootstrap's minbase bookworm, with the host's apt sources.
make_base() {
  rm -rf "$tmp/rootfs"
  # dpkg without fsync: a throwaway tree (the file is removed below)
  mkdir -p "$tmp/rootfs/etc/dpkg/dpkg.cfg.d"
  echo force-unsafe-io >"$tmp/rootfs/etc/dpkg/dpkg.cfg.d/tb-unsafe-io"
  bg_wait debootstrap --variant=minbase bookworm "$tmp/rootfs" "$mirror" >"$tmp/debootstrap.log" 2>&1 \
    || { tail -n 20 "$tmp/debootstrap.log" >&2; die "debootstrap failed"; }
  rm -f "$tmp/rootfs/etc/dpkg/dpkg.cfg.d/tb-unsafe-io"
  # apt in the image uses the mirror (and sources) the host's apt uses
  rm -f "$tmp/rootfs/etc/apt/sources.list"
  case "$src_file" in
    *.sources) cp "$src_file" "$tmp/rootfs/etc/apt/sources.list.d/" ;;
    *) sed -e 's/\[[^]]*\]//' "$src_file" | awk '$1 == "deb" && $3 ~ /^bookworm/' \
         >"$tmp/rootfs/etc/apt/sources.list" ;;
  esac
  rm -rf "$tmp/rootfs/var/cache/apt/archives/"*.deb "$tmp/rootfs/var/lib/apt/lists/"*
  tar --numeric-owner -C "$tmp/rootfs" -cf "$1" .
  rm -rf "$tmp/rootfs"
}
# The base's tar is kept in TB_DOCKER_CACHE (default /var/cache/tokbench/
# docker; "" keeps nothing), named by the hash of what it is made from (this
# script's make_base, the mirror and the sources, debootstrap's version), and
# made again after TB_DOCKER_BASE_DAYS (7) days, for bookworm's point
# releases.  Nothing else is kept.
read -r src_file mirror < <(find_mirror)
t=$(date +%s)
cache=${TB_DOCKER_CACHE-/var/cache/tokbench/docker}
base_key=$( { declare -f make_base; echo "$mirror"; cat "$src_file"
              dpkg-query -W -f='${Version}\n' debootstrap; } | sha256sum | cut -c1-16)
base_tar="$tmp/base.tar"
base_from="debootstrap"
if [ -n "$cache" ]; then
  mkdir -p "$cache"
  base_tar="$cache/debian-12-$base_key.tar"
  find "$cache" -maxdepth 1 -name 'debian-12-*.tar' \( ! -name "${base_tar##*/}" -o \
    -mtime +"${TB_DOCKER_BASE_DAYS:-7}" \) -delete
  if [ -s "$base_tar" ]; then base_from="the cache, $base_tar"; fi
fi
if [ ! -s "$base_tar" ]; then
  make_base "$base_tar.tmp"
  mv "$base_tar.tmp" "$base_tar"
fi
t_deboot=$(($(date +%s) - t))
podman import --change 'CMD ["/bin/bash"]' "$base_tar" localhost/debian:12 >"$tmp/import.log" 2>&1 \
  || { cat "$tmp/import.log" >&2; die "podman import failed"; }
rm -f "$tmp/base.tar"   # (kept when it is the cache's)
podman tag localhost/debian:12 localhost/debian:12-slim
say "base image debian:12 from $base_from (${t_deboot} s, $(podman image inspect -f '{{.Size}}' localhost/debian:12 | awk '{ printf "%d MB", $1 / 1e6 }'))"

# -- 4. the build, and what the runtime image carries -------------------------
build() {
  bg_wait podman build --pull=never --network host --build-arg JOBS=2 --jobs 2 \
    --ignorefile docker/Dockerfile.dockerignore -f docker/Dockerfile "$@" . \
    >>"$tmp/build.log" 2>&1 || { tail -n 30 "$tmp/build.log" >&2; die "podman build $* failed"; }
}
t=$(date +%s)
# both stages at once (--jobs 2: the runtime stage's packages install while
# the build stage compiles), then the build stage tagged from the cache
build -t localhost/tokbench:test
t_build=$(($(date +%s) - t))
build --target build -t localhost/tokbench-build:test
size() { podman image inspect -f '{{.Size}}' "$1" | awk '{ printf "%d MB", $1 / 1e6 }'; }
say "image built in ${t_build} s: build stage $(size localhost/tokbench-build:test), runtime $(size localhost/tokbench:test)"
img=localhost/tokbench:test
podman rmi localhost/tokbench-build:test >/dev/null
run_in() { podman run --rm --network host --entrypoint /bin/sh "$img" -c "$1"; }
libs=$(run_in 'for b in /usr/local/bin/tokbench*; do echo "== $b"; ldd "$b"; done')
if grep -q 'not found' <<<"$libs"; then printf '%s\n' "$libs" >&2; die "the runtime image lacks a library"; fi
[ "$(grep -c '^== ' <<<"$libs")" -eq 4 ] || die "the runtime image does not hold the four binaries"
uid=$(run_in 'id -u')
[ "$uid" != 0 ] || die "the image runs as root"
say "runtime image: 4 binaries, every library found (ldd), user uid $uid"

# -- 5. one stack ---------------------------------------------------------------
read -r pg_port api_port sim1 sim2 sim3 < <(python3 -c '
import socket
ss = [socket.socket() for _ in range(5)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')
scripts/tb-pg init "$pg_dir"
scripts/tb-pg start "$pg_dir" "$pg_port" 127.0.0.1
db_url=$(scripts/tb-pg url "$pg_dir" "$pg_port" 127.0.0.1)
psql_q() { psql "$db_url" -Atqc "$1"; }
master=$(openssl rand -hex 32)
common=(--network host -e "TOKBENCH_DATABASE_URL=$db_url" -e "TOKBENCH_MASTER_KEY=$master"
        -e TOKBENCH_EGRESS_ALLOW=loopback)   # the simulators listen on 127.0.0.1
podman run -d --name tb-api "${common[@]}" \
  -e TOKBENCH_LISTEN_HOST=127.0.0.1 -e "TOKBENCH_LISTEN_PORT=$api_port" \
  --health-cmd "/usr/local/bin/healthcheck.sh $api_port /readyz" --health-interval disable \
  "$img" tokbench-api >/dev/null
sim_run() {  # NAME PORT
  podman run -d --name "$1" --network host \
    --health-cmd "/usr/local/bin/healthcheck.sh $2 /health" --health-interval disable \
    "$img" tokbench-sim --host 127.0.0.1 --port "$2" \
    --profiles-dir /usr/share/tokbench/profiles --profile tiny --flavour vllm >/dev/null
}
sim_run tb-sim1 "$sim1"
healthy() {  # CONTAINER: waits up to 60 s for docker/healthcheck.sh in it to pass
  local i
  for i in $(seq 1 120); do
    podman healthcheck run "$1" >/dev/null 2>&1 && return 0
    [ "$(podman inspect -f '{{.State.Running}}' "$1")" = true ] \
      || { podman logs "$1" >&2; die "$1 exited"; }
    sleep 0.5
  done
  podman logs "$1" >&2
  die "$1 never became healthy"
}
healthy tb-api
healthy tb-sim1
say "api and sim healthy (docker/healthcheck.sh in each container)"
work="$tmp/user"
mkdir -p "$work/var"
(umask 077; podman exec tb-api tokbench keys create --admin --project demo >"$work/var/admin.key")
key=$(cat "$work/var/admin.key")
[[ $key == tkb_* ]] || die "tokbench keys create in the api container printed no key"
B="http://127.0.0.1:$api_port"
H="Authorization: Bearer $key"
register() {  # NAME PORT
  curl -fsS -H "$H" -H 'Content-Type: application/json' \
    -d '{"name": "'"$1"'", "base_url": "http://127.0.0.1:'"$2"'", "hardware": {"gpu": "simulated (tiny)", "count": 1}}' \
    "$B/v1/endpoints" | jq -er .id
}
register demo-sim "$sim1" >/dev/null
podman run -d --name tb-worker1 --hostname tb-worker1 "${common[@]}" "$img" tokbench-worker >/dev/null

# The README's quick start, verbatim but for the api's port.
script=$(awk '/<!-- quickstart -->/ { on = 1; next } /<!-- \/quickstart -->/ { on = 0 }
              on && !/^```/' README.md)
[ -n "$script" ] || die "README has no quick-start block"
script=${script//127.0.0.1:8080/127.0.0.1:$api_port}
t=$(date +%s)
( cd "$work" && timeout 300 bash -euo pipefail -c "$script" ) >"$tmp/quickstart.out" 2>&1 \
  || { cat "$tmp/quickstart.out" >&2; podman logs tb-worker1 2>&1 | tail -n 20 >&2; die "the quick start failed"; }
grep -q '"state":"succeeded"' "$tmp/quickstart.out" \
  || { cat "$tmp/quickstart.out" >&2; die "the quick-start job did not succeed"; }
grep -q '^## Speed test matrix' "$tmp/quickstart.out" \
  || { cat "$tmp/quickstart.out" >&2; die "no Markdown report"; }
job=$(curl -fsS -H "$H" "$B/v1/jobs?label=try:quickstart" | jq -er '.jobs[0].id')
say "quick-start job $job succeeded through containers in $(($(date +%s) - t)) s, Markdown report:"
awk '/^## Speed test matrix/ { on = 1 } on && n++ < 12 { print "    " $0 }' "$tmp/quickstart.out"

# -- 6. compose, and three workers on one queue ---------------------------------
# podman-compose 1.0 (Debian 12) has no `config`; --dry-run prints the podman
# commands `up` would run, with the file read and its variables substituted.
TOKBENCH_MASTER_KEY=$master podman-compose --dry-run -f docker/compose.yaml up -d --scale worker=3 \
  >"$tmp/compose.out" 2>&1 || { cat "$tmp/compose.out" >&2; die "podman-compose refused docker/compose.yaml"; }
for svc in postgres api worker sim; do
  grep -q "^podman run --name=docker_${svc}_1 " "$tmp/compose.out" \
    || { cat "$tmp/compose.out" >&2; die "podman-compose would not start $svc"; }
done
if grep '^podman run ' "$tmp/compose.out" | grep -q '\${'; then
  grep '^podman run ' "$tmp/compose.out" >&2; die "podman-compose left a \${...} unsubstituted"
fi
n_workers=$(grep -c '^podman run --name=docker_worker_' "$tmp/compose.out" || true)
say "podman-compose reads docker/compose.yaml (postgres, api, worker, sim; every variable substituted);" \
    "up --scale worker=3 would start $n_workers worker(s)$([ "$n_workers" = 3 ] || echo ": this podman-compose ignores --scale")"
t=$(date +%s)
sim_run tb-sim2 "$sim2"
sim_run tb-sim3 "$sim3"
podman run -d --name tb-worker2 --hostname tb-worker2 "${common[@]}" "$img" tokbench-worker >/dev/null
podman run -d --name tb-worker3 --hostname tb-worker3 "${common[@]}" "$img" tokbench-worker >/dev/null
healthy tb-sim2
healthy tb-sim3
eps=("$(curl -fsS -H "$H" "$B/v1/endpoints" | jq -er '.endpoints[] | select(.name == "demo-sim") | .id')"
     "$(register sim-2 "$sim2")" "$(register sim-3 "$sim3")")
jobs=()
for ep in "${eps[@]}"; do
  jobs+=("$(curl -fsS -H "$H" -H 'Content-Type: application/json' \
    -d '{"endpoint_id": "'"$ep"'", "contexts": ["1k", "4k"], "concurrency": [1, 2], "duration_s": 2,
         "max_output": 256, "labels": {"try": "scale"}}' "$B/v1/jobs" | jq -er .id)")
done
together=""
for _ in $(seq 1 240); do
  together=$(psql_q "SELECT count(*) || ' ' || count(DISTINCT lease_owner) FROM jobs
                     WHERE state = 'running' AND lease_owner IS NOT NULL")
  [ "$together" = "3 3" ] && break
  sleep 0.25
done
[ "$together" = "3 3" ] || die "three jobs never ran at once on three workers (running, owners: $together)"
owners=$(psql_q "SELECT string_agg(DISTINCT lease_owner, ', ') FROM jobs WHERE state = 'running'")
for j in "${jobs[@]}"; do
  st=""
  for _ in $(seq 1 240); do
    st=$(curl -fsS -H "$H" "$B/v1/jobs/$j" | jq -r .state)
    case "$st" in succeeded|failed|cancelled) break ;; esac
    sleep 0.5
  done
  [ "$st" = succeeded ] || die "scaled job $j ended $st"
done
say "--scale worker=3 done by hand: 3 workers on one queue ran 3 jobs against 3 endpoints at once ($owners), all succeeded in $(($(date +%s) - t)) s"

# -- 7. one cell driven by two worker containers (issue 24) ----------------------
# A job with shards: 2 on the three workers: one holds the job and merges,
# two drive the cell's shards.  Its percentiles must equal a recomputation
# from the samples the shards stored (tests/integration/test_shards.py's
# decoder and type-7 quantile), its tokens/s the simulator's within 2%.
t=$(date +%s)
sjob=$(curl -fsS -H "$H" -H 'Content-Type: application/json' \
  -d '{"endpoint_id": "'"${eps[1]}"'", "contexts": ["1k"], "concurrency": [8],
       "prefill_contexts": [], "duration_s": 3, "max_output": 1024, "shards": 2,
       "labels": {"try": "shards"}}' "$B/v1/jobs" | jq -er .id)
st=""
for _ in $(seq 1 240); do
  st=$(curl -fsS -H "$H" "$B/v1/jobs/$sjob" | jq -r .state)
  case "$st" in succeeded|failed|cancelled) break ;; esac
  sleep 0.5
done
[ "$st" = succeeded ] || die "sharded job $sjob ended $st"
# by file, not on python3's command line: a cell with its samples, and the
# shards' blobs, can pass ARG_MAX
psql_q "SELECT cell FROM job_cells WHERE job_id = '$sjob' AND phase = 'decode'" >"$tmp/scell.json"
psql_q "SELECT string_agg(encode(s.samples, 'hex'), ' ' ORDER BY s.shard) FROM cell_shards s
        JOIN cell_barriers b USING (job_id, cell_key, attempt)
        WHERE s.job_id = '$sjob' AND b.state = 'merged'" >"$tmp/sblobs.txt"
struth=$(curl -fsS "http://127.0.0.1:$sim2/sim/expected?context=1024&concurrency=8" | jq -er .total_tok_s)
swhy=$(python3 - "$tmp/scell.json" "$tmp/sblobs.txt" "$struth" <<'PY'
import json, sys
sys.path.insert(0, "tests/integration")
from test_shards import decode_tbs1, quantile
cell, blobs = json.load(open(sys.argv[1])), open(sys.argv[2]).read().split()
truth = float(sys.argv[3])
shards = [decode_tbs1(bytes.fromhex(b)) for b in blobs]
ttft = [v * 1000 for s in shards for v in s["series"][0]]
bad = []
if cell.get("status") != "valid" or cell.get("shards", {}).get("count") != 2 or len(shards) != 2:
    bad.append("cell %s, shards %s" % (cell.get("status"), cell.get("shards", {}).get("count")))
for p, q in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
    if ttft and cell["ttft_ms"][p] != quantile(ttft, q) / 1e6:
        bad.append("ttft %s differs from the stored samples'" % p)
if abs(cell.get("total_tps", 0) - truth) / truth >= 0.02:
    bad.append("tokens/s %s vs the simulator's %s" % (cell.get("total_tps"), truth))
print("; ".join(bad) if bad else "ok %.0f tok/s (model %.0f), shards on %s" % (
    cell["total_tps"], truth, ", ".join(w["worker"] for w in cell["shards"]["where"])))
PY
)
case "$swhy" in ok*) ;; *) die "sharded job $sjob: $swhy" ;; esac
say "shards: one cell driven by two worker containers, merged exactly: $swhy, in $(($(date +%s) - t)) s"

say "total $(($(date +%s) - t_start)) s"
verdict="job $job succeeded: the README quick start, through containers built from docker/Dockerfile"
