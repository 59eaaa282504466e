#!/usr/bin/env bash
# Builds attn and runs every test suite (unit, compile_fail, consumer, gpu, which
# SKIPs without a GPU, examples, data, train), and those of the suite sanitized under
# AddressSanitizer and UBSan.
# Exits non-zero on any failure. Works from any directory.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh" "$@"
(( $# == 0 )) || { echo "$(basename "$0"): takes no arguments (--help says what it does)" >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."
attn_extra_packages=(clang libomp-dev)  # the consumer suite's second compiler (tests/consumer/meson.build)
source scripts/deps.sh

heading() { printf '\n=== %s (at %d s)\n' "$*" "$SECONDS"; }  # the times: where a run's 20 minutes go

# The learning tests see the numbers of the BLAS kernels OpenBLAS picks for this CPU (and
# OPENBLAS_CORETYPE forces another CPU's): a failure's log says which ran (docs/testing.md).
heading "machine"
python3 tests/machine.py || echo "(tests/machine.py could not tell)"

setup() {  # setup <builddir> [meson options...]: configure, or reconfigure
  local dir=$1; shift
  if [[ -d $dir/meson-private ]]; then
    meson setup --reconfigure "$dir" "$@"
  else
    meson setup "$dir" "$@"
  fi
}

heading "configure (build/)"
# The example programs for the tiny preset only, the one their tests train, and for the CPU
# alone: nothing here runs a GPU, and the gpu tests compile the model, its steps and decoding
# for one (the programs' CUDA units were 9 % of this build; scripts/gpu.sh builds them). CUDA
# code compiled to be checked, not run (docs/testing.md): PTX alone (-arch=compute_90), and with
# gpu_check_only the kernels at nvcc's device -O0 and the gpu tests' host code read to the end
# but not generated (-fsyntax-only), nothing linked; nvcc still parses, instantiates and emits
# every kernel, and g++ instantiates every host template (scripts/gpu.sh and gpu-bundle.sh
# build the suite for the GPU's sm_XX at -O3). No Google Benchmark programs: they test nothing,
# and took 6 % of this build (bench/'s commands in docs/benchmarks.md build them where they
# run). A fresh build/; an existing one keeps its options.
if [[ -d build/meson-private ]]; then
  setup build
else
  setup build -Dexample_models=tiny -Dexample_cuda=false -Dgpu_arch=compute_90 \
    -Dgpu_check_only=true -Dbenchmarks=disabled
fi
# The unit tests of core, expr, cpu, grad and the loss (unit) and of text, data, batching,
# checkpoints and communicators (unit-train, whose checkpoint loader is fuzzed), the suite
# `sanitized-only`, are compiled and run in build-asan/ below, under the sanitizers, and not here
# as well: they were a fifth of this build's compile time. The GPU's fused attention kernels on
# the CPU emulator (unit-emulated) run in both: here their 1000-token and bfloat16 cases too.
programs() {  # programs <builddir> <suite> in|out: the programs to build, for the tests in or out of <suite>
  python3 - "$@" <<'EOF'
import json, os, sys
build, suite, which = sys.argv[1:]
def info(name): return json.load(open(os.path.join(build, 'meson-info', name)))
chosen = {t['cmd'][0] for t in info('intro-tests.json') if 'attn:' + suite in t['suite']}
for target in info('intro-targets.json'):
    if target['build_by_default'] and bool(chosen & set(target['filename'])) == (which == 'in'):
        print(*(os.path.relpath(f, build) for f in target['filename']), sep='\n')
EOF
}
heading "compile (build/)"
mapfile -t targets < <(programs build sanitized-only out)
ninja -C build "${targets[@]}"
# Every other suite: unit (the whole model, unit-model; the emulated GPU kernels; the device
# primitives on the host and the emulator), compile_fail, consumer, gpu (SKIP without a GPU),
# examples and whatever is added later. Benchmarks are not tests (meson test --benchmark).
heading "test: all suites but sanitized-only"
meson test -C build --no-rebuild --no-suite sanitized-only --print-errorlogs

heading "configure (build-asan/: AddressSanitizer + UBSan)"
# -O0: sanitized Eigen code compiles five times faster than at -O1 (6 against 33 CPU-minutes
# on a 2-vCPU AMD EPYC), keeps every memory access for the sanitizers to check, and the unit
# tests still run in seconds. -g1, line tables alone: a report's stack still names file and
# line, and the largest test compiles in 29 s instead of 38 with full -g. UBSan's checks of null
# pointers, pointer arithmetic that wraps and dynamic types (vptr) are left out: a quarter of
# the compile time (expr/contract_test.cpp: 27.4 s against 20.6), for a null dereference that
# AddressSanitizer reports anyway, and two mistakes that code with checked extents and one
# virtual interface (train/communicator.hpp) hardly makes; the rest (overflow, shifts,
# alignment, bounds, ...) stays.
setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Doptimization=0 -Ddebug=false \
  '-Dcpp_args=-g1 -fno-sanitize=null,pointer-overflow,vptr' \
  -Dbenchmarks=disabled -Dcuda=disabled
# The suite sanitized: unit, unit-train and the emulated GPU kernels (unit-emulated: AddressSanitizer
# is their compute-sanitizer). The whole-model tests (unit-model) ran above and are left out
# here, see tests/unit/meson.build.
heading "compile (build-asan/: the suite sanitized)"
mapfile -t targets < <(programs build-asan sanitized in)
ninja -C build-asan "${targets[@]}"
heading "test: the suite sanitized, under the sanitizers"
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  meson test -C build-asan --no-rebuild --suite sanitized --print-errorlogs

heading "all tests passed"
