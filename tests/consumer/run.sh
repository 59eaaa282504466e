#!/usr/bin/env bash
# Builds tests/consumer/consumer.cpp the three ways another project uses attn,
# and runs each binary:
#   (a) Meson: attn as a subproject (dependency('attn', fallback: ...)),
#   (b) pkg-config: c++ -std=c++20 $(pkg-config --cflags --libs attn),
#   (c) CMake: find_package(attn) + attn::attn.
# (b) and (c) use a fresh `meson install` into a temporary prefix, so they
# prove the installed headers, attn.pc and attnConfig.cmake are complete.
#
# usage: run.sh <attn source root> <attn build root>
# env:   CXX (default c++), MESON (default meson), ATTN_BLAS and ATTN_DNNL (enabled|disabled|auto)
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 <attn source root> [<attn build root>]" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=${2:-}
read -r -a cxx <<< "${CXX:-c++}"
read -r -a meson <<< "${MESON:-meson}"
blas=${ATTN_BLAS:-auto}
dnnl=${ATTN_DNNL:-auto}

# Scratch space inside the build tree when we have one (same filesystem, easy
# to inspect while the test runs); removed on exit either way.
parent=${TMPDIR:-/tmp}
if [[ -n $build && -d $build ]]; then
  parent=$build
fi
tmp=$(mktemp -d "$parent/attn-consumer.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

step() { printf '\n==== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------------------
step "install attn into $prefix"
"${meson[@]}" setup "$tmp/install-build" "$src" --prefix="$prefix" \
  -Dtests=false -Dbenchmarks=disabled -Dcuda=disabled -Dmpi=disabled \
  -Dblas="$blas" -Ddnnl="$dnnl" >"$tmp/install-setup.log" 2>&1 \
  || { cat "$tmp/install-setup.log"; fail "meson setup of the install build"; }
# Headers, attn.pc and attnConfig*.cmake need no compiling: --no-rebuild keeps
# the install from building the examples (they are not installed).
"${meson[@]}" install -C "$tmp/install-build" --no-rebuild --quiet
[[ -f $prefix/include/attn/attn.hpp ]] || fail "attn/attn.hpp was not installed"
pc=$(find "$prefix" -name attn.pc -print -quit)
[[ -n $pc ]] || fail "attn.pc was not installed"
cmake_config=$(find "$prefix" -name attnConfig.cmake -print -quit)
[[ -n $cmake_config ]] || fail "attnConfig.cmake was not installed"
echo "installed: ${pc#"$prefix"/}, ${cmake_config#"$prefix"/}"

# ---------------------------------------------------------------------------
step "(a) Meson subproject"
proj=$tmp/meson-consumer
mkdir -p "$proj/subprojects"
cp "$src/tests/consumer/meson/meson.build" "$src/tests/consumer/consumer.cpp" "$proj/"
ln -s "$src" "$proj/subprojects/attn"
"${meson[@]}" setup "$tmp/meson-build" "$proj" --force-fallback-for=attn \
  >"$tmp/meson-setup.log" 2>&1 \
  || { cat "$tmp/meson-setup.log"; fail "meson setup of the subproject consumer"; }
"${meson[@]}" compile -C "$tmp/meson-build"
"$tmp/meson-build/consumer"

# ---------------------------------------------------------------------------
step "(b) pkg-config"
pcdir=$(dirname "$pc")
export PKG_CONFIG_PATH="$pcdir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
read -r -a pc_flags <<< "$(pkg-config --cflags --libs attn)"
echo "pkg-config --cflags --libs attn: ${pc_flags[*]}"
set -x
"${cxx[@]}" -std=c++20 -Wall -Wextra "$src/tests/consumer/consumer.cpp" "${pc_flags[@]}" \
  -MMD -MF "$tmp/pkgconfig-consumer.d" -o "$tmp/pkgconfig-consumer"
{ set +x; } 2>/dev/null
grep -q "$prefix/include/attn/attn.hpp" "$tmp/pkgconfig-consumer.d" \
  || fail "the pkg-config build did not use the installed headers"
"$tmp/pkgconfig-consumer"

# ---------------------------------------------------------------------------
step "(c) CMake find_package"
generator=()
if command -v ninja >/dev/null; then
  generator=(-G Ninja)
fi
cmake -S "$src/tests/consumer/cmake" -B "$tmp/cmake-build" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="${cxx[0]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  >"$tmp/cmake-configure.log" 2>&1 \
  || { cat "$tmp/cmake-configure.log"; fail "cmake configure of the consumer"; }
grep -E '^attn_DIR:' "$tmp/cmake-build/CMakeCache.txt"
grep -q "^attn_DIR:PATH=$prefix/" "$tmp/cmake-build/CMakeCache.txt" \
  || fail "CMake did not find attn in $prefix"
cmake --build "$tmp/cmake-build"
grep -q -- "$prefix/include" "$tmp/cmake-build/compile_commands.json" \
  || fail "the CMake build did not use the installed headers"
"$tmp/cmake-build/consumer"

step "all three consumers built and ran"
