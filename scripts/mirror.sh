# mirror.sh: sourced by scripts/docker-test.sh and scripts/real-engine.sh
# (bash).  The Debian mirror this machine's apt already uses, read from its
# sources at run time: no mirror is named in the project.
#
# The first Debian mirror in apt's sources that serves bookworm: FILE URI.
find_mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk 'BEGIN { RS = ""; FS = "\n" }
      { uris = ""; suites = ""; types = ""
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/)   { v = $i; sub(/^URIs:[ \t]*/, "", v); uris = v }
          if ($i ~ /^Suites:/) { v = $i; sub(/^Suites:[ \t]*/, "", v); suites = " " v " " }
          if ($i ~ /^Types:/)  { v = $i; sub(/^Types:[ \t]*/, "", v); types = " " v " " }
          if ($i ~ /^Enabled:[ \t]*no/) { types = "" }
        }
        if (types ~ / deb / && suites ~ / bookworm /) { split(uris, u, " "); print u[1]; exit } }' "$f")
    if [ -n "$uri" ]; then echo "$f $uri"; return 0; fi
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(sed -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }')
    if [ -n "$uri" ]; then echo "$f $uri"; return 0; fi
  done
  return 1
}
