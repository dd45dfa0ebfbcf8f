#!/usr/bin/env python3
"""history_plans.py OUT < postgres.log: the auto_explain plans of a log
(bench/bench_history.sh), each statement once, written whole to OUT and
summed up on stdout: the rows it returned, the rows its scans read (with
those their filters removed), its buffers and time.  A statement whose
scans read more than ten times what it returns (and more than 1,000 rows)
is marked "reads more than it returns"."""
import re
import sys

START = re.compile(r"LOG:\s+duration: ([0-9.]+) ms\s+plan:")
NODE = re.compile(r"^\s*(?:->\s*)?(.+?)(?: using | on |\s+\(cost=|\s+\(actual ).*"
                  r"\(actual time=[0-9.]+\.\.[0-9.]+ rows=(\d+) loops=(\d+)\)")
REMOVED = re.compile(r"Rows Removed by (?:Filter|Index Recheck|Join Filter): (\d+)")
BUFFERS = re.compile(r"Buffers: shared(?: hit=(\d+))?(?: read=(\d+))?")
SCANS = ("Seq Scan", "Index Scan", "Index Only Scan", "Bitmap Heap Scan", "Parallel Seq Scan")


def plans(lines):
    cur = None
    for line in lines:
        m = START.search(line)
        if m:
            if cur:
                yield cur
            cur = {"ms": float(m.group(1)), "lines": []}
            continue
        if cur is not None:
            if line.startswith("\t") or line.startswith("        "):
                cur["lines"].append(line.rstrip("\n"))
            else:
                yield cur
                cur = None
    if cur:
        yield cur


def summary(p):
    text = ""
    returned = None
    read = 0
    loops_of = 1
    hit = rd = None
    for line in p["lines"]:
        s = line.strip()
        if s.startswith("Query Text:"):
            text = s[len("Query Text:"):].strip()
            continue
        m = NODE.match(line)
        if m:
            rows, loops = int(m.group(2)), int(m.group(3))
            if returned is None:
                returned = rows * loops
            loops_of = loops
            if m.group(1).strip() in SCANS:
                read += rows * loops
            continue
        m = REMOVED.search(s)
        if m:
            read += int(m.group(1)) * loops_of
            continue
        m = BUFFERS.search(s)
        if m and hit is None:
            hit, rd = int(m.group(1) or 0), int(m.group(2) or 0)
    return text, returned or 0, read, hit or 0, rd or 0


def main():
    out = open(sys.argv[1], "w")
    seen = set()
    for p in plans(sys.stdin):
        text, returned, read, hit, rd = summary(p)
        # one plan per statement and shape (a list with and without filters)
        shape = " / ".join(NODE.match(ln).group(1).strip() for ln in p["lines"] if NODE.match(ln))
        key = re.sub(r"\s+", " ", text)[:400] + " | " + shape
        if key in seen:
            continue
        seen.add(key)
        out.write("-- %.3f ms\n%s\n\n" % (p["ms"], "\n".join(p["lines"])))
        flag = read > 1000 and read > 10 * max(returned, 1)
        print("plan %7.2f ms  returned %6d  read %8d  buffers hit %6d read %5d  %s%s" % (
            p["ms"], returned, read, hit, rd, re.sub(r"\s+", " ", text)[:90],
            "   <- reads more than it returns" if flag else ""))
    out.close()
    print("plans written to %s (%d statements)" % (sys.argv[1], len(seen)))


if __name__ == "__main__":
    main()
