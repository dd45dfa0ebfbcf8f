#!/bin/sh
# Runs every test (make test, make check, make valgrind): scripts/run_tests.py
# says how (two phases: plain tests TB_JOBS at a time, timing tests alone)
# and which settings it reads (TB_TESTS, TB_SUITE, TB_JOBS, TB_VALGRIND).
set -u
cd "$(dirname "$0")/.."
export CMOCKA_MESSAGE_OUTPUT=TAP
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
py=/usr/bin/python3
[ -x "$py" ] || py=python3
exec "$py" scripts/run_tests.py
