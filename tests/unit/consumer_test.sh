#!/usr/bin/env bash
# Install into a scratch DESTDIR and build + run a program against it through pkg-config,
# as another project would.
set -euo pipefail
build=$1
extra=${2:-}
dest=$(mktemp -d /tmp/gw-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT
meson install -C "$build" --destdir "$dest" --quiet --no-rebuild >/dev/null
pc=$(dirname "$(find "$dest" -name gradwire.pc | head -1)")
prefix=$(sed -n 's/^prefix=//p' "$pc/gradwire.pc")
export PKG_CONFIG_PATH=$pc PKG_CONFIG_SYSROOT_DIR=$dest
cat > "$dest/consumer.cc" <<'CC'
#include <gw_group.h>
#include <cstdio>
int main() {
  auto t = gw::Transport::open("tcp:iface=lo");
  if (!t.ok()) { std::puts(t.status().to_string().c_str()); return 1; }
  auto store = gw::make_in_process_store();
  auto g = gw::Group::create(store, std::move(*t), 0, 1, gw::Millis(1000));
  if (!g.ok()) { std::puts(g.status().to_string().c_str()); return 1; }
  std::printf("consumer ok: %s, %d rank(s)\n", (*g)->transport().properties().name.c_str(),
              (*g)->size());
  return 0;
}
CC
c++ -std=c++20 $extra "$dest/consumer.cc" -o "$dest/consumer" $(pkg-config --cflags --libs gradwire)
LD_LIBRARY_PATH=$(dirname "$(find "$dest" -name 'libgradwire.so' | head -1)") "$dest/consumer"
