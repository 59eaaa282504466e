# Sourced by the bench/*_sass.sh scripts: puts cuobjdump and nvdisasm on PATH, from the CUDA
# toolkit or else from PyPI's wheels, fetched once into build-bench/tools. Needs $here (the tree
# the scripts live in).
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
