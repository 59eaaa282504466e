#!/usr/bin/env bash
# The main job: builds attn's programs, extracts the English -> Spanish Bible corpus from the
# SWORD modules Debian packages (examples/data/bible.py), trains a small translation model on
# the CPU for a bounded time with the paper's recipe, averages its last 5 checkpoints, translates
# the held-out test verses greedily and with beam 4 (paper §6.1), and reports the validation
# perplexity, BLEU (with its brevity penalty and length ratio) and chrF.
# Works from any directory. Settings through the environment:
#   ATTN_MINUTES  training budget in minutes (default 12; BPE and data come on top, ~1 min)
#   ATTN_THREADS  threads (default: every core)
#   ATTN_RUN      run directory (default runs/bible-en-es; an old one is moved aside)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh" "$@"
(( $# == 0 )) || { echo "$(basename "$0"): takes no arguments (settings through the environment; --help says what it does)" >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."
attn_extra_packages=(sword-text-web sword-text-sparv libsword-utils)
source scripts/deps.sh

heading() { printf '\n=== %s\n' "$*"; }

minutes=${ATTN_MINUTES:-12}
threads=${ATTN_THREADS:-$(nproc)}
run=${ATTN_RUN:-runs/bible-en-es}

heading "configure (build/)"
if [[ -d build/meson-private ]]; then
  meson setup --reconfigure build
else
  # Only the preset trained here: each preset is two translation units of over a minute.
  # `meson configure build -Dexample_models=tiny,small,base,big` adds the others.
  meson setup build -Dexample_models=tiny
fi
heading "compile (build/: attn-train, attn-average, attn-translate)"
meson compile -C build attn-train attn-average attn-translate

heading "corpus: English (WEB) -> Spanish (Reina-Valera 1909), verse-aligned"
if [[ -f data/bible/report.txt ]]; then
  echo "data/bible/ is there (delete it to extract again):"
  grep -E "^(aligned|dropped|  (train|valid|test):)" data/bible/report.txt || true
else
  python3 examples/data/bible.py --out data/bible
fi

if [[ -e $run ]]; then
  old="$run.$(date +%Y%m%d-%H%M%S)"
  echo "moving the previous run aside: $run -> $old"
  mv "$run" "$old"
fi

heading "train: tiny Transformer (d_model 128, d_ff 512, h 4, N 2), $minutes minutes on $threads thread(s)"
# The paper's recipe scaled to a CPU: 2 000-token batches instead of 25 000, a shorter warmup
# for a run of about two thousand steps, a vocabulary sized for 28 000 verse pairs.
status=0
build/examples/attn-train \
  --src data/bible/train.en --tgt data/bible/train.es \
  --valid-src data/bible/valid.en --valid-tgt data/bible/valid.es \
  --config tiny --vocab-size 4000 --max-length 128 \
  --batch-tokens 2000 --warmup 800 \
  --max-minutes "$minutes" --valid-every 250 --save-every 250 --log-every 50 \
  --threads "$threads" --out "$run" --plot || status=$?
if (( status != 0 )); then
  echo "attn-train stopped with status $status" >&2
  exit "$status"
fi

heading "average the last 5 checkpoints (paper §6.1)"
build/examples/attn-average --run "$run" --last 5

heading "translate the held-out test verses (Ruth, Ecclesiastes, Jonah, John)"
for search in greedy beam4; do
  if [[ $search == greedy ]]; then flags=(--greedy); else flags=(--beam 4 --alpha 0.6 --samples 6); fi
  echo "--- $search"
  build/examples/attn-translate --checkpoint "$run/averaged.safetensors" --vocab "$run/vocab.model" \
    --input data/bible/test.en --bleu data/bible/test.es "${flags[@]}" --threads "$threads" \
    --output "$run/test.$search.es" --scores "$run/test.$search.json"
done

heading "report"
python3 - "$run" <<'EOF'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
train = [r for r in records if r["kind"] == "train"]
valid = [r for r in records if r["kind"] == "valid"]
last = train[-1]
print(f"steps: {last['step']} in {last['elapsed_s'] / 60:.1f} min, "
      f"{sum(r['tokens'] for r in train) / last['elapsed_s']:.0f} target tokens/s")
print(f"training loss: {train[0]['loss']:.3f} at step 1 -> {last['loss']:.3f} at step {last['step']}")
for r in valid:
    print(f"validation at step {r['step']:>5}: loss {r['loss']:.3f}, perplexity {r['ppl']:.2f}")
sentences = json.loads((run / "test.greedy.json").read_text())["sentences"]
print(f"test verses ({sentences:,}, averaged model), BLEU and chrF as sacreBLEU computes them:")
print(f"  {'search':<8} {'BLEU':>6} {'BP':>6} {'ratio':>6} {'chrF':>6} {'sent/s':>7}")
for search in ("greedy", "beam4"):
    s = json.loads((run / f"test.{search}.json").read_text())
    print(f"  {search:<8} {s['bleu']:6.2f} {s['brevity_penalty']:6.3f} {s['length_ratio']:6.3f} "
          f"{s['chrf']:6.2f} {s['sentences_per_second']:7.1f}")
print(f"run directory: {run} (checkpoints, vocab.model, metrics.jsonl, training.png, averaged.safetensors,")
print("  test.greedy.es, test.beam4.es and their scores)")
EOF
