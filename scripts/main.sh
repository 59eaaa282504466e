#!/usr/bin/env bash
# Builds attn (release) and runs the demo program when there is one.
# Works from any directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh

heading() { printf '\n=== %s\n' "$*"; }

heading "configure (build/)"
if [[ -d build/meson-private ]]; then
  meson setup --reconfigure build
else
  meson setup build
fi
heading "compile (build/)"
meson compile -C build

if [[ -x build/examples/attn-demo ]]; then
  heading "run build/examples/attn-demo"
  build/examples/attn-demo
else
  heading "no build/examples/attn-demo yet: built the library and its tests only"
fi
