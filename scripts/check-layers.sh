#!/bin/sh
# check-layers: every #include "…" in lib/<layer>/, service/, worker/, cli/
# and sim/ against the allowed graph in lib/LAYERS.  A quoted include names
# its folder ("db/tb_db.h"), or is a file of the includer's own folder.
# Prints each include that runs up or sideways and exits 1; no exceptions.
set -eu
cd "$(dirname "$0")/.."
graph=lib/LAYERS
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# allowed FOLDER: the folders FOLDER may include, its own first.
allowed() {
  printf '%s ' "$1"
  sed -n "s/^$1:[[:space:]]*//p" "$graph"
}
for dir in lib/*/ service/ worker/ cli/ sim/; do
  dir=${dir%/}
  folder=${dir#lib/}
  grep -q "^$folder:" "$graph" || { echo "check-layers: $dir is not in $graph"; echo x >>"$tmp"; continue; }
  ok=" $(allowed "$folder") "
  for f in "$dir"/*.c "$dir"/*.h; do
    [ -f "$f" ] || continue
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
      inc=$(printf '%s\n' "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/')
      case "$inc" in
      */*)
        layer=${inc%%/*}
        case "$ok" in *" $layer "*) ;; *)
          echo "$f:${line%%:*}: includes $inc: $folder may include only:${ok% }"
          echo x >>"$tmp" ;;
        esac ;;
      *)
        if [ ! -f "$dir/$inc" ]; then
          echo "$f:${line%%:*}: includes \"$inc\" without its folder"
          echo x >>"$tmp"
        fi ;;
      esac
    done
  done
done
# Inner layers (lib/LAYERS lines "folder/file: files"): a ranked file's .c
# and .h include only the ranked files of their folder that its line names;
# the folder's unranked files stay open to all.  The folder is lib/<folder>,
# or a binary's (sim).
sed -n 's|^\([a-z]*\)/\([a-z_0-9]*\):[[:space:]]*\(.*\)$|\1 \2 \3|p' "$graph" |
while read -r folder file below; do
  ranked=" $(sed -n "s|^$folder/\([a-z_0-9]*\):.*|\1|p" "$graph" | tr '\n' ' ')"
  dir=lib/$folder
  [ -d "$dir" ] || dir=$folder # a binary's folder (sim/)
  for f in "$dir/$file.c" "$dir/$file.h"; do
    [ -f "$f" ] || { echo "check-layers: $f is ranked in $graph but missing"; echo x >>"$tmp"; continue; }
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" | while IFS= read -r line; do
      inc=$(printf '%s\n' "$line" | sed 's/.*include[[:space:]]*"\([^"]*\)".*/\1/')
      case "$inc" in "$folder"/*) inc=${inc#"$folder"/} ;; */*) continue ;; esac
      name=${inc%.h}
      [ "$name" = "$file" ] && continue
      case "$ranked" in *" $name "*) ;; *) continue ;; esac
      case " $below " in *" $name "*) ;; *)
        echo "$f:${line%%:*}: includes $folder/$inc: $file may include only:${below:+ $below} (below it)"
        echo x >>"$tmp" ;;
      esac
    done
  done
done
if [ -s "$tmp" ]; then
  echo "check-layers: $(wc -l <"$tmp") include(s) against $graph"
  exit 1
fi
echo "check-layers: every include follows $graph"
