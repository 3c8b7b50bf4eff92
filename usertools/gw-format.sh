#!/usr/bin/env bash
# clang-format (the repository's .clang-format: Google style, 100 columns) over every tracked
# C and C++ source. Usage: usertools/gw-format.sh [--check]
#   --check  change nothing; list the files that differ and exit 1 if any (the unit suite's
#            'format' test runs this)
set -uo pipefail
cd "$(dirname "$0")/.."
fmt=${CLANG_FORMAT:-clang-format}
command -v "$fmt" >/dev/null || { echo "gw-format: $fmt not found (usertools/gw-deps.sh installs it)"; exit 1; }
# CUDA sources (.cu) are left out: clang-format 14 does not keep their lines within the limit.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h' '*.c')
else  # a source tarball
  mapfile -t files < <(find lib drivers apps tests python \( -name '*.cc' -o -name '*.h' -o -name '*.c' \) | sort)
fi
[ ${#files[@]} -gt 0 ] || { echo "gw-format: no sources found"; exit 1; }
if [ "${1:-}" != --check ]; then
  "$fmt" -i "${files[@]}"
  exit 0
fi
# One process for all (its warnings name file:line); --Werror makes any of them fail it.
out=$("$fmt" --dry-run --Werror "${files[@]}" 2>&1)
rc=$?
mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' <<<"$out" | sort -u)
if [ $rc -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
  echo "gw-format: $fmt failed (rc $rc):"; echo "$out" | head -20; exit 1
fi
if [ ${#bad[@]} -gt 0 ]; then
  printf 'gw-format: not formatted: %s\n' "${bad[@]}"
  echo "gw-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format; run bash usertools/gw-format.sh"
  exit 1
fi
echo "gw-format: ${#files[@]} files formatted"
