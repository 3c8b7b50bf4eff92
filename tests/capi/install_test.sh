#!/usr/bin/env bash
# The C example as another project builds it: install into a scratch DESTDIR, compile with
# cc -std=c11 -Wall -Werror through pkg-config (#include <gradwire.h>), run 2 and 4 ranks.
set -euo pipefail
build=$1
src=$2
extra=${3:-}
dest=$(mktemp -d /tmp/gw-capi-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --quiet --no-rebuild >/dev/null
pc=$(dirname "$(find "$dest" -name gradwire.pc | head -1)")
export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR=$dest
echo "pkg-config --cflags --libs gradwire: $(pkg-config --cflags --libs gradwire)"
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
cc -std=c11 -Wall -Werror $extra "$src/example.c" "$src/capi_test_util.c" -o "$dest/example" \
  $(pkg-config --cflags --libs gradwire)
LD_LIBRARY_PATH=$(dirname "$(find "$dest" -name 'libgradwire.so' | head -1)") "$dest/example" 2 4
