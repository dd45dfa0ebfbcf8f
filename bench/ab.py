"""Side by side figures of two builds, for the bench scripts' A/B modes.

usage: python3 bench/ab.py TITLE FORMAT NAME_A "A1 A2 ..." [NAME_B "B1 B2 ..."]
Prints TITLE, then for each build its runs, median and range (numbers
printed with FORMAT, e.g. %.3f; words such as "fail" or "nan" are left
out), then, with B, the ratio of the medians A / B.  Exits 0 always; says
so when a side has no number.
"""
import statistics
import sys


def nums(s):
    out = []
    for x in s.split():
        try:
            v = float(x)
        except ValueError:
            continue
        if v == v:  # not nan
            out.append(v)
    return out


def main(argv):
    title, fmt = argv[1], argv[2]
    sides = [(argv[i], nums(argv[i + 1])) for i in range(3, len(argv) - 1, 2)]
    print(title)
    if not sides or any(not v for _, v in sides):
        print("  no result (a run failed)")
        return 0
    w = max(len(name) for name, _ in sides)
    for name, v in sides:
        print(("  %-*s: %s   median " + fmt + ", range " + fmt + "-" + fmt)
              % (w, name, " ".join(fmt % x for x in v), statistics.median(v), min(v), max(v)))
    if len(sides) == 2:
        (na, a), (nb, b) = sides
        print("  ratio %s/%s (medians) %.3f" % (na, nb, statistics.median(a) / statistics.median(b)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
