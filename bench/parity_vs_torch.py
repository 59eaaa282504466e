#!/usr/bin/env python3
"""Does attn-train learn what PyTorch learns, step for step? Same weights, same batches.

Four checks. The first three start both sides from the same initial weights: attn-train saves
its initialisation (--max-steps 0), and the PyTorch model (bench/torch_reference.py, like_attn:
attn's parameters, dropout on embeddings and residuals only) loads it. The fourth starts each
side from its own.

1. gradients: the first step's gradient of every parameter, in float, at the real sizes and
   thread count. attn's comes from its checkpoint after one step: Adam's first moment after
   one step is (1 − β1)·g, so g = adam.m / 0.1 (to float rounding). The reference is PyTorch's
   gradient in double: for each parameter, the relative L2 error ‖g − g_double‖ / ‖g_double‖
   of attn's and of PyTorch's in float. attn's must stay below 1e-4 or within 4 times
   PyTorch's (a ReLU input near 0 rounds to either side, so a float gradient may be off by
   1e-4 in a layer, on either side).
2. losses: --steps steps with dropout 0 on both sides, the same batches in the same order
   (bench/train_vs_torch.py's port of attn's batching); every step's training loss must agree
   to --loss-tolerance (relative). Both sides round differently, and training amplifies it:
   the difference grows from 1e-7 at step 1, so the tolerance is loose, yet any real
   difference (a wrong gradient, Adam, schedule, loss, mask or batch) moves the loss by far
   more within a few steps.
3. curves (--curve-steps N): dropout on (--dropout), --seeds seeds a side, each seed its own
   initialisation (both sides start from attn's for that seed; --torch-init own: PyTorch's
   from its own; attn-qkv-half, attn-ffn-bias: issue 14's ablations, from attn's with W^Q, W^K,
   W^V of both attentions scaled by sqrt(1/2), or with nn.Linear's FFN biases), batches and dropout masks (PyTorch draws its own); the validation
   perplexity every --valid-every steps. Reported:
   each side's range over the seeds at every validation, and where the ranges part.
4. budget (--budget-minutes M): issue 14's comparison. Each side trains M minutes (wall
   clock, validations included) from its own initialisation, dropout 0.1, seed 1; PyTorch's
   model is then written as an attn checkpoint (torch_reference.save_attn), and attn-translate
   translates the test set with each (beam 4, alpha 0.6), so the search is the same code and
   only the training differs. A table (steps, target tokens/s, validation perplexity, BLEU,
   chrF) and, with --plot FILE.png, both validation curves (gnuplot).

Data (--corpus): bible (data/bible from examples/data/bible.py), short (the Bible's verses cut
into clauses at , ; : where both sides have as many clauses, so sentences of a few words), or
--src/--tgt/--valid-src/--valid-tgt.

Runs under a python3 with torch and sentencepiece (the system /usr/bin/python3 with Debian's
python3-torch python3-sentencepiece); attn-train built (build/examples/attn-train, with the
--config preset compiled in: meson configure build -Dexample_models=tiny,small).

    /usr/bin/python3 bench/parity_vs_torch.py [--corpus bible|short] [--config small]
        [--steps 200] [--curve-steps 1000 --seeds 3] [--budget-minutes 15 --plot FILE.png]
        [--skip-checks] [--json FILE] [--work DIR]
Exit status: 0 when the gradients and the losses agree, 1 when they do not (or on an error).
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "tests" / "train"))
from torch_reference import CONFIGS  # noqa: E402
from train_vs_torch import PAD, encode_pairs, epoch_order, make_batch, noam_rate, plan_batches, read_lines  # noqa: E402

GRADIENT_TOLERANCE = 1e-4  # relative L2 against double, per parameter: attn's float gives about 1e-5
BETA1 = 0.9                # attn::train::adam_options


def fail(message):
    sys.exit(f"parity_vs_torch: {message}")


def say(message):
    print(message, flush=True)


# --- data ----------------------------------------------------------------------------------

CLAUSE_END = re.compile(r"(?<=[,;:])\s+")


def clauses(line):
    return [c.strip() for c in CLAUSE_END.split(line) if c.strip()]


def make_short_corpus(bible, out):
    """Verse clauses: each verse cut after , ; : and the pieces paired in order when both
    sides have as many; verses whose counts differ are dropped. Returns the six paths
    (train, valid, test; source then target)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split in ("train", "valid", "test"):
        english, spanish = read_lines(bible / f"{split}.en"), read_lines(bible / f"{split}.es")
        pairs = []
        for e, s in zip(english, spanish):
            a, b = clauses(e), clauses(s)
            if len(a) == len(b) and len(a) > 1:
                pairs += zip(a, b)
        for side, index in (("src", 0), ("tgt", 1)):
            path = out / f"{split}.{side}"
            path.write_text("".join(p[index] + "\n" for p in pairs))
            paths[f"{split}_{side}"] = path
        words = sum(len(p[0].split()) for p in pairs) / max(len(pairs), 1)
        say(f"short corpus, {split}: {len(pairs)} clause pairs from {len(english)} verses, "
            f"{words:.1f} English words a clause")
    return tuple(paths[f"{split}_{side}"] for split in ("train", "valid", "test") for side in ("src", "tgt"))


# --- the attn side -------------------------------------------------------------------------

class AttnTrain:
    def __init__(self, args, src, tgt, valid_src, valid_tgt, work):
        self.program, self.work = args.attn_train, work
        self.common = ["--src", src, "--tgt", tgt, "--config", args.config, "--batch-tokens", args.batch_tokens,
                       "--warmup", args.warmup, "--threads", args.threads, "--max-length", args.max_length]
        self.valid = ["--valid-src", valid_src, "--valid-tgt", valid_tgt]
        self.vocab = None

    def run(self, name, *options):
        out = self.work / name
        command = [self.program] + self.common + (["--vocab", self.vocab] if self.vocab else []) + list(options)
        command += ["--out", out]
        started = time.perf_counter()
        done = subprocess.run([str(c) for c in command], capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"attn-train failed (exit status {done.returncode}):\n  "
                 + "\n  ".join(done.stderr.strip().splitlines()[-12:]))
        say(f"  attn-train {name}: {time.perf_counter() - started:.0f} s")
        return out

    @staticmethod
    def metrics(out):
        return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]


def read_checkpoint(path, prefix):
    """The float32 tensors of an attn checkpoint whose names start with prefix, as torch tensors."""
    import safetensors_read
    import torch
    _, stored = safetensors_read.load(path)
    tensors = {}
    for name, (dtype, shape, data) in stored.items():
        if name.startswith(prefix):
            if dtype != "F32":
                fail(f"{path}: '{name}' is {dtype}, not F32")
            tensors[name[len(prefix):]] = torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(shape)
    return tensors


# --- the PyTorch side ----------------------------------------------------------------------

class TorchSide:
    def __init__(self, args, vocab_model, src, tgt, valid_src, valid_tgt):
        import sentencepiece
        import torch
        self.torch, self.args = torch, args
        torch.set_num_threads(args.threads)
        processor = sentencepiece.SentencePieceProcessor(model_file=str(vocab_model))
        self.vocab = processor.get_piece_size()
        self.train_pairs, _ = encode_pairs(src, tgt, processor, args.max_length)
        self.valid_pairs, _ = encode_pairs(valid_src, valid_tgt, processor, args.max_length)

    def model(self, initial, dropout):
        """The like_attn model with attn's initial weights, or (initial None) with PyTorch's own
        initialisation: nn.Transformer's Xavier over each matrix (the fused query/key/value
        in_proj as one [3·d_model, d_model] matrix) and nn.Linear's biases."""
        from torch_reference import Model, load_attn
        d_model, d_ff, heads, layers = CONFIGS[self.args.config]
        model = Model(self.vocab, d_model, d_ff, heads, layers, self.args.max_length + 1, dropout=dropout,
                      like_attn=True)
        if initial is not None:
            load_attn(model, read_checkpoint(initial, "model."))
        return model

    def alter_initialisation(self, model, how):
        """The ablations of issue 14 on attn's initial weights: "attn-qkv-half" halves the
        variance of every W^Q, W^K, W^V (with attn-train before commit 57dcf68, which drew each
        as a [d_model, d_model] matrix, that is what nn.MultiheadAttention's fused in_proj
        draws; attn now draws them as tensor2tensor does, already halved in self-attention);
        "attn-ffn-bias" gives the FFN biases nn.Linear's uniform values; "attn" changes nothing."""
        torch = self.torch
        with torch.no_grad():
            for layer in list(model.core.encoder.layers) + list(model.core.decoder.layers):
                if how == "attn-qkv-half":
                    for attention in (layer.self_attn, getattr(layer, "multihead_attn", None)):
                        if attention is not None:
                            attention.in_proj_weight.mul_(0.5 ** 0.5)
                if how == "attn-ffn-bias":
                    for linear in (layer.linear1, layer.linear2):
                        bound = 1 / math.sqrt(linear.in_features)
                        linear.bias.uniform_(-bound, bound)

    def batch(self, examples, indices):
        return make_batch(self.torch, examples, indices)[:3]

    def loss(self, model, batch, smoothing, reduction="mean"):
        source, target_in, target_out = batch
        logits = model(source, target_in, pad=PAD)
        return self.torch.nn.functional.cross_entropy(logits.reshape(-1, self.vocab), target_out.reshape(-1),
                                                      ignore_index=PAD, label_smoothing=smoothing,
                                                      reduction=reduction)

    def train(self, model, seed, steps, valid_every=0, on_step=None, seconds=None):
        """attn-train's loop: its batches in its order, Adam(0.9, 0.98, 1e-9), equation (3).
        Returns the training losses and [(step, validation perplexity)]. With `seconds`, it
        stops after the step that ends past that many seconds (validations included, as in
        attn-train's --max-minutes) and validates then; self.target_tokens counts the target
        tokens trained on (ids + eos)."""
        torch = self.torch
        batches = plan_batches([(len(s), len(t)) for s, t in self.train_pairs], self.args.batch_tokens, seed)
        optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(BETA1, 0.98), eps=1e-9)
        d_model = CONFIGS[self.args.config][0]
        losses, valid = [], []
        epoch, index, order = 0, 0, epoch_order(len(batches), seed, 0)
        self.target_tokens, started = 0, time.perf_counter()
        model.train()
        for step in range(1, steps + 1):
            if index == len(batches):
                epoch, index = epoch + 1, 0
                order = epoch_order(len(batches), seed, epoch)
            batch = self.batch(self.train_pairs, batches[order[index]])
            self.target_tokens += int((batch[2] != PAD).sum())
            loss = self.loss(model, batch, 0.1)
            index += 1
            loss.backward()
            for group in optimizer.param_groups:
                group["lr"] = noam_rate(d_model, step, self.args.warmup) * getattr(self.args, "lr_scale", 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            if valid_every and step % valid_every == 0:
                valid.append((step, self.perplexity(model)))
            if on_step:
                on_step(step, losses[-1], valid)
            if seconds is not None and time.perf_counter() - started > seconds:
                if not valid or valid[-1][0] != step:
                    valid.append((step, self.perplexity(model)))
                break
        return losses, valid

    def perplexity(self, model):
        torch = self.torch
        batches = plan_batches([(len(s), len(t)) for s, t in self.valid_pairs], self.args.batch_tokens, 1)
        nll = tokens = 0
        model.eval()
        with torch.no_grad():
            for indices in batches:
                batch = self.batch(self.valid_pairs, indices)
                nll += self.loss(model, batch, 0.0, reduction="sum").item()
                tokens += int((batch[2] != PAD).sum())
        model.train()
        return math.exp(nll / tokens)


# --- the checks ----------------------------------------------------------------------------

def check_gradients(attn, side, initial, report):
    say("\n=== 1. the first step's gradients, parameter by parameter (dropout 0)")
    one = attn.run("one-step", "--seed", 1, "--dropout", 0, "--max-steps", 1)
    from torch_reference import attn_parameters, from_attn
    batches = plan_batches([(len(s), len(t)) for s, t in side.train_pairs], side.args.batch_tokens, 1)
    first = side.batch(side.train_pairs, batches[epoch_order(len(batches), 1, 0)[0]])
    gradients, losses = {}, {}
    for dtype in (side.torch.float32, side.torch.float64):  # PyTorch in float, and the exact reference
        model = side.model(initial / "checkpoint-00000000.safetensors", dropout=0.0).to(dtype)
        model.pe = model.pe.to(dtype)
        loss = side.loss(model.train(), first, 0.1)
        loss.backward()
        losses[dtype] = loss.item()
        gradients[dtype] = [(names, p.grad.double()) for names, p, _ in attn_parameters(model)]
    moments = read_checkpoint(one / "checkpoint-00000001.safetensors", "adam.m.")
    rows = []
    for (names, exact), (_, single), (_, _, how) in zip(gradients[side.torch.float64], gradients[side.torch.float32],
                                                        attn_parameters(model)):
        mine = from_attn(moments, names, how).double() / (1 - BETA1)
        scale = exact.norm().clamp_min(1e-30)
        rows.append({"parameter": names[0] if len(names) == 1 else "+".join(names), "norm": exact.norm().item(),
                     "attn_error": ((mine - exact).norm() / scale).item(),
                     "torch_float_error": ((single - exact).norm() / scale).item()})
    first_loss = AttnTrain.metrics(one)[0]["loss"]
    say(f"step 1 loss: attn {first_loss:.6f}, PyTorch float {losses[side.torch.float32]:.6f}, "
        f"double {losses[side.torch.float64]:.6f}")
    worst = max(rows, key=lambda r: r["attn_error"])
    worst_torch = max(rows, key=lambda r: r["torch_float_error"])
    say(f"{len(rows)} parameters (PyTorch's fused query/key/value count as one); relative L2 error against "
        f"PyTorch in double: attn worst {worst['attn_error']:.2e} ({worst['parameter']}), PyTorch in float "
        f"worst {worst_torch['torch_float_error']:.2e} ({worst_torch['parameter']})")
    # attn must be as close to exact as float allows: below the tolerance, or within a few
    # times PyTorch's own float error for that parameter (ReLU inputs that round across 0).
    ok = all(r["attn_error"] < max(GRADIENT_TOLERANCE, 4 * r["torch_float_error"]) for r in rows)
    say(("agree" if ok else "DIFFER") + f" (attn's error below {GRADIENT_TOLERANCE:g} or 4 x PyTorch's in float)")
    for r in sorted(rows, key=lambda r: -r["attn_error"])[: 3 if ok else 12]:
        say(f"  attn {r['attn_error']:.2e}  PyTorch float {r['torch_float_error']:.2e}  |g| {r['norm']:.4e}  "
            f"{r['parameter']}")
    report["gradients"] = {"rows": rows, "ok": ok, "loss": {"attn": first_loss, "torch_float": losses[side.torch.float32],
                                                            "torch_double": losses[side.torch.float64]}}
    return ok


def check_losses(attn, side, initial, args, report):
    say(f"\n=== 2. {args.steps} steps, dropout 0: the training loss of every step")
    run = attn.run("losses", "--seed", 1, "--dropout", 0, "--max-steps", args.steps,
                   "--valid-every", args.steps + 1, "--save-every", args.steps + 1)
    mine = [r["loss"] for r in AttnTrain.metrics(run) if r.get("kind") == "train"]
    model = side.model(initial / "checkpoint-00000000.safetensors", dropout=0.0)
    started = time.perf_counter()
    theirs, _ = side.train(model, 1, args.steps)
    say(f"  PyTorch: {time.perf_counter() - started:.0f} s")
    relative = [abs(a - b) / abs(b) for a, b in zip(mine, theirs)]
    worst = max(range(len(relative)), key=relative.__getitem__)
    for step in sorted({1, 2, 5, 10} | set(range(25, args.steps + 1, 25))):
        if step <= len(relative):
            say(f"  step {step:5d}: attn {mine[step - 1]:.5f}  PyTorch {theirs[step - 1]:.5f}  "
                f"relative {relative[step - 1]:.1e}")
    beyond = next((i + 1 for i, r in enumerate(relative) if r > args.loss_tolerance), None)
    ok = len(mine) == len(theirs) == args.steps and beyond is None
    say(f"worst relative difference {relative[worst]:.2e} at step {worst + 1}; "
        + ("agree" if ok else f"DIFFER from step {beyond}") + f" (tolerance {args.loss_tolerance:g})")
    report["losses"] = {"attn": mine, "torch": theirs, "worst": relative[worst], "worst_step": worst + 1,
                        "first_beyond_tolerance": beyond, "ok": ok}
    return ok


def check_curves(attn, side, args, report):
    say(f"\n=== 3. validation perplexity with dropout {args.dropout}, {args.seeds} seeds a side, "
        f"{args.curve_steps} steps, PyTorch from " + ("its own initialisation" if args.torch_init == "own"
                                                      else f"attn's initial weights ({args.torch_init})"))
    curves = {"attn": {}, "torch": {}}
    for seed in range(1, args.seeds + 1):
        run = attn.run(f"curve-seed{seed}", "--seed", seed, "--dropout", args.dropout, "--max-steps",
                       args.curve_steps, "--valid-every", args.valid_every, "--save-every", args.curve_steps,
                       *attn.valid)
        curves["attn"][seed] = [(r["step"], r["ppl"]) for r in AttnTrain.metrics(run) if r.get("kind") == "valid"]
        side.torch.manual_seed(seed)
        if args.torch_init != "own":
            initial = attn.run(f"init-seed{seed}", "--seed", seed, "--max-steps", 0)
            model = side.model(initial / "checkpoint-00000000.safetensors", dropout=args.dropout)
            side.alter_initialisation(model, args.torch_init)
        else:
            model = side.model(None, dropout=args.dropout)
        started = time.perf_counter()
        _, curves["torch"][seed] = side.train(model, seed, args.curve_steps, args.valid_every)
        say(f"  PyTorch seed {seed}: {time.perf_counter() - started:.0f} s")
    rows = []
    say("| step | attn ppl (min - max) | PyTorch ppl (min - max) | ranges |")
    say("| ---: | --- | --- | --- |")
    by_step = {side: [dict(curve) for curve in seeds.values()] for side, seeds in curves.items()}
    common = set.intersection(*(set(curve) for side in by_step.values() for curve in side))
    for step in sorted(common):  # attn-train also validates at its end
        a = [curve[step] for curve in by_step["attn"]]
        t = [curve[step] for curve in by_step["torch"]]
        overlap = min(a) <= max(t) and min(t) <= max(a)
        verdict = "overlap" if overlap else ("attn lower" if max(a) < min(t) else "attn HIGHER")
        rows.append({"step": step, "attn": a, "torch": t, "verdict": verdict})
        say(f"| {step} | {min(a):.2f} - {max(a):.2f} | {min(t):.2f} - {max(t):.2f} | {verdict} |")
    parted = [r["step"] for r in rows if r["verdict"] == "attn HIGHER"]
    say("attn's range is never above PyTorch's" if not parted else f"attn is worse than every PyTorch seed at steps {parted}")
    report["curves"] = {"rows": rows, "seeds": curves, "attn_worse_at": parted}


def translate_scores(args, checkpoint, vocab, files, work, name):
    """attn-translate's beam search (beam 4, alpha 0.6) of the test set: its --scores JSON."""
    scores = work / f"{name}-test.json"
    command = [args.attn_train.parent / "attn-translate", "--checkpoint", checkpoint, "--vocab", vocab,
               "--input", files[0], "--bleu", files[1], "--output", work / f"{name}-test.txt", "--scores", scores,
               "--threads", args.threads, "--quiet"]
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"attn-translate failed (exit status {done.returncode}):\n  " + done.stderr.strip()[-2000:])
    return json.loads(scores.read_text())


def plot_curves(path, curves, title):
    """Validation perplexity against steps, a line a side, as a PNG drawn by gnuplot."""
    data = path.with_suffix(".dat")
    with open(data, "w") as f:
        for name, curve in curves.items():
            f.write(f'"{name}"\n' + "".join(f"{step} {ppl}\n" for step, ppl in curve) + "\n\n")
    script = (f'set terminal pngcairo size 800,500; set output "{path}"; set title "{title}"; '
              'set xlabel "step"; set ylabel "validation perplexity"; set logscale y; set grid; '
              'set key top right; '
              f'plot for [i=0:{len(curves) - 1}] "{data}" index i with linespoints title columnheader(1)')
    done = subprocess.run(["gnuplot", "-e", script], capture_output=True, text=True)
    if done.returncode != 0:
        say(f"no plot: gnuplot failed: {done.stderr.strip()[-500:]}")
    data.unlink()


def check_budget(attn, side, args, files, report):
    """The issue's comparison: each side trains --budget-minutes from its own initialisation,
    dropout 0.1, seed 1, validating every --valid-every steps; then attn-translate's beam search
    of the test set scores both models (PyTorch's written as an attn checkpoint), so the search
    is the same and only the training differs."""
    say(f"\n=== 4. {args.budget_minutes:g} minutes a side, each from its own initialisation, dropout 0.1; "
        "the test set translated by attn-translate (beam 4)")
    test = (files[4], files[5])
    run = attn.run("budget", "--seed", 1, "--dropout", 0.1, "--max-minutes", args.budget_minutes,
                   "--max-steps", 10 ** 9, "--valid-every", args.valid_every, "--save-every", 10 ** 9, *attn.valid)
    records = AttnTrain.metrics(run)
    steps = [r for r in records if r.get("kind") == "train"]
    mine = {"steps": steps[-1]["step"], "valid": [(r["step"], r["ppl"]) for r in records if r.get("kind") == "valid"],
            "target_tokens_per_second": sum(r["tokens"] for r in steps) / steps[-1]["elapsed_s"]}
    checkpoint = sorted(run.glob("checkpoint-*.safetensors"))[-1]
    mine["test"] = translate_scores(args, checkpoint, attn.vocab, test, attn.work, "attn")

    side.torch.manual_seed(1)
    model = side.model(None, dropout=0.1)
    started = time.perf_counter()
    _, valid = side.train(model, 1, 10 ** 9, args.valid_every, seconds=args.budget_minutes * 60)
    seconds = time.perf_counter() - started
    theirs = {"steps": valid[-1][0], "valid": valid, "target_tokens_per_second": side.target_tokens / seconds}
    from torch_reference import save_attn
    written = attn.work / "torch-budget.safetensors"
    save_attn(model, checkpoint, written)
    theirs["test"] = translate_scores(args, written, attn.vocab, test, attn.work, "torch")

    say("| | steps | target tok/s | valid perplexity | test BLEU beam 4 | chrF |")
    say("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in (("attn", mine), (f"PyTorch {side.torch.__version__}", theirs)):
        say(f"| {name} | {r['steps']:,} | {r['target_tokens_per_second']:,.0f} | {r['valid'][-1][1]:.1f} | "
            f"{r['test']['bleu']:.1f} | {r['test']['chrf']:.1f} |")
    if args.plot:
        plot_curves(args.plot, {"attn": mine["valid"], f"PyTorch {side.torch.__version__}": theirs["valid"]},
                    f"{args.budget_minutes:g} minutes a side, --config {args.config}, {Path(files[0]).name}")
        say(f"curves: {args.plot}")
    report["budget"] = {"attn": mine, "torch": theirs}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", choices=["bible", "short"], default="bible",
                   help="data/bible's verses, or their clauses (default: bible)")
    for name in ("src", "tgt", "valid-src", "valid-tgt", "test-src", "test-tgt"):
        p.add_argument(f"--{name}", type=Path, help="instead of --corpus: the files (the test pair only for "
                                                    "--budget-minutes)")
    p.add_argument("--config", choices=sorted(CONFIGS), default="small", help="model preset (default: small)")
    p.add_argument("--batch-tokens", type=int, default=1000, help="padded tokens a side in a batch (default: 1000)")
    p.add_argument("--warmup", type=int, default=800, help="warmup_steps of equation (3) (default: 800)")
    p.add_argument("--max-length", type=int, default=256, help="attn-train's --max-length (default: 256)")
    p.add_argument("--threads", type=int, default=2, help="threads on each side (default: 2)")
    p.add_argument("--steps", type=int, default=200, help="steps of the loss comparison (default: 200)")
    p.add_argument("--loss-tolerance", type=float, default=0.01,
                   help="largest relative difference of a step's loss (default: 0.01)")
    p.add_argument("--curve-steps", type=int, default=0, help="steps of each validation curve (default: 0, none)")
    p.add_argument("--valid-every", type=int, default=250, help="steps between validations (default: 250)")
    p.add_argument("--seeds", type=int, default=3, help="seeds a side for the curves (default: 3)")
    p.add_argument("--torch-init", choices=["attn", "own", "attn-qkv-half", "attn-ffn-bias"], default="attn",
                   help="the curves' PyTorch weights: attn's initialisation for the seed, PyTorch's own, or "
                        "attn's with one of issue 14's ablations (default: attn)")
    p.add_argument("--dropout", type=float, default=0.1, help="P_drop of the curves (default: 0.1)")
    p.add_argument("--budget-minutes", type=float, default=0,
                   help="then train each side this long from its own initialisation and translate the test "
                        "set with both (default: 0, not done)")
    p.add_argument("--plot", type=Path, help="with --budget-minutes: draw both validation curves into this PNG")
    p.add_argument("--skip-checks", action="store_true", help="skip checks 1 and 2 (gradients, losses)")
    p.add_argument("--attn-train", type=Path, default=ROOT / "build" / "examples" / "attn-train",
                   help="the attn-train program (default: build/examples/attn-train)")
    p.add_argument("--work", type=Path, help="keep the runs here (default: a temporary directory)")
    p.add_argument("--json", type=Path, help="write every number to this file")
    args = p.parse_args()
    given = [getattr(args, n) for n in ("src", "tgt", "valid_src", "valid_tgt")]
    if any(given) and not all(given):
        p.error("give all of --src, --tgt, --valid-src and --valid-tgt, or none")
    tests = [args.test_src, args.test_tgt]
    if any(tests) and not all(tests):
        p.error("give both --test-src and --test-tgt, or neither")
    if args.budget_minutes > 0 and given[0] and not tests[0]:
        p.error("--budget-minutes with --src needs --test-src and --test-tgt")
    given += tests
    for path in given:
        if path is not None and not path.is_file():
            p.error(f"'{path}' does not exist or is not a file")
    for name in ("batch_tokens", "warmup", "threads", "steps", "valid_every", "seeds", "max_length"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.plot and args.budget_minutes <= 0:
        p.error("--plot draws the --budget-minutes runs: give --budget-minutes too")
    if args.plot and not shutil.which("gnuplot"):
        p.error("--plot needs gnuplot (apt-get install gnuplot-nox)")
    if not (args.attn_train.is_file() and os.access(args.attn_train, os.X_OK)):
        p.error(f"no attn-train at '{args.attn_train}': meson compile -C build attn-train, or pass --attn-train")
    return args


def main():
    args = parse_args()
    try:
        import sentencepiece  # noqa: F401
        import torch
    except ModuleNotFoundError as e:
        fail(f"{sys.executable} cannot import {e.name}: run this under a python3 with torch and sentencepiece "
             "(on Debian: apt-get install python3-torch python3-sentencepiece; /usr/bin/python3)")
    with tempfile.TemporaryDirectory(prefix="parity_vs_torch.") as temporary:
        work = (args.work or Path(temporary)).resolve()
        work.mkdir(parents=True, exist_ok=True)
        if args.src:
            files = (args.src, args.tgt, args.valid_src, args.valid_tgt, args.test_src, args.test_tgt)
        else:
            bible = ROOT / "data" / "bible"
            if not (bible / "train.en").is_file():
                fail(f"no {bible}/train.en: python3 examples/data/bible.py --out data/bible (or scripts/main.sh)")
            files = tuple(bible / f"{split}.{language}" for split in ("train", "valid", "test") for language in ("en", "es"))
            if args.corpus == "short":
                files = make_short_corpus(bible, work / "short")
        files = tuple(Path(f).resolve() if f else None for f in files)
        say(f"attn-train against PyTorch {torch.__version__}: --config {args.config}, --batch-tokens "
            f"{args.batch_tokens}, --warmup {args.warmup}, {args.threads} thread(s), data {files[0]}")
        attn = AttnTrain(args, *files[:4], work)
        report = {"args": {k: str(v) for k, v in vars(args).items()}, "torch": torch.__version__,
                  "date": time.strftime("%Y-%m-%d %H:%M:%S")}
        # The vocabulary comes from the first attn-train run; PyTorch reads it.
        initial = attn.run("init", "--seed", 1, "--dropout", 0, "--max-steps", 0)
        attn.vocab = initial / "vocab.model"
        side = TorchSide(args, attn.vocab, *files[:4])
        gradients_ok = losses_ok = True
        if not args.skip_checks:
            gradients_ok = check_gradients(attn, side, initial, report)
            losses_ok = check_losses(attn, side, initial, args, report)
        if args.curve_steps > 0:
            check_curves(attn, side, args, report)
        if args.budget_minutes > 0:
            check_budget(attn, side, args, files, report)
        if args.json:
            args.json.write_text(json.dumps(report, indent=1) + "\n")
    sys.exit(0 if gradients_ok and losses_ok else 1)


if __name__ == "__main__":
    main()
