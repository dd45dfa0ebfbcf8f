#!/bin/sh
# The one list of the Debian packages tokbench needs, in groups, and their
# installer: installs only those that are missing, so it is safe to run any
# number of times and does nothing when everything is there.
#
#   deps.sh                 build + dev: everything a developer needs (make deps)
#   deps.sh GROUP...        only those groups
#   deps.sh --list GROUP... print the groups' packages, one a line; install nothing
#
# Groups:
#   build    what compiling the binaries needs (docker/Dockerfile's build stage)
#   runtime  the shared libraries the binaries link against, CA
#            certificates, and tzdata (the IANA zones' TZif files that
#            schedules name: lib/base/tb_tz reads them) (docker/Dockerfile's
#            runtime stage; a package per NEEDED library:
#            tests/integration/test_docker.py checks it)
#   dev      tests, tools and benchmarks: cmocka, a PostgreSQL server, python3,
#            curl, jq, valgrind, clang (fuzzing), clang-format (make
#            check-format), debootstrap (the sid root of make real-engine),
#            wrk, chromium, python3-yaml
#   real     what make real-engine needs on the host: debootstrap
#   docker   building and running the image without a registry (make
#            docker-test): podman, buildah, runc, debootstrap, podman-compose,
#            and the host PostgreSQL server the test's containers use
# ("fuzz", "bench" and "browser" are older names, all within dev.)
set -eu

group() {
  case "$1" in
    build)   echo "build-essential pkg-config libmicrohttpd-dev libcurl4-openssl-dev
                   libjansson-dev libpq-dev libssl-dev zlib1g-dev liburing-dev" ;;
    runtime) echo "libmicrohttpd12 libcurl4 libjansson4 libpq5 libssl3 zlib1g liburing2 ca-certificates
                   tzdata" ;;
    dev)     echo "tzdata libcmocka-dev postgresql python3 curl jq openssl valgrind clang clang-format
                   debootstrap
                   libclang-rt-14-dev wrk chromium python3-yaml" ;;
    docker)  echo "podman buildah runc debootstrap podman-compose postgresql curl jq
                   openssl ca-certificates" ;;
    real)    echo "debootstrap" ;;
    fuzz|bench|browser) group dev ;;
    *) echo "deps: unknown group $1 (build, runtime, dev, docker, real)" >&2; return 2 ;;
  esac
}

list=0
if [ "${1:-}" = "--list" ]; then list=1; shift; fi
[ $# -gt 0 ] || set -- build dev
pkgs=""
for g in "$@"; do
  words=$(group "$g") || exit 2
  pkgs="$pkgs $words"
done
if [ "$list" = 1 ]; then
  for p in $pkgs; do echo "$p"; done | awk '!seen[$0]++'
  exit 0
fi

missing=""
for p in $pkgs; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$st" in
    *"install ok installed"*) ;;
    *) case " $missing " in *" $p "*) ;; *) missing="$missing $p" ;; esac ;;
  esac
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "deps: missing packages:$missing (run as root or install them)" >&2
    exit 1
  fi
else
  SUDO=""
fi
export DEBIAN_FRONTEND=noninteractive
# Another apt may hold the lock (a second make, unattended upgrades): wait.
lock="-o DPkg::Lock::Timeout=600"
$SUDO apt-get $lock update -qq
$SUDO apt-get $lock install -y -qq --no-install-recommends $missing
