#!/usr/bin/env bash
# Quality per attention variant, like the paper's Table 3: trains the tiny preset with each
# variant on the Bible corpus of scripts/main.sh (built first by it or by this script) for the
# same number of steps, averages the last 5 checkpoints, and prints validation perplexity and
# test BLEU, greedy and beam 4, as a Markdown table. Steps, not minutes, are the budget: the
# variants run at different speeds, and a step budget does not depend on what else the machine
# is doing. Run again after a stop: finished variants are skipped, a stopped one resumes from its
# newest checkpoint. Settings through the environment:
#   ATTN_STEPS     steps a variant (default 1500)
#   ATTN_WARMUP    warmup_steps of eq. (3) (default: half the steps)
#   ATTN_VARIANTS  space-separated "NAME[:ARG][+none]" (+none: no positional encoding)
#                  (default: "scaled unscaled additive restricted:9 alibi+none alibi:learned+none")
#   ATTN_THREADS   threads (default: every core)
#   ATTN_RUNS      where the runs go (default runs/variants)
#   ATTN_BUILD     the build directory with the programs (default build)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

steps=${ATTN_STEPS:-1500}
warmup=${ATTN_WARMUP:-$((steps / 2))}
variants=${ATTN_VARIANTS:-"scaled unscaled additive restricted:9 alibi+none alibi:learned+none"}
threads=${ATTN_THREADS:-$(nproc)}
runs=${ATTN_RUNS:-runs/variants}
build=${ATTN_BUILD:-build}

if [[ ! -d $build/meson-private || ! -f data/bible/train.en ]]; then
  echo "$build/ or data/bible/ is missing: run scripts/main.sh once first (ATTN_MINUTES=1 is enough)" >&2
  exit 1
fi
meson compile -C "$build" attn-train attn-average attn-translate >/dev/null
mkdir -p "$runs"
table="$runs/table.md"

for variant in $variants; do
  spec=${variant%+none}
  positions=sinusoidal
  [[ $variant == *+none ]] && positions=none
  run="$runs/${variant//[:+]/_}"
  if [[ -f $run/test.beam4.json ]]; then
    echo "=== $variant: done before ($run)"
    continue
  fi
  if [[ ! -f $run/averaged.safetensors ]]; then
    resume=()
    if compgen -G "$run/checkpoint-*.safetensors" >/dev/null; then
      resume=(--resume)  # a run stopped (Ctrl-C, the end of a session) goes on where it stopped
      echo "=== $variant: resuming $run"
    else
      rm -rf "$run"
      echo "=== $variant: $steps steps, $positions positions"
    fi
    vocab=()  # one BPE vocabulary for all: the first run trains it
    [[ -f $runs/vocab.model ]] && vocab=(--vocab "$runs/vocab.model")
    "$build"/examples/attn-train \
      --src data/bible/train.en --tgt data/bible/train.es \
      --valid-src data/bible/valid.en --valid-tgt data/bible/valid.es \
      "${vocab[@]}" --config tiny --vocab-size 4000 --max-length 128 --batch-tokens 2000 --warmup "$warmup" \
      --attention "$spec" --positions "$positions" --max-steps "$steps" \
      --valid-every "$steps" --save-every 100 --log-every 250 --threads "$threads" --out "$run" "${resume[@]}"
    [[ -f $runs/vocab.model ]] || cp "$run/vocab.model" "$runs/vocab.model"
    "$build"/examples/attn-average --run "$run" --last 5
  fi
  for search in greedy beam4; do
    if [[ $search == greedy ]]; then flags=(--greedy); else flags=(--beam 4 --alpha 0.6); fi
    "$build"/examples/attn-translate --checkpoint "$run/averaged.safetensors" --vocab "$run/vocab.model" \
      --input data/bible/test.en --bleu data/bible/test.es "${flags[@]}" --threads "$threads" --quiet \
      --output "$run/test.$search.es" --scores "$run/test.$search.json"
  done
done

python3 - "$runs" "$steps" "$warmup" $variants <<'PY' | tee "$table"
import json, sys
from pathlib import Path
runs, steps, warmup, variants = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
print(f"tiny preset (d_model 128, h 4, N 2), {steps} steps of 2000-token batches (warmup {warmup}), "
      "last 5 checkpoints averaged")
print()
print("| attention | positions | valid perplexity | BLEU greedy | BLEU beam 4 | train tokens/s (median step) |")
print("|---|---|---|---|---|---|")
for variant in variants:
    run = runs / variant.replace(":", "_").replace("+", "_")
    records = [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]
    valid = [r for r in records if r["kind"] == "valid"][-1]
    train = [r for r in records if r["kind"] == "train"]
    # the median step's rate: a run that resumed or was paused (elapsed_s restarts, or jumps)
    # counts only the steps it took
    rates = sorted(r["tokens_per_s"] for r in train)
    tokens = rates[len(rates) // 2]
    greedy = json.loads((run / "test.greedy.json").read_text())
    beam = json.loads((run / "test.beam4.json").read_text())
    spec, _, none = variant.partition("+")
    print(f"| {spec} | {'none' if none else 'sinusoidal'} | {valid['ppl']:.2f} | "
          f"{greedy['bleu']:.2f} | {beam['bleu']:.2f} | {tokens:.0f} |")
PY
echo "table: $table"
