"""scripts/checksrc.sh (make check-src): banned calls are found with their
file, line and column wherever C code calls them, and not in comments,
strings, character literals, longer names or members; the tree itself has
none."""
import os
import subprocess

import harness

SCRIPT = os.path.join(harness.ROOT, "scripts", "checksrc.sh")

SAMPLE = r'''/* sprintf(buf, "x") in a comment,
 * strcpy(a, b) over two lines */
#include <stdio.h>
// atoi("1") in a line comment
static const char *s = "gets(buf); rand()";
static const char c = '(';
static char q = '"'; static int t(void) { return rand(); }
int
f(char *buf, struct ops *o, const char *x)
{
  snprintf(buf, 8, "%s", "strcat(");
  char *save; strtok_r(buf, ",", &save);
  fgets(buf, 8, stdin);
  o->atoi(x); o.rand ();
  tb_sprintf(buf); my_gmtime(x);
  sprintf(buf, "%d", atoi(x));
  strncpy (buf, x, 3);
  return (int)strtok(buf, ",") + localtime(NULL) + gmtime_r(NULL, NULL);
}
'''


def run(args):
    return subprocess.run(["sh", SCRIPT] + args, capture_output=True, text=True, timeout=60)


def test_finds_calls_and_nothing_else(ctx):
    path = os.path.join(ctx.tmp, "sample.c")
    with open(path, "w") as f:
        f.write(SAMPLE)
    r = run([path])
    assert r.returncode == 1, r.stdout + r.stderr
    hits = [l.split(": ")[0].replace(path + ":", "") + " " + l.split(": ")[1]
            for l in r.stdout.splitlines() if l.startswith(path)]
    assert hits == ["7:50 rand(", "16:3 sprintf(", "16:22 atoi(", "17:3 strncpy(",
                    "18:15 strtok(", "18:34 localtime("], r.stdout
    assert "checksrc: 6 banned call(s)" in r.stdout, r.stdout
    assert "snprintf" in r.stdout and "strtok_r" in r.stdout  # what to use instead


def test_clean_file_and_the_tree(ctx):
    path = os.path.join(ctx.tmp, "clean.c")
    with open(path, "w") as f:
        f.write('int\ng(char *b)\n{\n  return snprintf(b, 4, "%s", "sprintf(");\n}\n')
    r = run([path])
    assert r.returncode == 0 and "no banned call in 1 files" in r.stdout, r.stdout
    r = run([])
    assert r.returncode == 0, r.stdout
