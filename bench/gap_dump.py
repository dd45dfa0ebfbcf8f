#!/usr/bin/env python3
"""Where a writer's gap error comes from, from a SIM_LOAD_DUMP file of
bench/sim_load.c (lines "stream stamp arrival", ns).

usage: SIM_LOAD_DUMP=/tmp/d.txt sim_load ...; bench/gap_dump.py /tmp/d.txt [STEP_MS]

It groups the stamps by step and prints: how late each step's first send
was against the schedule the steps keep (lateness), how long a step's sends
took (burst), the spacing of consecutive sends inside a step, and the
per-stream gap error p99 with the steps its largest errors fall in.  A late
step start points at the writer's wake-up; a long, variable burst at what
interrupts the sends (timer ticks, wake-ups of the reader, the host)."""
import collections
import sys


def q(v, p):
    return v[min(len(v) - 1, int(len(v) * p))]


def main():
    rows = [tuple(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
    step = int(float(sys.argv[2] if len(sys.argv) > 2 else 20) * 1e6)
    t0 = min(r[1] for r in rows)
    steps = collections.defaultdict(list)
    for s, st, _ in rows:
        steps[round((st - t0) / step)].append(st)
    ks = sorted(steps)
    first = [min(steps[k]) for k in ks]
    offs = [f - first[0] - (k - ks[0]) * step for f, k in zip(first, ks)]
    base = min(offs)
    late = sorted((o - base) / 1e3 for o in offs)
    burst = sorted((max(steps[k]) - min(steps[k])) / 1e3 for k in ks)
    inc = sorted(b - a for k in ks for a, b in zip(sorted(steps[k]), sorted(steps[k])[1:]))
    print("steps %d" % len(ks))
    print("step start lateness us p50 %.1f p99 %.1f max %.1f" % (q(late, .5), q(late, .99), late[-1]))
    print("burst us p50 %.0f p99 %.0f max %.0f" % (q(burst, .5), q(burst, .99), burst[-1]))
    print("send-to-send us p50 %.1f p99 %.1f p999 %.1f max %.1f" % (
        q(inc, .5) / 1e3, q(inc, .99) / 1e3, q(inc, .999) / 1e3, inc[-1] / 1e3))
    prev, errs = {}, []
    for s, st, _ in sorted(rows, key=lambda r: r[1]):
        if s in prev:
            errs.append((abs(st - prev[s] - step), round((st - t0) / step)))
        prev[s] = st
    errs.sort()
    big = collections.Counter(k for e, k in errs if e > 100000)
    print("gap error p99 us %.1f; gaps over 100 us: %d of %d, in %d steps" % (
        q(errs, .99)[0] / 1e3, sum(big.values()), len(errs), len(big)))


if __name__ == "__main__":
    main()
