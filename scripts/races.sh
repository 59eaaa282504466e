#!/usr/bin/env bash
# The GPU kernels' race check on the CPU: builds the emulated kernel tests (unit-emulated,
# primitives-emulated) under ThreadSanitizer in build-tsan/ and runs them (the suite `races`),
# races between a block's threads reported, with both threads' stacks, as compute-
# sanitizer's racecheck would on a GPU (cuda/attn/cuda/emulator.hpp; docs/testing.md).
# Not part of scripts/test.sh: its build and run, about 20 minutes on two cores, would all but
# double CI's. Run it after changing a kernel.
#
#   scripts/races.sh                 build and run the suite; exits non-zero at the first race
#   ATTN_RACES_TESTS="*tensor cores*" scripts/races.sh
#                                    only the unit-emulated cases that match (doctest's --test-case)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh" "$@"
(( $# == 0 )) || { echo "$(basename "$0"): takes no arguments (--help says what it does)" >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh

# -O0 and line tables, as the AddressSanitizer build of scripts/test.sh (which says why).
if [[ ! -d build-tsan/meson-private ]]; then
  meson setup build-tsan -Db_sanitize=thread -Db_lundef=false -Doptimization=0 -Ddebug=false -Dcpp_args=-g1 \
    -Dbenchmarks=disabled -Dcuda=disabled
fi
ninja -C build-tsan tests/unit/unit-emulated tests/primitives-emulated
if [[ -n ${ATTN_RACES_TESTS:-} ]]; then
  # One case list by hand: the environment of the suite's tests (tests/meson.build's races_env).
  TSAN_OPTIONS=halt_on_error=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_WAIT_POLICY=passive \
    build-tsan/tests/unit/unit-emulated --test-case="$ATTN_RACES_TESTS"
else
  meson test -C build-tsan --no-rebuild --suite races --print-errorlogs
fi
