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
# ATTN_GPU_PREBUILT=FILE skips configuring and compiling: FILE holds the gpu suite's executables,
# the programs and the libraries they need, packed by scripts/gpu-bundle.sh on another machine
# (the GPU machine then needs only its driver, CUDA's libraries and Python with PyTorch).
#
#   scripts/gpu.sh                      build, test, benchmark
#   ATTN_GPU_BENCH=0 scripts/gpu.sh     build and test only
#   ATTN_GPU_BENCH=attention,train,nccl,decode,primitives   those benchmarks only (default all;
#                                       primitives: bench/primitives_gpu, a step's memory-bound kernels,
#                                       ATTN_GPU_PRIMITIVES_ARGS its options, as --kernels embedding)
#   ATTN_GPU_BENCH=...,paths            also attn-train with --attention-path fused against unfused,
#                                       ATTN_GPU_PATHS=PRESET-PRECISION-WORDS,... the runs (default
#                                       base-bf16-8,base-bf16-60; WORDS: the corpus's longest sentence)
#   ATTN_GPU_BENCH=...,short            also attention at a translation's lengths (10 to 512 tokens, bf16):
#                                       short sentences several a block and one a block, the unfused path
#                                       (nn's automatic choice takes the kernel from 512), and SDPA
#   ATTN_GPU_BENCH=...,packing          also attn-train --attention-path fused with short sentences several a
#                                       block against one a block (ATTN_FUSED_PACKING=0),
#                                       ATTN_GPU_PACKING=PRESET-PRECISION-WORDS,... (default base-bf16-8,big-bf16-8)
#   ATTN_GPU_BENCH=...,vectors          also attn-train with the elementwise kernel an element a thread
#                                       (ATTN_ELEMENTWISE_VECTORS=0) against runs of 16 bytes a thread,
#                                       ATTN_GPU_VECTORS=PRESET-PRECISION-WORDS,... (default
#                                       base-bf16-8,big-bf16-8)
#   ATTN_GPU_BENCH=...,small            also attn-train with small products on cuBLAS
#                                       (ATTN_SMALL_PRODUCTS=0) against attn's kernel,
#                                       ATTN_GPU_SMALL=PRESET-PRECISION-WORDS,... (default
#                                       base-bf16-8,big-bf16-8,base-bf16-60)
#   ATTN_GPU_BENCH=...,profile          also each kernel's time in two steps of attn-train bf16
#                                       under Nsight Compute (bench/kernel_times.py); not in all;
#                                       ATTN_GPU_PROFILE_CONFIGS=base,big: those presets (default base),
#                                       ATTN_GPU_PROFILE_LIMIT seconds each at most (default 300)
#   ATTN_GPU_TESTS=0 scripts/gpu.sh     no gpu suite (the benchmarks alone); ATTN_GPU_TESTS=NAME,NAME:
#                                       those tests alone (a prebuilt bundle's, programs_test among them)
#   ATTN_GPU_OUT=DIR                    where the summary and logs go (default build-gpu/report)
#   ATTN_GPU_BATCH_TOKENS=N             the training benchmarks' batch (default 8000 tokens a side)
#   ATTN_GPU_TEXT=FILE|DIR              the training benchmarks and the profile on real text: a directory
#                                       holding train.en and train.es, or a tar archive of the two
#                                       (scripts/gpu-bundle.sh packs data/bible's beside the bundle);
#                                       vocabulary 8000. Default: the toy corpus (3-8 words, 128 or ~150
#                                       subwords), whose tiny output layer makes model FLOP utilisation
#                                       a smoke test's
#   ATTN_GPU_TRAIN_ATTENTION=PATH       attn-train's --attention-path in the bf16 training benchmarks
#                                       (default automatic)
#   ATTN_GPU_TEST_LIMIT=SECONDS         a prebuilt gpu test's time limit (default 600; programs_test:
#                                       ATTN_GPU_PROGRAMS_LIMIT, default 900)
#   ATTN_GPU_MEMCHECK=TEST,TEST         those gpu tests again under compute-sanitizer memcheck
#   ATTN_GPU_RACECHECK=1                the fused attention kernels, LayerNorm's backward and the
#                                       small products on small cases (each test's --races) under
#                                       compute-sanitizer racecheck and synccheck
#                                       (ATTN_GPU_RACECHECK_LIMIT s each, 120)
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh" "$@"
# Paths given in the environment are the caller's: resolved before moving to the repository.
for variable in ATTN_GPU_PREBUILT ATTN_GPU_TEXT ATTN_GPU_OUT ATTN_DEPS; do
  [[ -n ${!variable:-} ]] && export "$variable=$(realpath -m -- "${!variable}")"
done
cd "$(dirname "${BASH_SOURCE[0]}")/.."

heading() { printf '\n=== %s\n' "$*"; }
die() { echo "gpu.sh: $*" >&2; exit 1; }

out=build-gpu
report=${ATTN_GPU_OUT:-$out/report}
prebuilt=${ATTN_GPU_PREBUILT:-}
[[ -z $prebuilt || -f $prebuilt ]] || die "ATTN_GPU_PREBUILT=$prebuilt is not a file (scripts/gpu-bundle.sh makes one)"
[[ -d /usr/local/cuda/bin && :$PATH: != *:/usr/local/cuda/bin:* ]] && export PATH="/usr/local/cuda/bin:$PATH"
toolkit=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
# PyTorch's wheels bring CUDA's libraries too (site-packages/nvidia/...).
wheels=$(python3 -c 'import nvidia; print(*nvidia.__path__)' 2>/dev/null || true)

if [[ -n $prebuilt ]]; then
  # The bundle's own libraries, then CUDA's where the loader would not find them.
  bundle=$out/prebuilt
  rm -rf "$bundle" && mkdir -p "$bundle" && tar -xJf "$prebuilt" -C "$bundle" || die "cannot unpack $prebuilt"
  bundle=$(cd "$bundle" && pwd)
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  for name in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
    ldconfig -p | grep -q "$name" && continue
    found=$(find "$toolkit" $wheels -name "$name" 2>/dev/null | head -1)
    [[ -n $found ]] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$(dirname "$found")"
  done
  echo "prebuilt: $(tr '\n' ' ' < "$bundle/commit")from $prebuilt"
  bin=$bundle/bin
  gpu_tests=("$bin"/gpu_*)
  attn_train=$bin/attn-train
  attn_translate=$bin/attn-translate
  attention_gpu=$bin/attention_gpu
  primitives_gpu=$bin/primitives_gpu
  if [[ ! -x $attn_train ]]; then  # a bundle of the gpu tests alone
    echo "the bundle has no attn-train: programs_test and the benchmarks are left out"
    export ATTN_GPU_BENCH=0
  fi
else
  if [[ -n ${ATTN_DEPS:-} ]]; then
    deps=$(cd "$ATTN_DEPS" && pwd) || die "ATTN_DEPS=$ATTN_DEPS is not a directory"
    [[ -d $deps/lib/pkgconfig ]] || die "ATTN_DEPS=$ATTN_DEPS lacks lib/pkgconfig: fill it with scripts/gpu-deps.sh"
    export PKG_CONFIG_PATH="$deps/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export LD_LIBRARY_PATH="$deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    [[ -d $deps/python ]] && export PYTHONPATH="$deps/python${PYTHONPATH:+:$PYTHONPATH}"
  elif command -v apt-get >/dev/null && [[ -f /etc/debian_version ]]; then
    source scripts/deps.sh
  fi
  command -v nvcc >/dev/null || die "no nvcc on PATH (install the CUDA toolkit, or put its bin/ on PATH)"
  command -v meson >/dev/null || die "no meson on PATH (pip install meson ninja)"

  # NCCL (attn-train --gpus): the CUDA toolkit's, else the one PyTorch's wheels bring
  # (nvidia-nccl-cu13: site-packages/nvidia/nccl/{include,lib}), linked under the name the
  # linker looks for.
  if ! compgen -G "$toolkit/lib*/libnccl.so" >/dev/null; then
    header=$(find $wheels -name nccl.h 2>/dev/null | head -1)
    library=$(find $wheels -name 'libnccl.so*' 2>/dev/null | head -1)
    if [[ -n $header && -n $library ]]; then
      mkdir -p "$out/nccl/lib"
      ln -sf "$library" "$out/nccl/lib/libnccl.so"
      export LIBRARY_PATH="$PWD/$out/nccl/lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
      export CPATH="$(dirname "$header")${CPATH:+:$CPATH}"
      export LD_LIBRARY_PATH="$(dirname "$library")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      echo "NCCL from PyTorch's wheel: $library"
    else
      echo "no NCCL beside nvcc or in PyTorch's wheels: attn-train --gpus is left out"
    fi
  fi
  gpu_tests=()
  attn_train=$out/examples/attn-train
  attn_translate=$out/examples/attn-translate
  attention_gpu=$out/bench/attention_gpu
  primitives_gpu=$out/bench/primitives_gpu
fi
mkdir -p "$report"
report=$(cd "$report" && pwd)
summary=$report/summary.md

# ATTN_GPU_TEXT: real text for the training benchmarks and the profile (text_options, empty for
# the toy corpus).
text_options=()
text_label="the toy corpus"
# train_vs_torch.py's own default where this checkout has the Bible (the profile keeps the toy corpus)
[[ -f data/bible/train.en ]] && text_label="data/bible (train_vs_torch.py's default; the profile: the toy corpus)"
if [[ -n ${ATTN_GPU_TEXT:-} ]]; then
  text_dir=$ATTN_GPU_TEXT
  if [[ -f $text_dir ]]; then
    rm -rf "$report/text" && mkdir -p "$report/text" && tar -xf "$text_dir" -C "$report/text" \
      || die "ATTN_GPU_TEXT=$text_dir: cannot unpack it"
    text_dir=$report/text
  fi
  [[ -f $text_dir/train.en && -f $text_dir/train.es ]] \
    || die "ATTN_GPU_TEXT=$ATTN_GPU_TEXT holds no train.en and train.es"
  text_options=(--src "$text_dir/train.en" --tgt "$text_dir/train.es")
  text_label="$(wc -l < "$text_dir/train.en") pairs of $ATTN_GPU_TEXT"
fi

heading "device"
if ! nvidia-smi --query-gpu=name,compute_cap,memory.total,driver_version --format=csv,noheader | tee "$report/device.txt"; then
  die "nvidia-smi found no GPU"
fi
capability=$(head -1 "$report/device.txt" | cut -d, -f2 | tr -d ' .')
arch=sm_${capability:-90}
models=${ATTN_GPU_MODELS:-tiny,small,base}

compile_seconds=0
if [[ -z $prebuilt ]]; then
  heading "configure ($out/: CUDA for $arch, presets $models)"
  setup_args=(-Dcuda=enabled "-Dgpu_arch=$arch" -Dgpu_check_only=false "-Dexample_models=$models"
    -Dbuildtype=release)
  if [[ -d $out/meson-private ]]; then
    meson setup --reconfigure "$out" "${setup_args[@]}" || die "configure failed"
  else
    meson setup "$out" "${setup_args[@]}" || die "configure failed"
  fi

  heading "compile"
  start=$SECONDS
  meson compile -C "$out" 2>&1 | tail -n 30
  [[ ${PIPESTATUS[0]} -eq 0 ]] || die "compile failed"
  meson compile -C "$out" attention_gpu primitives_gpu 2>&1 | tail -n 30  # built on demand only
  compile_seconds=$((SECONDS - start))
  for t in "$out"/tests/gpu/gpu_*; do [[ -x $t && ! -d $t ]] && gpu_tests+=("$t"); done
fi

heading "test: the gpu suite"
start=$SECONDS
tests_status=0
if [[ ${ATTN_GPU_TESTS:-1} == 0 ]]; then
  echo "skipped (ATTN_GPU_TESTS=0)" | tee "$report/gpu-suite.txt"
elif [[ -z $prebuilt ]]; then
  meson test -C "$out" --suite gpu --print-errorlogs --no-rebuild 2>&1 | tee "$report/gpu-suite.txt"
  tests_status=${PIPESTATUS[0]}
  for t in "${gpu_tests[@]}"; do  # each test's own lines (ok/FAIL, measured errors) for the record
    timeout -k 10 600 "$t" > "$report/$(basename "$t").txt" 2>&1
  done
else
  # Meson's test list, run by hand: each executable, then the programs against each other;
  # exit 77 is a skip. A hung kernel must not take the whole lease: a time limit each.
  i=0
  programs=(); [[ -x $attn_train ]] && programs=(programs_test)
  if [[ ${ATTN_GPU_TESTS:-1} != 1 ]]; then  # a list of names: those tests alone
    chosen=()
    for t in "${gpu_tests[@]}" "${programs[@]}"; do
      [[ ,$ATTN_GPU_TESTS, == *,$(basename "$t"),* ]] && chosen+=("$t")
    done
    echo "ATTN_GPU_TESTS=$ATTN_GPU_TESTS: ${#chosen[@]} of $((${#gpu_tests[@]} + ${#programs[@]})) tests" | tee "$report/gpu-suite.txt"
    gpu_tests=("${chosen[@]}")
    programs=()
  fi
  count=$((${#gpu_tests[@]} + ${#programs[@]}))
  for t in "${gpu_tests[@]}" "${programs[@]}"; do
    i=$((i + 1))
    name=$(basename "$t")
    began=$SECONDS
    if [[ $t == programs_test ]]; then
      timeout -k 10 "${ATTN_GPU_PROGRAMS_LIMIT:-900}" python3 tests/gpu/programs_test.py "$attn_train" "$attn_translate" "$bin/gpu_device_query" \
        > "$report/$name.txt" 2>&1
    else
      timeout -k 10 "${ATTN_GPU_TEST_LIMIT:-600}" "$t" > "$report/$name.txt" 2>&1
    fi
    status=$?
    case $status in
      0) verdict=OK ;;
      77) verdict=SKIP ;;
      124|137) verdict="TIMEOUT"; tests_status=1 ;;
      *) verdict="FAIL (exit status $status)"; tests_status=1 ;;
    esac
    printf '%2d/%d %-28s %s %ds\n' "$i" "$count" "$name" "$verdict" $((SECONDS - began)) | tee -a "$report/gpu-suite.txt"
    if [[ $verdict != OK && $verdict != SKIP ]]; then  # the failed checks, then how it ended
      grep -E '^FAIL|rror|what\(\)' "$report/$name.txt" | head -n 40
      tail -n 8 "$report/$name.txt"
    fi
  done
fi
# ATTN_GPU_MEMCHECK=gpu_fused_attention_test,...: those tests again under compute-sanitizer's
# memcheck (out-of-bounds and misaligned accesses, in shared memory too), a report each.
for name in ${ATTN_GPU_MEMCHECK:+${ATTN_GPU_MEMCHECK//,/ }}; do
  t=$(printf '%s\n' "${gpu_tests[@]}" | grep -E "/$name\$" | head -1)
  [[ -n $t ]] || { echo "memcheck: no gpu test $name"; continue; }
  heading "memcheck: $name"
  timeout -k 10 "${ATTN_GPU_TEST_LIMIT:-600}" compute-sanitizer --tool memcheck --error-exitcode 3 "$t" \
    > "$report/memcheck-$name.txt" 2>&1
  status=$?
  echo "memcheck $name: exit status $status (0 clean, 3 errors found, 124 out of time)" | tee -a "$report/gpu-suite.txt"
  grep -E '^=========' "$report/memcheck-$name.txt" | head -n 30
  [[ $status == 0 || $status == 124 ]] || tests_status=1
done
# ATTN_GPU_RACECHECK=1: gpu_fused_attention_test --races (its cases of at most 129 tokens, each
# kernel once), gpu_primitives_test --races (LayerNorm's backward on small cases) and
# gpu_contract_test --races (the small products) under compute-sanitizer's racecheck
# (shared-memory hazards between a block's threads) and synccheck (barriers some threads miss):
# the interleavings the CPU emulator's two fixed orders cannot try.
if [[ ${ATTN_GPU_RACECHECK:-0} == 1 ]]; then
  for name in gpu_fused_attention_test gpu_primitives_test gpu_contract_test; do
    t=$(printf '%s\n' "${gpu_tests[@]}" | grep -E "/$name\$" | head -1)
    for tool in racecheck synccheck; do
      [[ -n $t ]] || { echo "$tool: no $name"; break; }
      heading "$tool: $name --races"
      timeout -k 10 "${ATTN_GPU_RACECHECK_LIMIT:-120}" compute-sanitizer --tool "$tool" --error-exitcode 3 "$t" --races \
        > "$report/$tool-$name.txt" 2>&1
      status=$?
      echo "$tool $name: exit status $status (0 clean, 3 hazards found, 124 or 137 out of time: unchecked)" |
        tee -a "$report/gpu-suite.txt"
      grep -E '^=========' "$report/$tool-$name.txt" | head -n 30
      [[ $status == 0 || $status == 124 || $status == 137 ]] || tests_status=1
    done
  done
fi
test_seconds=$((SECONDS - start))

bench_lines=()
benchmarks=${ATTN_GPU_BENCH:-all}
wants() { [[ $benchmarks != 0 && ( $benchmarks == all || ,$benchmarks, == *,$1,* ) ]]; }

if wants attention; then
  heading "benchmark: attention, attn's fused and unfused against PyTorch's SDPA and FlexAttention (FlashAttention-3's protocol)"
  if [[ -x $attention_gpu ]]; then
    # ATTN_GPU_ATTENTION_ARGS: fewer lengths or types where the lease is short (--help); the
    # CUDA-core kernels (7-28x slower than the tensor-core ones in bf16) up to 2048 only;
    # restricted attention's band of 2 x 128 + 1 keys against FlexAttention's sliding window;
    # ALiBi with learned slopes, its plans evaluated at the scores' coordinates since 2026-11-26;
    # the tensor-core kernels on heads in rows too ([batch, n, heads, d], nn's fused path's);
    # dropout on the weights, whose factor the backward calls out of line since 2026-12-07.
    read -r -a attention_args <<< "${ATTN_GPU_ATTENTION_ARGS:---repeat 5 --flex-lengths 4096 --cuda-cores-max 2048 --window 128 --alibi --heads-in-rows --dropout 0.1}"
    python3 bench/attention_vs_torch.py --attention-gpu "$attention_gpu" "${attention_args[@]}" \
      --json "$report/attention.json" 2>&1 | tee "$report/attention.txt" | grep -v '^{'
    bench_lines+=("attention: $report/attention.txt")
  else
    echo "skipped: no $attention_gpu"
  fi
fi

if wants primitives; then
  # A bias's gradient as it ran until 2026-11-27 (a thread a column) and now (chunks), LayerNorm's
  # backward pass, the embedding gradient, the elementwise kernel a thread an element (until
  # 2026-11-27) and in rounds, and the loss at a vocabulary of 37000, each alone at 8000 and 25000
  # positions.
  heading "benchmark: a training step's memory-bound kernels (primitives_gpu)"
  if [[ -x $primitives_gpu ]]; then
    read -r -a primitives_args <<< "${ATTN_GPU_PRIMITIVES_ARGS:-}"  # e.g. --kernels embedding (--help)
    "$primitives_gpu" "${primitives_args[@]}" 2>&1 | tee "$report/primitives.txt" | grep -v '^{'
    if [[ ${PIPESTATUS[0]} == 0 ]]; then
      bench_lines+=("primitives: $report/primitives.txt")
    else
      bench_lines+=("primitives: failed (see $report/primitives.txt)")
    fi
  else
    echo "skipped: no $primitives_gpu (meson compile -C BUILD primitives_gpu)"
  fi
fi

if wants train; then
  bench_lines+=("training benchmarks' data: $text_label")
  IFS=, read -r -a presets <<< "$models"
  for preset in "${presets[@]}"; do
    if [[ $preset == big ]]; then
      # big: bf16 alone, issue 17's target (model FLOP utilisation above 40 %); in fp32 it
      # would take minutes of the lease.
      bench_lines+=("train big: fp32 left out (bf16 alone)")
    else
      heading "benchmark: training $preset, attn against PyTorch on the GPU (fp32, TF32 off)"
      python3 bench/train_vs_torch.py --device cuda --config "$preset" --steps 60 --skip 10 --batch-tokens "${ATTN_GPU_BATCH_TOKENS:-8000}" \
        --threads 4 --python python3 --attn-train "$attn_train" "${text_options[@]}" --json "$report/train-$preset.json" \
        2>&1 | tee "$report/train-$preset.txt"
      bench_lines+=("train $preset: $(grep -E '^\| attn / PyTorch' "$report/train-$preset.txt" || echo 'failed (see its log)')")
      bench_lines+=("train $preset: $(grep -E '^model TFLOP/s' "$report/train-$preset.txt" || echo 'no model TFLOP/s line')")
    fi
    heading "benchmark: training $preset, attn --precision bf16 against PyTorch autocast bf16 on the GPU"
    python3 bench/train_vs_torch.py --device cuda --config "$preset" --steps 60 --skip 10 --batch-tokens "${ATTN_GPU_BATCH_TOKENS:-8000}" \
      --precision bf16 --threads 4 --python python3 --attn-train "$attn_train" "${text_options[@]}" \
      --attention-path "${ATTN_GPU_TRAIN_ATTENTION:-automatic}" --json "$report/train-$preset-bf16.json" 2>&1 | tee "$report/train-$preset-bf16.txt"
    bench_lines+=("train $preset bf16: $(grep -E '^\| attn / PyTorch' "$report/train-$preset-bf16.txt" || echo 'failed (see its log)')")
    bench_lines+=("train $preset bf16: $(grep -E '^model TFLOP/s' "$report/train-$preset-bf16.txt" || echo 'no model TFLOP/s line')")
  done
fi

if [[ ,$benchmarks, == *,profile,* ]]; then
  # Where a training step's GPU time goes: attn-train in bf16 on ATTN_GPU_TEXT or the toy corpus, batches of
  # ATTN_GPU_BATCH_TOKENS, steps 11-12 inside the capture range (--profile-steps) of Nsight
  # Compute, which times each kernel alone (--clock-control none: the clocks as they run).
  # ATTN_GPU_PROFILE_CONFIGS: the presets profiled (default base), each built in ATTN_GPU_MODELS.
  IFS=, read -r -a profiled <<< "${ATTN_GPU_PROFILE_CONFIGS:-base}"
  for preset in "${profiled[@]}"; do
    heading "profile: attn-train $preset bf16 on $text_label, each kernel's time in steps 11-12 (Nsight Compute)"
    profile=$report/profile-$preset
    text=$report/profile-$preset.txt
    rm -rf "$profile"
    if ! command -v ncu > /dev/null; then
      echo "skipped: no ncu on PATH" | tee "$text"
    elif [[ ,$models, != *,$preset,* ]]; then
      echo "skipped: the $preset preset is not built (ATTN_GPU_MODELS=$models)" | tee "$text"
    elif (( ${#text_options[@]} )) || python3 tests/train/toy_corpus.py --out "$profile/data" --train 20000 --valid 10; then
      data=("${text_options[@]}")
      (( ${#data[@]} )) && data+=(--vocab-size 8000) \
        || data=(--vocab-size 128 --src "$profile/data/train.src" --tgt "$profile/data/train.tgt")
      # ncu writes its CSV to stdout, attn-train its progress to stderr; kernel_times.py skips the
      # lines of stdout that are not CSV (ncu's ==PROF== messages).
      timeout -k 10 "${ATTN_GPU_PROFILE_LIMIT:-300}" ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv --page details \
        --print-units base \
        "$attn_train" --device cuda --precision bf16 --config "$preset" "${data[@]}" \
        --batch-tokens "${ATTN_GPU_BATCH_TOKENS:-8000}" --max-steps 12 --profile-steps 11:12 --valid-every 1000 \
        --save-every 1000 --out "$profile/run" \
        > "$profile/ncu.csv" 2> "$profile/train.txt"
      echo "ncu exit status $? (its output: $profile/ncu.csv; attn-train's log: $profile/train.txt)"
      python3 bench/kernel_times.py "$profile/ncu.csv" --steps 2 --json "$report/profile-$preset.json" 2>&1 \
        | tee "$text"
    else
      echo "failed: the toy corpus" | tee "$text"
    fi
    bench_lines+=("profile $preset: $(head -1 "$text")")
  done
fi

# trainer_pairs NAME RUNS A B: attn-train twice a run, as A and as B (each NAME=SETTING, the setting
# attn-train's options, or VARIABLE=VALUE in its environment), on the same binary, corpus, batches
# and steps; tokens/s over steps 11-40 into $report/NAME.txt. RUNS: PRESET-PRECISION-WORDS,...,
# WORDS the toy corpus's longest sentence (its default is 8; 60 makes sentences of 32 words on
# average, translation's lengths).
trainer_pairs() {
  local name=$1 runs_list=$2 dir=$report/$1 run preset precision longest corpus side label setting word
  local -a runs settings
  shift 2
  rm -rf "$dir" && mkdir -p "$dir"
  IFS=, read -r -a runs <<< "$runs_list"
  for run in "${runs[@]}"; do
    IFS=- read -r preset precision longest <<< "$run"
    if [[ ,$models, != *,$preset,* || -z $precision || ! $longest =~ ^[0-9]+$ ]]; then
      echo "$run: skipped (PRESET-PRECISION-WORDS with a preset of ATTN_GPU_MODELS=$models)"
      continue
    fi
    corpus=$report/data-$longest
    [[ -f $corpus/train.tgt ]] || python3 tests/train/toy_corpus.py --out "$corpus" --train 20000 --valid 10 --longest "$longest" \
      || { echo "$run: failed: the toy corpus"; continue; }
    for side in "$@"; do
      label=${side%%=*} setting=${side#*=}
      read -r -a settings <<< "$setting"
      local -a environment=() options=()
      for word in "${settings[@]}"; do
        if [[ $word == [A-Z]*=* ]]; then environment+=("$word"); else options+=("$word"); fi
      done
      env "${environment[@]}" "$attn_train" --device cuda --precision "$precision" --config "$preset" --vocab-size 128 \
        --batch-tokens "${ATTN_GPU_BATCH_TOKENS:-8000}" --max-steps 40 --valid-every 1000 --save-every 1000 \
        "${options[@]}" --src "$corpus/train.src" --tgt "$corpus/train.tgt" \
        --out "$dir/$run-$label" > "$dir/$run-$label.txt" 2>&1
      rm -f "$dir/$run-$label"/*.safetensors  # checkpoints: gigabytes at big
    done
  done
  python3 - "$dir" "${1%%=*}" "${2%%=*}" "${runs[@]}" <<'PY' | tee "$report/$name.txt"
import json, sys
from pathlib import Path
root, a, b, runs = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
print(f"| preset-precision-longest sentence | {a} tok/s | {b} tok/s | {b} / {a} | loss at step 40, {a} / {b} |")
print("| --- | ---: | ---: | ---: | --- |")
for run in runs:
    rate, loss = {}, {}
    for side in (a, b):
        try:
            steps = [json.loads(l) for l in (root / f"{run}-{side}" / "metrics.jsonl").read_text().splitlines()]
            steps = [r for r in steps if r["kind"] == "train"]
            timed = [r for r in steps if r["step"] > 10]
            rate[side] = sum(r["tokens"] for r in timed) / (timed[-1]["elapsed_s"] - steps[9]["elapsed_s"])
            loss[side] = steps[-1]["loss"]
        except (OSError, ValueError, KeyError, IndexError):
            rate[side], loss[side] = float("nan"), float("nan")
    print(f"| {run} | {rate[a]:.0f} | {rate[b]:.0f} | {rate[b] / rate[a]:.3f} | {loss[a]:.4f} / {loss[b]:.4f} |")
PY
}

if [[ ,$benchmarks, == *,paths,* ]]; then
  # The trainer's two attention paths: the fused kernel against products and a softmax.
  heading "benchmark: attn-train, fused attention against products and a softmax"
  trainer_pairs paths "${ATTN_GPU_PATHS:-base-bf16-8,base-bf16-60}" \
    "unfused=--attention-path unfused" "fused=--attention-path fused"
  bench_lines+=("attention paths: $report/paths.txt")
fi

if [[ ,$benchmarks, == *,short,* ]]; then
  # Sentences of a few words, where a block of the fused kernels had taken one sentence's rows
  # of 64; with the heads in rows the tensor-core kernels take several (block_sentences, since
  # 2026-12-07's third session; never run on a GPU before this). Up to 512 tokens beside the
  # unfused path: nn's automatic choice takes the kernel from 512 keys in 16 bits
  # (fused_attention<cuda>::automatic_from_keys), and no run has compared the two below that.
  heading "benchmark: attention at a translation's lengths, short sentences several a block and one a block"
  if [[ -x $attention_gpu ]]; then
    python3 bench/attention_vs_torch.py --attention-gpu "$attention_gpu" --lengths 10,16,32,64,128,256,512 \
      --flex-lengths "" --types bf16 --tokens 8192 --cuda-cores-max 0 --unfused-max 512 --heads-in-rows --repeat 10 \
      --json "$report/short.json" 2>&1 | tee "$report/short.txt" | grep -v '^{'
    bench_lines+=("attention at short lengths: $report/short.txt")
  else
    echo "skipped: no $attention_gpu"
  fi
fi

if [[ ,$benchmarks, == *,packing,* ]]; then
  # The fused path in whole training steps, short sentences several a block against one a block.
  heading "benchmark: attn-train --attention-path fused, short sentences several a block against one a block"
  trainer_pairs packing "${ATTN_GPU_PACKING:-base-bf16-8,big-bf16-8}" \
    "one=--attention-path fused ATTN_FUSED_PACKING=0" "packed=--attention-path fused"
  bench_lines+=("short sentences packed: $report/packing.txt")
fi

if [[ ,$benchmarks, == *,vectors,* ]]; then
  # The generated elementwise kernel an element a thread against a run of 16 bytes a thread
  # (cuda/attn/cuda/elementwise_vectors.cuh), in whole training steps.
  heading "benchmark: attn-train, the elementwise kernel by elements against by runs"
  trainer_pairs vectors "${ATTN_GPU_VECTORS:-base-bf16-8,big-bf16-8}" \
    "elements=ATTN_ELEMENTWISE_VECTORS=0" "runs=ATTN_ELEMENTWISE_VECTORS=1"
  bench_lines+=("elementwise runs: $report/vectors.txt")
fi

if [[ ,$benchmarks, == *,small,* ]]; then
  # Attention's products at a few words on cuBLAS against attn's kernel for small products
  # (cuda/attn/cuda/small_products.cuh), in whole training steps.
  heading "benchmark: attn-train, small products on cuBLAS against attn's kernel"
  trainer_pairs small "${ATTN_GPU_SMALL:-base-bf16-8,big-bf16-8,base-bf16-60}" \
    "cublas=ATTN_SMALL_PRODUCTS=0" "attn=ATTN_SMALL_PRODUCTS=1"
  bench_lines+=("small products: $report/small.txt")
fi

if wants nccl; then
  # The NCCL communicator's cost at one rank: attn-train --gpus 1 (a supervised worker, its sums
  # through NCCL) against the plain run, the same 200 steps of the tiny preset.
  heading "benchmark: attn-train --gpus 1 (NCCL, one rank) against one plain process"
  nccl_runs=$report/nccl
  rm -rf "$nccl_runs"
  if [[ ,$models, == *,tiny,* ]] && python3 tests/train/toy_corpus.py --out "$nccl_runs/data" --train 4000 --valid 10; then
    for how in plain gpus1; do
      extra=(); [[ $how == gpus1 ]] && extra=(--gpus 1)
      "$attn_train" --device cuda --precision bf16 --config tiny --vocab-size 128 --batch-tokens 4000 \
        --max-steps 200 --valid-every 1000 --save-every 1000 --src "$nccl_runs/data/train.src" \
        --tgt "$nccl_runs/data/train.tgt" --out "$nccl_runs/$how" "${extra[@]}" > "$nccl_runs/$how.txt" 2>&1
    done
    python3 - "$nccl_runs" <<'PY' | tee "$report/nccl.txt"
import json, sys
from pathlib import Path
rates = {}
for how in ("plain", "gpus1"):
    steps = [json.loads(l) for l in (Path(sys.argv[1]) / how / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in steps if r["kind"] == "train"]
    timed = [r for r in steps if r["step"] > 50]
    rates[how] = sum(r["tokens"] for r in timed) / (timed[-1]["elapsed_s"] - steps[49]["elapsed_s"])
print(f"tokens/s over steps 51-200: plain {rates['plain']:.0f}, --gpus 1 {rates['gpus1']:.0f}, "
      f"ratio {rates['gpus1'] / rates['plain']:.3f}")
PY
  else
    echo "skipped: needs the tiny preset" | tee "$report/nccl.txt"
  fi
  bench_lines+=("NCCL at one rank: $(tail -1 "$report/nccl.txt")")
fi

if wants decode; then
  # Decoding needs a trained model: the tiny preset on the toy corpus, 600 steps on the GPU.
  heading "benchmark: decoding (greedy, beam 4), attn-translate against a PyTorch key/value-cache decoder on the GPU"
  toy=$report/toy
  rm -rf "$toy"  # a fresh run each time (attn-train refuses an --out that holds checkpoints)
  if [[ ,$models, != *,tiny,* ]]; then
    echo "skipped: the decoding benchmark trains the tiny preset, which ATTN_GPU_MODELS=$models leaves out" \
      | tee "$report/decode.txt"
  else
    python3 tests/train/toy_corpus.py --out "$toy/data" --train 4000 --valid 500 \
      && "$attn_train" --device cuda --precision fp32 --config tiny --vocab-size 128 --batch-tokens 2000 --max-steps 600 \
           --src "$toy/data/train.src" --tgt "$toy/data/train.tgt" --out "$toy/run" > "$report/decode-train.txt" 2>&1 \
      && python3 bench/decode_vs_torch.py --device cuda --run "$toy/run" --input "$toy/data/valid.src" --threads 4 \
           --python python3 --translate "$attn_translate" --repeat 3 --json "$report/decode.json" \
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
  grep -E '^ *[0-9]+/[0-9]+ |^(memcheck|racecheck|synccheck) ' "$report/gpu-suite.txt" | sed 's/^/    /'
  echo
  for line in "${bench_lines[@]}"; do echo "- $line"; done
} > "$summary"
heading "summary ($summary)"
cat "$summary"
exit "$tests_status"
