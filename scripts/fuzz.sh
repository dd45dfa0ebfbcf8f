#!/bin/sh
# make fuzz: builds every tests/fuzz/fuzz_*.c with clang's libFuzzer (plus
# ASan and UBSan) and runs each for the given number of seconds (default 20),
# with a corpus under build-fuzz/corpus/<target>.  Exits 1 when a target
# finds a crash (the reproducer is left in build-fuzz/).
set -eu
cd "$(dirname "$0")/.."
secs=${1:-20}
make FUZZ=1 CC=clang fuzz-targets >/dev/null
status=0
for t in build-fuzz/fuzz/fuzz_*; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  corpus="build-fuzz/corpus/$name"
  mkdir -p "$corpus"
  seeds="tests/fuzz/corpus/$name"
  [ -d "$seeds" ] || seeds=""
  printf '%-24s ' "$name"
  if "$t" -max_total_time="$secs" -max_len=65536 -artifact_prefix="build-fuzz/$name-" \
      "$corpus" $seeds >"build-fuzz/$name.log" 2>&1; then
    runs=$(grep -Eo 'Done [0-9]+ runs' "build-fuzz/$name.log" | tail -n 1)
    echo "ok (${runs:-?})"
  else
    echo "CRASH (see build-fuzz/$name.log)"
    status=1
  fi
done
exit $status
