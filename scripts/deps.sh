# shellcheck shell=bash
# Sourced by scripts/main.sh and scripts/test.sh: makes sure the Debian packages
# attn needs are installed (plus any the caller lists in attn_extra_packages), and
# puts nvcc on PATH when the CUDA toolkit is in /usr/local/cuda. Prints nothing when everything is already there.

attn_packages=(
  meson ninja-build g++ pkg-config cmake python3
  libeigen3-dev doctest-dev libbenchmark-dev libopenblas-openmp-dev libdnnl-dev
  # the trainer and the translator: subwords, command line, checkpoint headers, MPI, plots, PNG
  libsentencepiece-dev libcli11-dev nlohmann-json3-dev libopenmpi-dev openmpi-bin gnuplot-nox libpng-dev
  "${attn_extra_packages[@]}"
)

attn_missing=()
for attn_pkg in "${attn_packages[@]}"; do
  if [[ $(dpkg-query -W -f='${Status}' "$attn_pkg" 2>/dev/null || true) != "install ok installed" ]]; then
    attn_missing+=("$attn_pkg")
  fi
done

if (( ${#attn_missing[@]} > 0 )); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "==> installing missing packages: ${attn_missing[*]}"
    apt-get update -q
    echo "DEBIAN_FRONTEND=noninteractive apt-get install -y -q ${attn_missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${attn_missing[@]}"
  else
    echo "missing packages; install them with:" >&2
    echo "sudo apt-get install ${attn_missing[*]}" >&2
    exit 1
  fi
fi
unset attn_pkg attn_missing attn_packages attn_extra_packages

if [[ -d /usr/local/cuda/bin && :$PATH: != *:/usr/local/cuda/bin:* ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
