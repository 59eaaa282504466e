#!/usr/bin/env python3
"""Regenerates tests/train/parity_fixture.json: PyTorch's training from attn-train's initial
weights and batches, which tests/train/parity_test.py compares attn-train against.

attn-train (--max-steps 0) writes the vocabulary and the initial weights of the test's run;
PyTorch (bench/torch_reference.py's model with attn's parameters, loaded from that checkpoint)
trains on attn-train's batches in attn-train's order with attn's recipe (bench/parity_vs_torch.py's
loop: label smoothing 0.1, Adam 0.9/0.98/1e-9, equation (3)) for the test's steps, dropout 0,
and the fixture keeps every step's loss, the validation perplexity at the end and the
fingerprints of the vocabulary and weights it started from.

Needs a python3 with torch and sentencepiece (the system /usr/bin/python3 with Debian's
python3-torch and python3-sentencepiece).

    /usr/bin/python3 tests/train/make_parity_fixture.py BUILD/examples/attn-train [--threads 2]
"""

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent / "bench"))
import parity_test  # noqa: E402
from parity_vs_torch import TorchSide  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("attn_train", type=Path, help="the attn-train program")
    p.add_argument("--threads", type=int, default=2, help="PyTorch's threads (default: 2)")
    p.add_argument("--out", type=Path, default=parity_test.FIXTURE, help="the fixture (default: %(default)s)")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="attn-parity-fixture-"))
    try:
        files = parity_test.write_corpus(work)
        initial = parity_test.attn_train(args.attn_train.resolve(), files, work / "init", "--max-steps", 0)
        option = dict(zip(parity_test.TRAINING[0::2], parity_test.TRAINING[1::2]))
        side_args = argparse.Namespace(threads=args.threads, max_length=int(option["--max-length"]),
                                       config=option["--config"], batch_tokens=int(option["--batch-tokens"]),
                                       warmup=int(option["--warmup"]), lr_scale=float(option["--lr-scale"]))
        side = TorchSide(side_args, initial / "vocab.model", *files)
        model = side.model(initial / "checkpoint-00000000.safetensors", dropout=0.0)
        started = time.perf_counter()
        losses, valid = side.train(model, int(option["--seed"]), parity_test.STEPS, parity_test.STEPS)
        fixture = {
            "what": "PyTorch's training from attn-train's initial weights and batches: tests/train/parity_test.py",
            "made_by": "tests/train/make_parity_fixture.py",
            "date": time.strftime("%Y-%m-%d"),
            "torch": {"version": side.torch.__version__, "threads": args.threads,
                      "machine": parity_test.machine.describe(),
                      "seconds": round(time.perf_counter() - started, 1),
                      "losses": losses, "valid_ppl": valid[-1][1]},
            "training": parity_test.TRAINING + ["--max-steps", str(parity_test.STEPS)],
            "fingerprints": parity_test.fingerprints(initial),
        }
        args.out.write_text(json.dumps(fixture, indent=1) + "\n")
        print(f"wrote {args.out}: {len(losses)} losses, {losses[0]:.4f} -> {losses[-1]:.4f}, "
              f"validation perplexity {valid[-1][1]:.4f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
