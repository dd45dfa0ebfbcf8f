#!/bin/sh
# checksrc: calls to banned C functions (as curl's checksrc bans them) in
# every .c and .h under lib/ service/ worker/ sim/ cli/ tests/ bench/, or in
# the files given as arguments.  A call is the name as a word followed by
# "(" (fgets, snprintf and strtok_r are other words; a member such as
# s->rand( is not a call to libc); comments, string and character literals
# are skipped.  Prints file:line:column: name(: why, and what to use instead;
# exits 1 on any.  No exception list: a banned call is replaced, not excused.
set -eu
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  set -- $(find lib service worker sim cli tests bench -type f \( -name '*.c' -o -name '*.h' \) | sort)
fi
exec python3 - "$@" <<'PY'
import re
import sys

# name -> why it is banned, what to use instead
BANNED = {}
def ban(names, why):
    for n in names.split():
        BANNED[n] = why

ban("sprintf vsprintf", "no bound on the output: snprintf, vsnprintf, tb_xasprintf")
ban("strcpy stpcpy strcat", "no bound on the copy: memcpy with the length, snprintf")
ban("strncpy", "may leave the copy without its NUL and pads it: memcpy with the length, snprintf")
ban("strncat", "its bound is the room left, easy to get wrong: snprintf at the end")
ban("gets", "no bound at all: fgets")
ban("getwd", "no bound on the path: getcwd")
ban("atoi atol atoll atof",
    "no error, undefined on overflow: tb_parse_i64 (tb_util), strtol or strtod with checks")
ban("sscanf scanf fscanf vsscanf vscanf vfscanf",
    "numbers out of range are undefined: strtol/strtod with checks, a tokenizer")
ban("strtok", "hidden state shared by every thread: strtok_r")
ban("rand srand rand_r random srandom drand48 erand48 lrand48 nrand48 mrand48 jrand48 srand48",
    "weak and shared (or hidden) state: tb_arrival's xoshiro256** (seeded), tb_crypto_random for keys")
ban("tmpnam tempnam mktemp", "the name can be taken before it is opened: mkstemp, mkdtemp")
ban("asctime ctime gmtime localtime",
    "a static result shared by every thread: gmtime_r, localtime_r, strftime")
ban("asctime_r ctime_r", "no bound on the buffer: strftime")
ban("gethostbyname gethostbyaddr", "static results, IPv4 only: getaddrinfo, getnameinfo")
ban("inet_addr", "255.255.255.255 is also its error: inet_pton")
ban("inet_ntoa", "a static result: inet_ntop")
ban("getpwnam getpwuid getgrnam getgrgid", "static results: the _r variants")
ban("alloca", "unbounded stack (as VLAs, -Wvla): tb_xmalloc")

CALL = re.compile(r"(?<![A-Za-z0-9_.>$])(" + "|".join(sorted(BANNED, key=len, reverse=True))
                  + r")\s*\(")


def code_only(text):
    """text with comments, string and character literals blanked (line
    breaks kept, so that line numbers hold)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("".join("\n" if ch == "\n" else " " for ch in text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + "".join("\n" if ch == "\n" else " " for ch in text[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


found = 0
for path in sys.argv[1:]:
    with open(path, encoding="utf-8", errors="replace") as f:
        text = code_only(f.read())
    for lineno, line in enumerate(text.split("\n"), 1):
        for m in CALL.finditer(line):
            name = m.group(1)
            print("%s:%d:%d: %s(: %s" % (path, lineno, m.start(1) + 1, name, BANNED[name]))
            found += 1
if found:
    print("checksrc: %d banned call(s)" % found)
    sys.exit(1)
print("checksrc: no banned call in %d files" % (len(sys.argv) - 1))
PY
