"""Runs the test functions of one integration module and prints TAP.

usage: runner.py tests/integration/test_x.py [name-filter]

Each test_<name>(ctx) function of the module runs in order with one shared
Context; a failure is reported with its traceback and the next test runs.
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


def main():
    path = sys.argv[1]
    filt = sys.argv[2] if len(sys.argv) > 2 else None
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    tests = [(n, f) for n, f in vars(mod).items() if n.startswith("test_") and callable(f)]
    tests.sort(key=lambda t: t[1].__code__.co_firstlineno)
    if filt:
        tests = [t for t in tests if filt in t[0]]
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
