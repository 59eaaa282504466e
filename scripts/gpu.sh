#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds attn with CUDA (build-gpu/), runs the gpu suite
# (every CUDA primitive and kernel against the CPU, whole training steps, the programs with
# --device cuda against --device cpu) and the GPU benchmarks (attn-train against PyTorch's
# training at the same configuration, batches and precision, fp32 and bf16; attn-translate on
# the GPU and the CPU), and prints a summary. Exits non-zero when a test failed.
#
# Where the Debian packages are missing (GPU nodes often have only nvcc, Meson or CMake, Ninja
# and Python), ATTN_DEPS=DIR takes the header-only libraries, SentencePiece and libpng from DIR,
# which scripts/gpu-deps.sh fills on a machine that has them. docs/gpu.md.
#
#   scripts/gpu.sh                      build, test, benchmark
#   ATTN_GPU_BENCH=0 scripts/gpu.sh     build and test only
#   ATTN_GPU_OUT=DIR                    where the summary and logs go (default build-gpu/report)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [[ ${1:-} == -h || ${1:-} == --help ]]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi

heading() { printf '\n=== %s\n' "$*"; }
die() { echo "gpu.sh: $*" >&2; exit 1; }

if [[ -n ${ATTN_DEPS:-} ]]; then
  deps=$(cd "$ATTN_DEPS" && pwd) || die "ATTN_DEPS=$ATTN_DEPS is not a directory"
  [[ -d $deps/lib/pkgconfig ]] || die "ATTN_DEPS=$ATTN_DEPS lacks lib/pkgconfig: fill it with scripts/gpu-deps.sh"
  export PKG_CONFIG_PATH="$deps/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [[ -d $deps/python ]] && export PYTHONPATH="$deps/python${PYTHONPATH:+:$PYTHONPATH}"
elif command -v apt-get >/dev/null && [[ -f /etc/debian_version ]]; then
  source scripts/deps.sh
fi
[[ -d /usr/local/cuda/bin && :$PATH: != *:/usr/local/cuda/bin:* ]] && export PATH="/usr/local/cuda/bin:$PATH"
command -v nvcc >/dev/null || die "no nvcc on PATH (install the CUDA toolkit, or put its bin/ on PATH)"
command -v meson >/dev/null || die "no meson on PATH (pip install meson ninja)"

out=build-gpu
report=${ATTN_GPU_OUT:-$out/report}
mkdir -p "$report"
report=$(cd "$report" && pwd)
summary=$report/summary.md

heading "device"
if ! nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader | tee "$report/device.txt"; then
  die "nvidia-smi found no GPU"
fi
capability=$(head -1 "$report/device.txt" | cut -d, -f2 | tr -d ' .')
arch=sm_${capability:-90}
models=${ATTN_GPU_MODELS:-tiny,small,base}

heading "configure ($out/: CUDA for $arch, presets $models)"
setup_args=(-Dcuda=enabled "-Dgpu_arch=$arch" "-Dexample_models=$models" -Dbuildtype=release)
if [[ -d $out/meson-private ]]; then
  meson setup --reconfigure "$out" "${setup_args[@]}" || die "configure failed"
else
  meson setup "$out" "${setup_args[@]}" || die "configure failed"
fi

heading "compile"
start=$SECONDS
meson compile -C "$out" 2>&1 | tail -n 30
[[ ${PIPESTATUS[0]} -eq 0 ]] || die "compile failed"
compile_seconds=$((SECONDS - start))

heading "test: the gpu suite"
start=$SECONDS
meson test -C "$out" --suite gpu --print-errorlogs --no-rebuild 2>&1 | tee "$report/gpu-suite.txt"
tests_status=${PIPESTATUS[0]}
test_seconds=$((SECONDS - start))
for t in "$out"/tests/gpu/gpu_*; do  # each test's own lines (ok/FAIL, measured errors) for the record
  [[ -x $t && ! -d $t ]] && "$t" > "$report/$(basename "$t").txt" 2>&1
done

bench_lines=()
if [[ ${ATTN_GPU_BENCH:-1} != 0 ]]; then
  IFS=, read -r -a presets <<< "$models"
  for preset in "${presets[@]}"; do
    heading "benchmark: training $preset, attn against PyTorch on the GPU (fp32, TF32 off)"
    python3 bench/train_vs_torch.py --device cuda --config "$preset" --steps 60 --skip 10 --batch-tokens 8000 \
      --threads 4 --python python3 --attn-train "$out/examples/attn-train" --json "$report/train-$preset.json" \
      2>&1 | tee "$report/train-$preset.txt"
    bench_lines+=("train $preset: $(grep -E '^\| attn / PyTorch' "$report/train-$preset.txt" || echo 'failed (see its log)')")
    bench_lines+=("train $preset: $(grep -E '^model TFLOP/s' "$report/train-$preset.txt" || echo 'no model TFLOP/s line')")
    heading "benchmark: training $preset, attn --precision bf16 against PyTorch autocast bf16 on the GPU"
    python3 bench/train_vs_torch.py --device cuda --config "$preset" --steps 60 --skip 10 --batch-tokens 8000 \
      --precision bf16 --threads 4 --python python3 --attn-train "$out/examples/attn-train" \
      --json "$report/train-$preset-bf16.json" 2>&1 | tee "$report/train-$preset-bf16.txt"
    bench_lines+=("train $preset bf16: $(grep -E '^\| attn / PyTorch' "$report/train-$preset-bf16.txt" || echo 'failed (see its log)')")
    bench_lines+=("train $preset bf16: $(grep -E '^model TFLOP/s' "$report/train-$preset-bf16.txt" || echo 'no model TFLOP/s line')")
  done

  # Decoding needs a trained model: the tiny preset on the toy corpus, 600 steps on the GPU.
  heading "benchmark: decoding (greedy, beam 4), attn-translate against a PyTorch key/value-cache decoder on the GPU"
  toy=$report/toy
  rm -rf "$toy"  # a fresh run each time (attn-train refuses an --out that holds checkpoints)
  if [[ ,$models, != *,tiny,* ]]; then
    echo "skipped: the decoding benchmark trains the tiny preset, which ATTN_GPU_MODELS=$models leaves out" \
      | tee "$report/decode.txt"
  else
    python3 tests/train/toy_corpus.py --out "$toy/data" --train 4000 --valid 500 \
      && "$out/examples/attn-train" --device cuda --precision fp32 --config tiny --vocab-size 128 --batch-tokens 2000 --max-steps 600 \
           --src "$toy/data/train.src" --tgt "$toy/data/train.tgt" --out "$toy/run" > "$report/decode-train.txt" 2>&1 \
      && python3 bench/decode_vs_torch.py --device cuda --run "$toy/run" --input "$toy/data/valid.src" --threads 4 \
           --python python3 --translate "$out/examples/attn-translate" --repeat 3 --json "$report/decode.json" \
           2>&1 | tee "$report/decode.txt"
  fi
  bench_lines+=("decode: $(grep -E '^\| (greedy|beam 4) \| attn / PyTorch' "$report/decode.txt" | tr '\n' ' ' || echo 'failed (see its log)')")
fi

{
  echo "# scripts/gpu.sh, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "- device: $(head -1 "$report/device.txt")"
  echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with local changes)')"
  echo "- build: ${compile_seconds}s; gpu suite: ${test_seconds}s, status $tests_status"
  echo
  grep -E '^ *[0-9]+/[0-9]+ ' "$report/gpu-suite.txt" | sed 's/^/    /'
  echo
  for line in "${bench_lines[@]}"; do echo "- $line"; done
} > "$summary"
heading "summary ($summary)"
cat "$summary"
exit "$tests_status"
