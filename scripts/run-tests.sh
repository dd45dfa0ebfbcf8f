#!/bin/sh
# Runs every test: the cmocka unit tests (TB_UNIT_DIR) and the integration
# modules (tests/integration/test_*.py) against the binaries in TB_BIN_DIR.
# Prints each result as TAP, then "N passed, N failed" (", N skipped" when a
# test could not run on this machine: TAP "# SKIP"); exits 1 on a failure.
# TB_TESTS=pattern limits the run to files whose name contains the pattern.
set -u
cd "$(dirname "$0")/.."
unit_dir=${TB_UNIT_DIR:-build-san/tests}
pattern=${TB_TESTS:-}
log=$(mktemp)
trap 'rm -f "$log" "$log.all"' EXIT
export CMOCKA_MESSAGE_OUTPUT=TAP
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
py=/usr/bin/python3
[ -x "$py" ] || py=python3

status=0
# run_one NAME CMD...: runs one test binary or module, prints its TAP, and
# records a crash that printed no "not ok" as a failure of its own.
run_one() {
  name=$1; shift
  "$@" >"$log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && ! grep -q '^not ok' "$log"; then
    echo "not ok - $name exited with status $rc" >>"$log"
  fi
  cat "$log"
  cat "$log" >>"$log.all"
  [ $rc -ne 0 ] && status=1
  return 0
}
vg=""
[ "${TB_VALGRIND:-0}" = 1 ] && vg="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite"
for t in "$unit_dir"/test_*; do
  [ -x "$t" ] || continue
  case "$t" in *"$pattern"*) ;; *) continue ;; esac
  echo "# unit: $(basename "$t")"
  run_one "$(basename "$t")" $vg "$t"
done
for m in tests/integration/test_*.py; do
  [ -f "$m" ] || continue
  case "$m" in *"$pattern"*) ;; *) continue ;; esac
  echo "# integration: $(basename "$m")"
  run_one "$(basename "$m")" "$py" tests/integration/runner.py "$m"
done
touch "$log.all"
skipped=$(grep -c '^ok .* # SKIP' "$log.all")
passed=$(($(grep -c '^ok ' "$log.all") - skipped))
failed=$(grep -c '^not ok' "$log.all")
rm -f "$log.all"
if [ "$skipped" -gt 0 ]; then
  echo "$passed passed, $failed failed, $skipped skipped"
else
  echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ] && [ "$passed" -gt 0 ] || exit 1
