#!/bin/sh
# check-format: every C file of the project follows .clang-format (make
# check-format, run by make test).  Lists the files that do not and exits 1;
# `scripts/check-format.sh --fix` formats them in place.
set -eu
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null 2>&1; then
  echo "check-format: $cf not found (make deps installs it)" >&2
  exit 1
fi
# tracked and new (untracked, not ignored) files alike: a new file is checked before it is added
files=$(git ls-files --cached --others --exclude-standard '*.c' '*.h' 2>/dev/null || find lib service worker sim cli tests bench -name '*.[ch]')
if [ "${1:-}" = --fix ]; then
  printf '%s\n' $files | xargs "$cf" -i
  exit 0
fi
bad=0
for f in $files; do
  if ! "$cf" --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "check-format: $f differs from .clang-format ($cf -i $f)"
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "check-format: every C file follows .clang-format"
exit $bad
