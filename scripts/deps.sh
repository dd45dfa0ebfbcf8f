#!/bin/sh
# Installs the Debian packages tokbench needs, only those that are missing.
# Safe to run any number of times; does nothing when everything is there.
# Extra groups: "deps.sh fuzz" (clang), "deps.sh bench" (wrk), "deps.sh browser"
# (chromium).  Without arguments: build, run and test dependencies.
set -eu
base="build-essential pkg-config libmicrohttpd-dev libcurl4-openssl-dev
      libjansson-dev libpq-dev libssl-dev libcmocka-dev postgresql python3
      curl jq openssl valgrind clang libclang-rt-14-dev wrk chromium python3-yaml"
pkgs="$base"
for group in "$@"; do
  case "$group" in
    browser) pkgs="$pkgs chromium" ;;
    *) ;;
  esac
done
missing=""
for p in $pkgs; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  case "$st" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
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
$SUDO apt-get update -qq
# A fresh postgresql install must not start the system cluster for us: tokbench
# runs its own private cluster.  policy-rc.d keeps apt from starting services.
$SUDO apt-get install -y -qq --no-install-recommends $missing
