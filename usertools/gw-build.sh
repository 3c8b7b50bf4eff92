#!/usr/bin/env bash
# Configure (first time) and build gradwire into ${GW_BUILD_DIR:-build}. Extra args go to
# `meson setup`, e.g. -Db_sanitize=address,undefined.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${GW_BUILD_DIR:-build}
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" "$@"
fi
ninja -C "$dir" -j "${GW_JOBS:-$(nproc)}"
