#!/usr/bin/env bash
# Fills a directory with what scripts/gpu.sh needs on a GPU machine that lacks attn's Debian
# packages: the header-only libraries (Eigen, doctest, CLI11, nlohmann-json), SentencePiece and
# libpng (headers and shared libraries), with relocatable pkg-config files. Run it on a machine
# that has the packages (it installs them, as scripts/test.sh does), copy the directory over,
# and run `ATTN_DEPS=DIR scripts/gpu.sh` there. Also the Python module sentencepiece for the
# GPU machine's Python (ATTN_DEPS_PYTHON, default 3.12), from PyPI, for the benchmarks' PyTorch
# side. docs/gpu.md.
#
#   scripts/gpu-deps.sh [DIR]      DIR defaults to $ATTN_DEPS, else deps/ (git-ignored)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh" "$@"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/deps.sh
dir=${1:-${ATTN_DEPS:-deps}}
lib=/usr/lib/$(gcc -print-multiarch)
rm -rf "$dir"
mkdir -p "$dir/include" "$dir/lib/pkgconfig"

cp -r /usr/include/eigen3 /usr/include/doctest /usr/include/CLI /usr/include/nlohmann "$dir/include/"
cp /usr/include/sentencepiece_processor.h /usr/include/sentencepiece_trainer.h "$dir/include/"
cp -r /usr/include/libpng16 "$dir/include/"
cp -P "$lib"/libsentencepiece.so* "$lib"/libsentencepiece_train.so* "$lib"/libpng16.so* "$dir/lib/"

# pkg-config files that find their files beside themselves (${pcfiledir}), wherever DIR goes.
pc() {  # pc NAME VERSION CFLAGS LIBS
  cat > "$dir/lib/pkgconfig/$1.pc" <<PC
prefix=\${pcfiledir}/../..
includedir=\${prefix}/include
libdir=\${prefix}/lib

Name: $1
Description: $1, copied by attn's scripts/gpu-deps.sh
Version: $2
Cflags: $3
Libs: $4
PC
}
pc eigen3 "$(pkg-config --modversion eigen3)" '-I${includedir}/eigen3' ''
pc doctest "$(dpkg-query -W -f='${Version}' doctest-dev | sed 's/-.*//')" '-I${includedir}' ''
pc CLI11 "$(pkg-config --modversion CLI11)" '-I${includedir}' ''
pc nlohmann_json "$(pkg-config --modversion nlohmann_json)" '-I${includedir}' ''
pc sentencepiece "$(pkg-config --modversion sentencepiece)" '-I${includedir}' \
  '-L${libdir} -Wl,-rpath,${libdir} -lsentencepiece -lsentencepiece_train'
pc libpng "$(pkg-config --modversion libpng)" '-I${includedir}/libpng16' '-L${libdir} -Wl,-rpath,${libdir} -lpng16'

# The benchmarks' PyTorch side reads the vocabulary with the sentencepiece module: its wheel
# for the GPU machine's Python, unpacked so that PYTHONPATH=DIR/python imports it.
python_version=${ATTN_DEPS_PYTHON:-3.12}
wheels=$(mktemp -d)
if python3 -m pip download sentencepiece --only-binary=:all: --python-version "$python_version" \
     --platform manylinux2014_x86_64 --no-deps -q -d "$wheels"; then
  mkdir -p "$dir/python"
  python3 -m zipfile -e "$wheels"/sentencepiece-*.whl "$dir/python"
else
  echo "gpu-deps: warning: no sentencepiece wheel for Python $python_version from PyPI; the PyTorch side of the" \
       "benchmarks then needs the module installed on the GPU machine" >&2
fi
rm -rf "$wheels"

echo "gpu-deps: $(du -sh "$dir" | cut -f1) in $dir; on the GPU machine: ATTN_DEPS=$dir scripts/gpu.sh"
