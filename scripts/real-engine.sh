#!/bin/bash
# make real-engine: a real inference engine on this machine, on CPU: Debian's
# llama.cpp (llama-server) serving a tiny model made here.
#
#   scripts/real-engine.sh [--port P] [--slots N] [--ctx N] [--threads T] [-- ARGS]
#                               prepare, then run llama-server on 127.0.0.1:P
#                               in the foreground (ARGS go to llama-server)
#   scripts/real-engine.sh --prepare   build or reuse the root and the model;
#                               print the root's path
#   scripts/real-engine.sh --probe     exit 0 when this machine can run it;
#                               else print the reason and exit 1 (a SKIP)
#   scripts/real-engine.sh --versions  the root's package versions
#
# Debian 12 has no llama.cpp; sid's llama.cpp-tools (1:0.7.0+dfsg-2 when this
# was written) needs a newer libc.  So it runs from a sid root:
# 1. `debootstrap --variant=minbase sid` from the Debian mirror apt already
#    uses (scripts/mirror.sh), into TOKBENCH_REAL_ROOT (default
#    /var/cache/tokbench/llamacpp-sid), with `Acquire::Check-Valid-Until
#    "false"` (sid's Release may be past its Valid-Until), then apt-get
#    install llama.cpp-tools python3-gguf python3-numpy.  TB_LLAMACPP_VERSION
#    asks for one llama.cpp-tools version (default: the mirror's).
# 2. scripts/make-model.py, run inside the root, writes /srv/tokbench/
#    tiny.gguf: seeded, the same on every run (docs/real-engine.md).
# 3. llama-server runs in the root under chroot, in a mount namespace of its
#    own (its /proc goes when it ends), as nobody, with --metrics and
#    --slots.
# A root is reused while its stamp says it holds the packages asked for and
# the model of this make-model.py; it is rebuilt otherwise.  One build at a
# time (flock).  A first build takes about a minute, a reused root none.
set -euo pipefail
cd "$(dirname "$0")/.."
top=$(pwd)
root=${TOKBENCH_REAL_ROOT:-/var/cache/tokbench/llamacpp-sid}
pkgs="llama.cpp-tools python3-gguf python3-numpy"
model=/srv/tokbench/tiny.gguf

say() { printf 'real-engine: %s\n' "$*" >&2; }
die() { printf 'real-engine: FAIL: %s\n' "$*" >&2; exit 1; }

# shellcheck source=mirror.sh
. scripts/mirror.sh

probe() {
  [ "$(uname -s)" = Linux ] || { echo "not Linux"; return 1; }
  [ "$(id -u)" -eq 0 ] || { echo "not root (debootstrap and chroot need root)"; return 1; }
  if [ ! -x "$root/usr/bin/llama-server" ]; then
    command -v debootstrap >/dev/null 2>&1 || command -v apt-get >/dev/null 2>&1 \
      || { echo "no debootstrap, and no apt-get to install it"; return 1; }
    find_mirror >/dev/null || { echo "no Debian mirror in the apt sources"; return 1; }
  fi
  unshare --mount true 2>/dev/null \
    || { echo "the kernel or sandbox refuses a mount namespace (unshare)"; return 1; }
  grep -qw avx2 /proc/cpuinfo 2>/dev/null || grep -qw sse4_2 /proc/cpuinfo 2>/dev/null \
    || { echo "a CPU without SSE4.2: llama.cpp's CPU backends need it"; return 1; }
  return 0
}

# The stamp a root must carry to be reused: what was asked for.
wanted_stamp() {
  printf 'packages %s\nllama.cpp-tools %s\nmodel %s\n' "$pkgs" "${TB_LLAMACPP_VERSION:-any}" \
    "$(sha256sum scripts/make-model.py | cut -d' ' -f1)"
}

in_root() { chroot "$root" "$@"; }

build_root() {
  local mirror tmp
  command -v debootstrap >/dev/null 2>&1 || scripts/deps.sh real >&2
  read -r _ mirror < <(find_mirror) || die "no Debian mirror in the apt sources"
  tmp="$root.new"
  rm -rf "$tmp"
  say "debootstrap sid into $tmp"
  debootstrap --variant=minbase sid "$tmp" "$mirror" >"$tmp.log" 2>&1 \
    || { tail -5 "$tmp.log" >&2; die "debootstrap failed (log: $tmp.log)"; }
  echo 'Acquire::Check-Valid-Until "false";' >"$tmp/etc/apt/apt.conf.d/99tokbench"
  local want=llama.cpp-tools
  [ -n "${TB_LLAMACPP_VERSION:-}" ] && want="llama.cpp-tools=$TB_LLAMACPP_VERSION"
  say "apt-get install $want python3-gguf python3-numpy"
  chroot "$tmp" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -q --no-install-recommends $want python3-gguf python3-numpy && \
      apt-get clean" >>"$tmp.log" 2>&1 \
    || { tail -5 "$tmp.log" >&2; die "apt-get install in the sid root failed (log: $tmp.log)"; }
  rm -rf "$root" "$tmp.log"
  mv "$tmp" "$root"
}

make_model() {
  mkdir -p "$root/srv/tokbench"
  cp scripts/make-model.py "$root/srv/tokbench/make-model.py"
  in_root python3 /srv/tokbench/make-model.py "$model" >&2
  chmod 0644 "$root$model"
}

prepare() {
  mkdir -p "$(dirname "$root")"
  exec 9>"$root.lock"
  flock 9
  local want t
  want=$(wanted_stamp)
  if [ -f "$root/.tokbench-stamp" ] && [ "$(cat "$root/.tokbench-stamp")" = "$want" ] \
     && [ -f "$root$model" ]; then
    return 0
  fi
  t=$(date +%s)
  if [ ! -x "$root/usr/bin/llama-server" ] || ! grep -qF "$(sed -n 2p <<<"$want")" \
       "$root/.tokbench-stamp" 2>/dev/null; then
    build_root
  fi
  make_model
  printf '%s\n' "$want" >"$root/.tokbench-stamp"
  say "root ready in $(($(date +%s) - t)) s: $(versions | tr '\n' ' ')"
}

# prepare_once: prepare under the lock, then let go of it, so that a server
# this script execs does not hold it for its whole life.
prepare_once() {
  prepare
  exec 9>&-
}

versions() {
  in_root dpkg-query -W -f '${Package} ${Version}\n' $pkgs
}

serve() {
  local port=8090 slots=4 ctx=16384 threads=1
  while [ $# -gt 0 ]; do
    case "$1" in
    --port) port=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    --ctx) ctx=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --) shift; break ;;
    *) die "unknown option $1 (see the header of $0)" ;;
    esac
  done
  say "llama-server on http://127.0.0.1:$port ($slots slots, context $ctx, $threads thread(s))"
  exec unshare --mount --propagation private sh -c '
    root=$1; shift
    mount -t proc proc "$root/proc" || exit 1
    exec chroot --userspec=65534:65534 "$root" "$@"' sh "$root" \
    llama-server -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -c "$ctx" \
      -np "$slots" --metrics --slots "$@"
}

case "${1:-}" in
--probe) probe; exit ;;
esac
why=$(probe) || { echo "SKIP: this machine cannot run llama.cpp: $why"; exit 1; }
case "${1:-}" in
--prepare) prepare_once; echo "$root" ;;
--versions) versions ;;
*) prepare_once; serve "$@" ;;
esac
