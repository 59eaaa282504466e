# Sourced by the bench/*_sass.sh scripts: puts cuobjdump and nvdisasm on PATH, from the CUDA
# toolkit or else from PyPI's wheels, fetched once into build-bench/tools, and defines sass_of.
# Needs $here (the tree the scripts live in) and $tree (the attn tree they compile).
export PATH=$PATH:/usr/local/cuda/bin
if ! command -v cuobjdump > /dev/null || ! command -v nvdisasm > /dev/null; then
  tools=$here/build-bench/tools
  if [ ! -x "$tools/nvidia/cu13/bin/nvdisasm" ]; then
    echo "fetching cuobjdump and nvdisasm (PyPI: nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) into $tools" >&2
    mkdir -p "$tools"
    python3 -m pip download --quiet --no-deps nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm -d "$tools"
    for wheel in "$tools"/nvidia_cuda_cuobjdump-*.whl "$tools"/nvidia_cuda_nvdisasm-*.whl; do
      python3 -m zipfile -e "$wheel" "$tools"
    done
    chmod +x "$tools"/nvidia/cu13/bin/*
  fi
  export PATH=$tools/nvidia/cu13/bin:$PATH
fi

# sass_of SOURCE: compiles bench/SOURCE for sm_90 against the attn tree $tree into
# $work/probe.cubin (ptxas's report in $work/ptxas.txt) and disassembles it into $work/probe.sass.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sass_of() {
  nvcc -std=c++20 --expt-relaxed-constexpr -arch=sm_90 -O3 -I"$tree/cuda" -I"$tree/include" -isystem /usr/include/eigen3 \
    -Xptxas -v -cubin -o "$work/probe.cubin" "$here/bench/$1" 2> "$work/ptxas.txt" \
    || { cat "$work/ptxas.txt" >&2; exit 1; }
  grep -i 'warning' "$work/ptxas.txt" >&2 || true  # ptxas's report holds nvcc's warnings too
  cuobjdump -sass "$work/probe.cubin" > "$work/probe.sass"
}
