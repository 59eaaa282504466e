#!/usr/bin/env bash
# Packs what a CUDA build made for a GPU machine that should not have to compile: the gpu suite's
# executables, attn-train, attn-translate, bench/attention_gpu and bench/primitives_gpu, and
# the shared libraries they need that such a machine lacks (OpenBLAS, oneDNN, SentencePiece,
# Open MPI's, gfortran's), into one compressed file.
# There, `ATTN_GPU_PREBUILT=FILE scripts/gpu.sh` unpacks it and runs the suite and the
# benchmarks without configuring or compiling. The CUDA run-time, cuBLAS and NCCL are left
# out: the GPU machine's toolkit or PyTorch's wheels have them (gpu.sh finds them).
# Build first, with the presets the benchmarks need (meson configure BUILD -Dexample_models=tiny,base,big)
# and attention_gpu and primitives_gpu, which are built on demand (ninja -C BUILD
# bench/attention_gpu bench/primitives_gpu).
#
#   scripts/gpu-bundle.sh [BUILD [FILE]]   BUILD defaults to build/, FILE to build-bundle/gpu.tar.xz
#   ATTN_BUNDLE_PROGRAMS=0                 the gpu tests alone (gpu.sh then skips the programs)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh" "$@"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build}
file=${2:-build-bundle/gpu.tar.xz}
[[ -x $build/tests/gpu/gpu_device_query ]] \
  || { echo "gpu-bundle: $build has no CUDA build of the gpu tests (ninja -C $build)" >&2; exit 1; }
programs=("$build"/examples/attn-train "$build"/examples/attn-translate "$build"/bench/attention_gpu
  "$build"/bench/primitives_gpu)
[[ ${ATTN_BUNDLE_PROGRAMS:-1} == 0 ]] && programs=()  # the gpu tests alone
# Meson 1.0 (Debian 12's) gives nvcc no dependency file to write: a CUDA object is not rebuilt
# when only a header it includes changed. Refuse objects older than the newest header, and
# builds of PTX alone (test.sh's -Dgpu_arch=compute_90, which a GPU would compile at every start)
# and of kernels at -O1 (its -Dgpu_check_only=true).
# The emulator's header is never compiled by nvcc (it stops there with an #error), so it is left out.
newest=$(find cuda include tests/gpu examples bench \( -name '*.cuh' -o -name '*.hpp' -o -name '*.h' \) \
  ! -path cuda/attn/cuda/emulator.hpp -printf '%T@ %p\n' | sort -n | tail -1 | cut -d' ' -f2-)
objects=("$build/tests/gpu")
[[ ${ATTN_BUNDLE_PROGRAMS:-1} == 0 ]] || objects+=("$build/examples" "$build/bench")
stale=$(find "${objects[@]}" -name '*.cu.o' ! -newer "$newest" 2>/dev/null | head -5 || true)
for program in "${programs[@]}"; do  # attention_gpu is built on demand only
  [[ -f $program && ! $program -nt $newest ]] && stale+=$'\n'"$program"
done
if [[ -n $stale ]]; then
  echo "gpu-bundle: these CUDA objects or programs are older than $newest, and Meson does not rebuild them for a header:" >&2
  echo "$stale" >&2
  echo "rebuild them: find $build -name '*.cu.o' -delete && ninja -C $build && ninja -C $build bench/attention_gpu bench/primitives_gpu" >&2
  exit 1
fi
option() {  # option <name>: the build's value of a Meson option
  python3 -c 'import json, sys; print(*[o["value"] for o in json.load(open(sys.argv[1])) if o["name"] == sys.argv[2]])' \
    "$build/meson-info/intro-buildoptions.json" "$1" 2>/dev/null || true
}
if [[ $(option gpu_arch) == compute_* ]]; then
  echo "gpu-bundle: $build compiles PTX alone (gpu_arch compute_*): meson configure $build -Dgpu_arch=sm_90" >&2
  exit 1
fi
if [[ $(option gpu_check_only) == True || $(option gpu_check_only) == true ]]; then
  echo "gpu-bundle: $build compiles CUDA code for checking alone: meson configure $build -Dgpu_check_only=false" >&2
  exit 1
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for exe in "$build"/tests/gpu/gpu_* "${programs[@]}"; do
  [[ -f $exe && -x $exe ]] && cp "$exe" "$stage/bin/"
done
# Without their symbol tables (template names): attn-train of tiny, base and big at eec55c7
# went from 89 to 73 MB, the bundle from 68 to 66 MiB (still past the 64 MiB a call carries:
# docs/gpu.md). The kernels (.nv_fatbin) and the dynamic symbols stay.
strip --strip-unneeded "$stage"/bin/*
# The libraries a GPU machine's image does not have: everything ldd finds outside the C and C++
# run-times and CUDA's own libraries.
keep='libopenblas|libdnnl|libgfortran|libquadmath|libgomp|libsentencepiece|libmpi|libopen-rte|libopen-pal|libhwloc|libevent|libudev|libpng'
for exe in "$stage"/bin/*; do ldd "$exe"; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u \
  | grep -E "/($keep)[^/]*$" | while read -r library; do cp -L "$library" "$stage/lib/"; done
git rev-parse --short HEAD > "$stage/commit" 2>/dev/null || echo unknown > "$stage/commit"
git diff --quiet 2>/dev/null || echo "(with local changes)" >> "$stage/commit"
mkdir -p "$(dirname "$file")"
# The programs and tests hold much the same device code: xz -9's 64 MiB window, in one stream,
# finds it across files. At -6 with a thread a core (8 MiB windows, separate blocks) the bundle
# of tiny, base and big at cb1e696 took 74 MB, past the 64 MiB the device tool carries; at -9,
# 56 MB (110 s on 2 cores).
tar -C "$stage" -cf - . | xz -T1 -9 > "$file"
echo "gpu-bundle: $(ls "$stage/bin" | wc -l) programs, $(ls "$stage/lib" | wc -l) libraries, $(du -h "$file" | cut -f1) in $file"
if (( $(stat -c %s "$file") > 64 << 20 )); then
  echo "gpu-bundle: warning: over the 64 MiB a call to the device tool carries (fewer presets: -Dexample_models)" >&2
fi
# Real text for the training benchmarks (gpu.sh's ATTN_GPU_TEXT), where scripts/main.sh has
# extracted the Bible: its training pairs, 1.7 MB packed.
if [[ -f data/bible/train.en && -f data/bible/train.es ]]; then
  text=$(dirname "$file")/text.tar.xz
  tar -C data/bible -cf - train.en train.es | xz -T1 -9 > "$text"
  echo "gpu-bundle: data/bible's training pairs, $(du -h "$text" | cut -f1) in $text (ATTN_GPU_TEXT=$text scripts/gpu.sh)"
  if (( $(stat -c %s "$file") + $(stat -c %s "$text") > 64 << 20 )); then
    echo "gpu-bundle: warning: with $text, over the 64 MiB a call to the device tool carries" >&2
  fi
fi
