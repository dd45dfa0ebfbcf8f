"""Runs the test functions of one integration module and prints TAP.

usage: runner.py tests/integration/test_x.py [name-filter] [--only plain|timing]

Each test_<name>(ctx) function of the module runs in order with one shared
Context; a failure is reported with its traceback and the next test runs.
--only timing runs just the tests decorated @timing.timing_test, --only plain
just the others (scripts/run_tests.py runs the plain ones of two modules at
once and the timing ones alone); collect(path) lists both kinds.
Everything the Context started is torn down at the end, also after a failure.
Exit status: 0 when every test passed.
"""
import importlib.util
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402


def is_timing(fn):
    """A test decorated @timing.timing_test."""
    return bool(getattr(fn, "timing", False))


def collect(path):
    """The module's name and its tests, [(name, fn)], in the order written."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    found = [(n, f) for n, f in vars(mod).items() if n.startswith("test_") and callable(f)]
    found.sort(key=lambda t: getattr(t[1], "__wrapped__", t[1]).__code__.co_firstlineno)
    return name, found


def main():
    args = sys.argv[1:]
    only = None
    if "--only" in args:
        i = args.index("--only")
        only = args[i + 1]
        del args[i:i + 2]
        if only not in ("plain", "timing"):
            sys.exit("runner.py: --only takes plain or timing")
    path = args[0]
    filt = args[1] if len(args) > 1 else None
    name, tests_ = collect(path)
    if filt:
        tests_ = [t for t in tests_ if filt in t[0]]
    if only:
        tests_ = [t for t in tests_ if is_timing(t[1]) == (only == "timing")]
    tests = tests_
    print("1..%d" % len(tests), flush=True)
    ctx = harness.Context(name)
    failed = 0
    keep = False
    try:
        for i, (tname, fn) in enumerate(tests, 1):
            t0 = time.monotonic()
            try:
                fn(ctx)
                print("ok %d - %s.%s (%.1fs)" % (i, name, tname, time.monotonic() - t0), flush=True)
            except harness.Skip as e:
                print("ok %d - %s.%s # SKIP %s" % (i, name, tname, e), flush=True)
            except Exception:  # noqa: BLE001 - reported as a failed test
                failed += 1
                keep = os.environ.get("TB_KEEP_TMP") == "1"
                print("not ok %d - %s.%s" % (i, name, tname), flush=True)
                for line in traceback.format_exc().splitlines():
                    print("# " + line)
    finally:
        ctx.close(keep=keep)
        if keep:
            print("# kept %s" % ctx.tmp)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
