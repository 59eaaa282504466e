#!/bin/sh
# Counts the sm_90 SASS instructions of one score's modification (bench/score_modification_sass.cu):
# ALiBi and a soft cap, the forward's work a score and the dQ kernel's, each less the baseline
# kernel's. Needs nvcc; cuobjdump and nvdisasm come from the CUDA toolkit, or else from PyPI's
# wheels, fetched once into build-bench/tools. Nothing runs on a GPU.
#   usage: bench/score_modification_sass.sh [path to the attn tree, default: this one]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
tree=${1:-$here}
. "$here/bench/sass_tools.sh"
sass_of score_modification_sass.cu
python3 - "$work/probe.sass" <<'PY'
import re, subprocess, sys
counts, name = {}, None
for line in open(sys.argv[1]):
    function = re.match(r'\s+Function : (\S+)', line)
    if function:
        name = subprocess.run(['c++filt', function.group(1)], capture_output=True, text=True).stdout.strip()
        counts[name] = 0
    elif name and re.match(r'\s+/\*[0-9a-f]{4}\*/\s+[A-Z@]', line) and ' NOP' not in line and 'BRA 0x' not in line:
        counts[name] += 1
base = next(c for n, c in counts.items() if 'baseline' in n)
print(f'baseline kernel: {base} instructions')
for n, c in sorted(counts.items()):
    if 'baseline' in n: continue
    kind = 'soft cap' if 'tanh' in n else 'ALiBi'
    work = 'score' if 'score<' in n else 'gradient'
    print(f'{kind:8s} {work:8s} {c - base:5d} instructions beyond the baseline')
PY
