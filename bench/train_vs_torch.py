#!/usr/bin/env python3
"""Training throughput and peak memory of attn-train against PyTorch, same recipe and data, one run each.

attn-train first trains the shared BPE vocabulary alone (--max-steps 0, so SentencePiece's
training counts in neither side's memory). Then attn-train (--config small by default, that
vocabulary via --vocab) trains for --steps steps in a temporary --out, and a PyTorch
reference trains the same model (bench/torch_reference.py, like_attn=True: attn's
parameters, no final LayerNorm on the stacks, dropout 0.1 (big: 0.3) on embeddings and residuals only)
for the same number of steps on the same pairs, with the recipe of attn-train:

- vocabulary: the SentencePiece BPE model attn-train trained (its OUT/vocab.model), read with
  the sentencepiece module; pairs with an empty side or more than 256 subwords on either side
  are skipped, as attn-train does (--max-length 256);
- batches: include/attn/train/batching.hpp ported line for line (plan_batches: sort by
  (target length, source length, SplitMix64 tie-break drawn from --seed, index), cut greedily
  while count * (longest source + 1) <= budget and count * (longest target + 1) <= budget;
  epoch_order: the same seeded Fisher-Yates permutation of the batches each epoch; make_batch:
  source = ids+eos, target_in = bos+ids, target_out = ids+eos, pad 0). With the same
  SentencePiece library the batches and their order are the same on both sides; the script
  checks it (every step's target-token count must agree) and says so;
- padding keys masked in every attention; loss: cross_entropy(label_smoothing=0.1,
  ignore_index=pad), the mean over non-pad target tokens; Adam(0.9, 0.98, 1e-9) with
  equation (3) as a LambdaLR (--warmup); the gradient's global norm computed each step, as
  attn-train does for its log; zero_grad(set_to_none=True).

Measurement, the same for both sides: each step's end is logged as seconds since the training
loop began (attn-train: OUT/metrics.jsonl; PyTorch: the worker's JSON lines), and throughput is
the target tokens (ids+eos, no padding) of the steps after the first --skip divided by the
time those steps took (the difference of elapsed_s across them). Vocabulary training,
encoding and model set-up are not timed. Peak memory is the child's ru_maxrss, taken with
os.wait4 for that child alone: resource.getrusage(RUSAGE_CHILDREN) gives the largest of all
children waited for so far, which would mix the two sides (and this script's helper
processes). Each side runs in its own process: attn-train, then `python3 train_vs_torch.py
--torch-worker` under --python. PyTorch's peak includes its interpreter and libraries (the
footprint after `import torch` is printed beside it).

Threads: both get OMP_NUM_THREADS=--threads (attn-train --threads, torch.set_num_threads) and
the same OMP_WAIT_POLICY (--omp-wait-policy, ACTIVE by default: the faster setting for both in
bench/step_vs_torch.py's measurements; spinning threads hurt whatever else runs, so measure on
an idle machine, and use PASSIVE beside other work).

Data: --src/--tgt, else data/bible/train.en -> train.es when both exist, else a synthetic
corpus from tests/train/toy_corpus.py (its vocabulary has ~150 subwords, so the output layer is
far smaller than on real text: a smoke test, not a measurement).

Needs: attn-train built (build/examples/attn-train); a python3 with torch and sentencepiece
(the system /usr/bin/python3: apt-get install python3-torch python3-sentencepiece). This
script itself needs only the standard library.
Usage: bench/train_vs_torch.py [--steps 60] [--batch-tokens 2000] [--threads 2] [--json FILE]
"""
import argparse
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

from child_process import INSTALL_HINT, check_python, run_child  # standard library only

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
from torch_reference import CONFIGS, DROPOUT  # noqa: E402  (torch-free import)

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # attn::text::subword_model's fixed ids
MAX_LENGTH = 256                 # attn-train's --max-length default


def fail(message):
    sys.exit(f"train_vs_torch: {message}")


# --- include/attn/train/batching.hpp and include/attn/core/random.hpp, ported --------------

MASK64 = (1 << 64) - 1
EPOCH_ORDER_SALT = 0x65706f63685f6f72  # "epoch_or"


def stream_bits(seed, n):
    """random_stream(seed).bits(n): SplitMix64's finaliser over the seeded counter."""
    z = (seed * 0x9e3779b97f4a7c15 + n + 0x632be59bd9b4e019) & MASK64
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & MASK64
    return z ^ (z >> 31)


def plan_batches(lengths, batch_tokens, seed):
    """attn::train::plan_batches over (source length, target length) pairs, without bos/eos."""
    keys = sorted(range(len(lengths)), key=lambda i: (lengths[i][1], lengths[i][0], stream_bits(seed, i), i))
    batches, current = [], []
    longest_source = longest_target = 0  # padded lengths, eos / bos included
    for i in keys:
        source_length, target_length = lengths[i]
        source = max(longest_source, source_length + 1)
        target = max(longest_target, target_length + 1)
        count = len(current) + 1
        if current and (count * source > batch_tokens or count * target > batch_tokens):
            batches.append(current)
            current = []
            source, target = source_length + 1, target_length + 1
        current.append(i)
        longest_source, longest_target = source, target
    if current:
        batches.append(current)
    return batches


def epoch_order(batch_count, seed, epoch):
    """attn::train::epoch_order: the seeded permutation of the batches for `epoch`."""
    order = list(range(batch_count))
    stream_seed = stream_bits(seed ^ EPOCH_ORDER_SALT, epoch)
    for i in range(batch_count, 1, -1):
        j = stream_bits(stream_seed, i) % i
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def noam_rate(d_model, step, warmup):
    """Equation (3), as attn::train::noam_rate."""
    s = max(step, 1)
    return d_model ** -0.5 * min(s ** -0.5, s * warmup ** -1.5)


def make_batch(torch, examples, indices):
    """attn::train::make_batch as torch tensors: (source = ids+eos, target_in = bos+ids,
    target_out = ids+eos, padded with 0; the target tokens without padding)."""
    rows = [examples[i] for i in indices]
    source_columns = max(len(s) for s, _ in rows) + 1
    target_columns = max(len(t) for _, t in rows) + 1
    source, target_in, target_out = [], [], []
    for s, t in rows:
        source += list(s) + [EOS] + [PAD] * (source_columns - len(s) - 1)
        target_in += [BOS] + list(t) + [PAD] * (target_columns - len(t) - 1)
        target_out += list(t) + [EOS] + [PAD] * (target_columns - len(t) - 1)
    shape = (len(rows), -1)
    return (torch.tensor(source).view(shape), torch.tensor(target_in).view(shape),
            torch.tensor(target_out).view(shape), sum(len(t) + 1 for _, t in rows))


# --- the PyTorch side (runs under --python as `train_vs_torch.py --torch-worker SPEC`) -------

def read_lines(path):
    """attn::train's read_text_lines: '\\n'-separated, a last line without '\\n' counts, a
    trailing '\\r' and a first-line byte-order mark dropped, UTF-8 checked."""
    pieces = Path(path).read_bytes().split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    lines = []
    for number, raw in enumerate(pieces, 1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            fail(f"{path}:{number}: invalid UTF-8 at byte {e.start}")
        if line.endswith("\r"):
            line = line[:-1]
        if number == 1 and line.startswith("\ufeff"):
            line = line[1:]
        lines.append(line)
    return lines


def encode_pairs(source_path, target_path, processor, max_tokens):
    """attn::train::encode_pairs: skips pairs with a blank or empty side, or more than
    max_tokens subwords on a side. Ids are kept as int32 arrays, as attn keeps them."""
    source, target = read_lines(source_path), read_lines(target_path)
    if len(source) != len(target):
        fail(f"'{source_path}' has {len(source)} lines but '{target_path}' has {len(target)}")
    blank = " \t\n\v\f\r"
    examples, empty, too_long = [], 0, 0
    chunk = 2048  # encoded a chunk at a time: lists of Python ints would inflate the peak RSS
    for start in range(0, len(source), chunk):
        source_ids = processor.encode(source[start:start + chunk])
        target_ids = processor.encode(target[start:start + chunk])
        for k, (s, t) in enumerate(zip(source_ids, target_ids)):
            if not source[start + k].strip(blank) or not target[start + k].strip(blank) or not s or not t:
                empty += 1
            elif len(s) > max_tokens or len(t) > max_tokens:
                too_long += 1
            else:
                examples.append((array("i", s), array("i", t)))
    return examples, {"kept": len(examples), "empty": empty, "too_long": too_long}


def torch_worker(spec):
    import resource

    def emit(record):
        print(json.dumps(record), flush=True)

    try:
        import sentencepiece
        import torch
        from torch_reference import Model
    except ModuleNotFoundError as e:
        fail(f"{sys.executable} cannot import {e.name}; {INSTALL_HINT}")
    import_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    torch.manual_seed(spec["seed"])
    torch.set_num_threads(spec["threads"])
    device = torch.device(spec.get("device", "cpu"))
    precision = spec.get("precision", "fp32")
    # fp32 products in fp32, or in TF32 for --precision tf32, as attn-train's (with --attention-path
    # fused, attn's fp32 fused kernel stays on CUDA cores where PyTorch's attention goes to TF32).
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
    # --precision bf16 / fp16: automatic mixed precision (fp32 weights and optimizer, products in
    # 16 bits), fp16 with PyTorch's dynamic loss scaling, as attn-train's --precision.
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    processor = sentencepiece.SentencePieceProcessor(model_file=spec["vocab"])
    ids = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
    if ids != (PAD, UNK, BOS, EOS):
        fail(f"{spec['vocab']} has special ids pad, unk, bos, eos = {ids}, expected (0, 1, 2, 3)")
    examples, report = encode_pairs(spec["src"], spec["tgt"], processor, spec["max_length"])
    if not examples:
        fail(f"no usable sentence pairs in '{spec['src']}' and '{spec['tgt']}'")
    batches = plan_batches([(len(s), len(t)) for s, t in examples], spec["batch_tokens"], spec["seed"])

    vocab = processor.get_piece_size()
    d_model, d_ff, heads, layers = CONFIGS[spec["config"]]
    model = Model(vocab, d_model, d_ff, heads, layers, spec["max_length"] + 1,
                  dropout=DROPOUT.get(spec["config"], 0.1), like_attn=not spec["stock"])
    model.to(device)
    model.train()
    parameters = list(model.parameters())
    optimizer = torch.optim.Adam(parameters, lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    # LambdaLR calls the factor with the number of steps taken so far: step k uses noam(k).
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda taken: noam_rate(d_model, taken + 1, spec["warmup"]))
    emit({"kind": "info", "torch": torch.__version__, "python": sys.executable, "vocab": vocab,
          "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
          "pairs": report, "batches": len(batches), "parameters": sum(p.numel() for p in parameters),
          "threads": torch.get_num_threads(), "import_maxrss_kib": import_kib})

    epoch, index, order = 0, 0, epoch_order(len(batches), spec["seed"], 0)
    start = time.perf_counter()
    for step in range(1, spec["steps"] + 1):
        if index == len(batches):
            epoch, index = epoch + 1, 0
            order = epoch_order(len(batches), spec["seed"], epoch)
        source, target_in, target_out, tokens = make_batch(torch, examples, batches[order[index]])
        source, target_in, target_out = source.to(device), target_in.to(device), target_out.to(device)
        index += 1
        with torch.autocast(device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
            logits = model(source, target_in, pad=PAD)  # [batch, tgt, vocab]
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), target_out.reshape(-1),
                                                     ignore_index=PAD, label_smoothing=0.1)
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.unscale_(optimizer)
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in parameters]))
        rate = schedule.get_last_lr()[0]
        if scaler:
            scaler.step(optimizer)  # skipped when the gradients overflowed
            scaler.update()
        else:
            optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        emit({"kind": "train", "step": step, "loss": loss.item(), "lr": rate, "grad_norm": norm.item(),
              "tokens": tokens, "source_tokens": int((source != PAD).sum()), "elapsed_s": time.perf_counter() - start})
    peak_device = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else 0
    emit({"kind": "done", "maxrss_self_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
          "peak_device_mib": peak_device / 2**20})


# --- the parent -----------------------------------------------------------------------------

# Dense peaks from NVIDIA's data sheets, by a part of the device's name (the first match wins):
# fp32 without tensor cores (TF32 is off on both sides), TF32 tensor cores for --precision tf32,
# and 16-bit tensor cores (bf16 = fp16), for --precision bf16 and fp16; all without sparsity.
FP32_PEAK_TFLOPS = (("H100 PCIe", 51.2), ("H100 NVL", 60.0), ("H100", 66.9), ("H200", 66.9), ("GH200", 66.9),
                    ("A100", 19.5), ("L40S", 91.6), ("A10", 31.2))
TF32_PEAK_TFLOPS = (("H100 PCIe", 378.0), ("H100", 494.7), ("H200", 494.7), ("GH200", 494.7), ("A100", 156.0),
                    ("L40S", 183.0))
HALF_PEAK_TFLOPS = (("H100 PCIe", 756.0), ("H100", 989.4), ("H200", 989.4), ("GH200", 989.4), ("A100", 312.0),
                    ("L40S", 362.1))


def model_flops(d_model, d_ff, layers, vocab, source_tokens, target_tokens):
    """A training step's model FLOPs: 3 x the forward pass's 2 x multiply-adds of every weight
    matrix a token goes through (encoder: Q, K, V, O and the FFN; decoder: self-attention's four,
    the cross-attention's Q and O per target token and its K and V per source token, the FFN and
    the output projection). The attention's score and weighted-sum products are left out, as in
    the usual 6 x parameters x tokens estimate."""
    d = d_model
    per_source = layers * (4 * d * d + 2 * d * d_ff) + layers * 2 * d * d
    per_target = layers * (6 * d * d + 2 * d * d_ff) + d * vocab
    return 6 * (per_source * source_tokens + per_target * target_tokens)


def parse_records(lines, what):
    """One JSON object a line, as in attn-train's metrics.jsonl."""
    records = []
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                fail(f"{what}, line {number}: not JSON: {line[:80]!r}")
    return records


def train_records(records, what):
    for record in records:
        if record.get("kind") == "skipped":
            print(f"train_vs_torch: warning: {what}: step {record.get('step')} was skipped ({record.get('reason')}); "
                  "its time is counted in the next step's", file=sys.stderr)
    return [r for r in records if r.get("kind") == "train"]


def throughput(records, skip, what):
    """Target tokens per second over the steps after the first `skip`: their tokens over the
    time they took, the difference of elapsed_s between the last step and step `skip`."""
    records = sorted(records, key=lambda r: r["step"])
    if len(records) <= skip:
        fail(f"{what}: {len(records)} steps logged, not more than --skip {skip}")
    timed = records[skip:]
    since = records[skip - 1]["elapsed_s"] if skip > 0 else 0.0
    seconds = timed[-1]["elapsed_s"] - since
    tokens = sum(r["tokens"] for r in timed)
    step_s = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(records, records[1:])]
    return {"tokens_per_s": tokens / seconds, "timed_steps": len(timed), "timed_tokens": tokens,
            "timed_seconds": seconds, "step_s": [records[0]["elapsed_s"]] + step_s,
            "first_loss": records[0]["loss"], "last_loss": records[-1]["loss"],
            "step_tokens": [r["tokens"] for r in records]}


def choose_data(args, work):
    """(source, target, description): --src/--tgt, data/bible, or a synthetic corpus."""
    if args.src is not None:
        return args.src.resolve(), args.tgt.resolve(), "given"
    bible = ROOT / "data" / "bible"
    if (bible / "train.en").is_file() and (bible / "train.es").is_file():
        return bible / "train.en", bible / "train.es", "English -> Spanish Bible (examples/data/bible.py)"
    toy = ROOT / "tests" / "train" / "toy_corpus.py"
    if not toy.is_file():
        fail(f"no --src/--tgt, no {bible}/train.en, and no {toy} to make a synthetic corpus from")
    print(f"train_vs_torch: no --src/--tgt and no {bible}/train.{{en,es}}: generating a synthetic corpus "
          f"({args.toy_pairs} pairs) with {toy.relative_to(ROOT)}; its tiny vocabulary makes this a smoke test, "
          "not a measurement", file=sys.stderr)
    subprocess.run([sys.executable, str(toy), "--out", str(work / "data"), "--train", str(args.toy_pairs),
                    "--valid", "1"], check=True)
    return (work / "data" / "train.src", work / "data" / "train.tgt",
            f"synthetic: tests/train/toy_corpus.py, {args.toy_pairs} pairs")


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Method, equivalence of the two sides and what is timed: see this script's docstring.")
    p.add_argument("--src", type=Path, help="training source text (default: data/bible/train.en if present, "
                   "else a synthetic corpus from tests/train/toy_corpus.py)")
    p.add_argument("--tgt", type=Path, help="training target text (default: data/bible/train.es if present)")
    p.add_argument("--config", choices=sorted(CONFIGS), default="small", help="model preset (default: small)")
    p.add_argument("--steps", type=int, default=60, help="training steps on each side (default: 60)")
    p.add_argument("--skip", type=int, default=5, help="first steps left out of the throughput (default: 5)")
    p.add_argument("--batch-tokens", type=int, default=2000, help="padded tokens a side in a batch (default: 2000)")
    p.add_argument("--threads", type=int, default=2, help="threads on each side (default: 2)")
    p.add_argument("--device", default="cpu",
                   help="cpu, or cuda: both sides on the GPU in --precision's arithmetic, peak device memory reported")
    p.add_argument("--attention-path", choices=["automatic", "fused", "unfused"], default="automatic",
                   help="attn-train --attention-path: attn's fused kernel, its unfused path, or its choice")
    p.add_argument("--precision", choices=["fp32", "tf32", "bf16", "fp16"], default="fp32",
                   help="both sides: fp32; tf32 (GPU only: fp32 products on tensor cores, PyTorch's allow_tf32); "
                        "or 16-bit products over fp32 weights (attn-train --precision; PyTorch autocast, with "
                        "GradScaler for fp16) (default: fp32)")
    p.add_argument("--omp-wait-policy", choices=["ACTIVE", "PASSIVE"], default="ACTIVE",
                   help="OMP_WAIT_POLICY for both sides (default: ACTIVE; PASSIVE beside other work)")
    p.add_argument("--vocab-size", type=int, default=8000, help="BPE vocabulary attn-train trains (default: 8000)")
    p.add_argument("--warmup", type=int, default=4000, help="warmup_steps of equation (3) (default: 4000)")
    p.add_argument("--seed", type=int, default=1, help="seed of both sides: batch order, initialisation, dropout")
    p.add_argument("--attn-train", type=Path, default=ROOT / "build" / "examples" / "attn-train",
                   help="the attn-train program (default: build/examples/attn-train)")
    p.add_argument("--python", default="/usr/bin/python3",
                   help="a python3 with torch and sentencepiece for the PyTorch side (default: /usr/bin/python3)")
    p.add_argument("--stock-torch", action="store_true",
                   help="time stock nn.Transformer (final LayerNorms, attention and FFN dropout) as "
                        "step_vs_torch.py does, instead of the model made like attn's")
    p.add_argument("--toy-pairs", type=int, default=5000, help="pairs in the synthetic corpus (default: 5000)")
    p.add_argument("--work", type=Path, help="keep both runs' outputs here (default: a temporary directory)")
    p.add_argument("--json", type=Path, help="write the settings and results to this file")
    p.add_argument("--torch-worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_worker is None:
        for name in ("steps", "batch_tokens", "threads", "toy_pairs", "warmup"):
            if getattr(args, name) < 1:
                p.error(f"--{name.replace('_', '-')} must be at least 1")
        if not 0 <= args.skip < args.steps:
            p.error(f"--skip must be at least 0 and below --steps ({args.steps})")
        if args.vocab_size < 8:
            p.error("--vocab-size must be at least 8")
        if args.precision == "tf32" and not args.device.startswith("cuda"):
            p.error("--precision tf32 is for --device cuda (TF32 products are a GPU's tensor cores)")
        if (args.src is None) != (args.tgt is None):
            p.error("give both --src and --tgt, or neither")
        for path in (args.src, args.tgt):
            if path is not None and not path.is_file():
                p.error(f"training file '{path}' does not exist or is not a file")
    return args


def main():
    args = parse_args()
    if args.torch_worker is not None:
        torch_worker(json.loads(args.torch_worker))
        return
    attn_train = args.attn_train.resolve()
    if not (attn_train.is_file() and os.access(attn_train, os.X_OK)):
        fail(f"no attn-train program at '{args.attn_train}': build it (meson compile -C build attn-train) "
             "or pass --attn-train")
    check_python(args.python, "train_vs_torch")

    with tempfile.TemporaryDirectory(prefix="train_vs_torch.") as temporary:
        work = args.work.resolve() if args.work else Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        out = work / "attn"
        for earlier in (out, work / "vocab"):
            if earlier.exists():
                fail(f"'{earlier}' holds an earlier run; choose another --work")
        src, tgt, data_kind = choose_data(args, work)
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY=args.omp_wait_policy)

        common = [attn_train, "--src", src, "--tgt", tgt, "--config", args.config, "--max-length", MAX_LENGTH,
                  "--batch-tokens", args.batch_tokens, "--warmup", args.warmup, "--seed", args.seed,
                  "--threads", args.threads, "--valid-every", args.steps + 1, "--save-every", args.steps + 1,
                  "--device", args.device, "--precision", args.precision,
                  "--attention-path", args.attention_path]
        # The vocabulary first, in a run of its own (--max-steps 0), so that SentencePiece's
        # training is in neither side's peak memory: both then load OUT/vocab.model.
        run_child("train_vs_torch", "attn-train (vocabulary)",
                  common + ["--vocab-size", args.vocab_size, "--max-steps", 0, "--out", work / "vocab"], env, work)
        vocab_model = work / "vocab" / "vocab.model"
        attn_kib, attn_wall, _, attn_err = run_child(
            "train_vs_torch", "attn-train", common + ["--vocab", vocab_model, "--max-steps", args.steps, "--out", out], env, work)
        attn_log = attn_err.read_text(errors="replace")
        metrics = parse_records((out / "metrics.jsonl").read_text().splitlines(), "attn-train's metrics.jsonl")
        attn = throughput(train_records(metrics, "attn-train"), args.skip, "attn-train")
        found = re.search(r": (\d+) parameters", attn_log)
        attn["parameters"] = int(found.group(1)) if found else None
        found = re.search(r"training data: (.*)", attn_log)
        attn["pairs"] = found.group(1) if found else None

        spec = dict(vocab=str(vocab_model), src=str(src), tgt=str(tgt), config=args.config,
                    batch_tokens=args.batch_tokens, steps=args.steps, threads=args.threads, seed=args.seed,
                    warmup=args.warmup, max_length=MAX_LENGTH, stock=args.stock_torch,
                    device="cuda" if args.device.startswith("cuda") else "cpu", precision=args.precision)
        torch_kib, torch_wall, torch_out, _ = run_child(
            "train_vs_torch", "PyTorch", [args.python, Path(__file__).resolve(), "--torch-worker", json.dumps(spec)], env, work)
        records = parse_records(torch_out.read_text().splitlines(), "PyTorch worker")
        info = next((r for r in records if r["kind"] == "info"), None)
        done = next((r for r in records if r["kind"] == "done"), None)
        if info is None or done is None:
            fail(f"the PyTorch worker's output ({torch_out}) lacks its info or done line")
        torch_side = throughput(train_records(records, "PyTorch worker"), args.skip, "PyTorch")
        torch_side["parameters"] = info["parameters"]
        torch_side["pairs"] = info["pairs"]

    attn.update(peak_rss_mib=attn_kib / 1024, wall_s=attn_wall)
    torch_side.update(peak_rss_mib=torch_kib / 1024, wall_s=torch_wall, torch=info["torch"],
                      import_rss_mib=info["import_maxrss_kib"] / 1024,
                      self_rss_mib=done["maxrss_self_kib"] / 1024)
    same_batches = attn["step_tokens"] == torch_side["step_tokens"]
    ratios = {"throughput": attn["tokens_per_s"] / torch_side["tokens_per_s"],
              "peak_rss": attn["peak_rss_mib"] / torch_side["peak_rss_mib"]}
    d_model, d_ff, heads, layers = CONFIGS[args.config]
    config = f"{args.config} (d_model {d_model}, d_ff {d_ff}, h {heads}, d_k = d_v = {d_model // heads}, N {layers})"
    model = ("stock nn.Transformer (final LayerNorms, attention and FFN dropout)" if args.stock_torch
             else "made like attn's (no final LayerNorms; dropout on embeddings and residuals only)")
    parameters = (f"{attn['parameters']:,} parameters on both sides" if attn["parameters"] == torch_side["parameters"]
                  else f"parameters: attn {attn['parameters']}, PyTorch {torch_side['parameters']:,}")
    timed = int(attn["timed_tokens"])
    print("attn-train vs PyTorch: training throughput and peak memory, one run each (attn first)")
    print(f"config:     {config}, {parameters}")
    print(f"vocabulary: {info['vocab']} subwords (--vocab-size {args.vocab_size}, trained by attn-train beforehand, "
          "loaded by both)")
    print(f"data:       {src} -> {tgt} ({data_kind})")
    print(f"            attn: {attn['pairs']}; PyTorch: kept {torch_side['pairs']['kept']}")
    print(f"batches:    {info['batches']} of <= {args.batch_tokens} tokens a side; "
          + ("the same on both sides (every step's target tokens agree)" if same_batches
             else "NOT the same on both sides (the steps' target tokens differ)"))
    print(f"threads:    {args.threads} (OMP_NUM_THREADS, attn-train --threads, torch.set_num_threads); "
          f"OMP_WAIT_POLICY={args.omp_wait_policy} for both")
    print(f"steps:      {args.steps}, the first {args.skip} untimed: {attn['timed_steps']} timed, "
          f"{timed:,} target tokens" + ("" if same_batches else f" (PyTorch {int(torch_side['timed_tokens']):,})"))
    print(f"PyTorch:    {info['torch']} ({info['python']}), model {model}")
    print(f"precision:  {args.precision}" + {"fp32": "", "tf32": " (attn-train --precision; PyTorch allow_tf32)"}.get(
          args.precision, " (attn-train --precision; PyTorch autocast" + (" with GradScaler)" if args.precision == "fp16"
                                                                           else ")")))
    print()
    print("| side | target tok/s | peak RSS MiB |")
    print("| --- | ---: | ---: |")
    print(f"| attn | {attn['tokens_per_s']:.1f} | {attn['peak_rss_mib']:.1f} |")
    print(f"| PyTorch | {torch_side['tokens_per_s']:.1f} | {torch_side['peak_rss_mib']:.1f} |")
    print(f"| attn / PyTorch | **{ratios['throughput']:.2f}x** | **{ratios['peak_rss']:.2f}x** |")
    # Model FLOP utilisation over the timed steps, from PyTorch's record of the same batches.
    timed_records = sorted(train_records(records, "PyTorch worker"), key=lambda r: r["step"])[args.skip:]
    flops = sum(model_flops(d_model, d_ff, layers, info["vocab"], r.get("source_tokens", 0), r["tokens"])
                for r in timed_records)
    peaks = {"fp32": FP32_PEAK_TFLOPS, "tf32": TF32_PEAK_TFLOPS}.get(args.precision, HALF_PEAK_TFLOPS)
    peak = next((tflops for part, tflops in peaks if info.get("gpu") and part in info["gpu"]), None)
    utilisation = {}
    for name, side in (("attn", attn), ("PyTorch", torch_side)):
        side["model_tflops_per_s"] = flops / side["timed_seconds"] / 1e12 if same_batches else None
        if side["model_tflops_per_s"] is not None and peak:
            side["mfu"] = side["model_tflops_per_s"] / peak
        utilisation[name] = side["model_tflops_per_s"]
    if same_batches:
        print()
        kind = {"fp32": "fp32", "tf32": "TF32 tensor-core"}.get(args.precision, "16-bit tensor-core")
        line = ", ".join(f"{name} {value:.2f}" + (f" ({100 * value / peak:.1f}% of the {peak} {kind} peak)" if peak else "")
                         for name, value in utilisation.items())
        print(f"model TFLOP/s (6 x weights x tokens, attention products aside): {line}"
              + ("" if peak or args.device == "cpu" else f"; no {kind} peak known for this GPU"))
    if args.device != "cpu":
        attn_device = max((r.get("peak_device_mib", 0) for r in metrics), default=0)
        torch_device = done.get("peak_device_mib", 0)
        print()
        print(f"peak device memory: attn {attn_device:.1f} MiB (its memory pool's high-water mark), "
              f"PyTorch {torch_device:.1f} MiB (torch.cuda.max_memory_allocated)")
    print()
    print(f"Throughput ratio above 1: attn trains faster; memory ratio below 1: attn needs less. PyTorch's peak "
          f"includes its interpreter and libraries: {torch_side['import_rss_mib']:.0f} MiB after `import torch`.")
    print(f"Loss at step 1 -> {args.steps}: attn {attn['first_loss']:.3f} -> {attn['last_loss']:.3f}, "
          f"PyTorch {torch_side['first_loss']:.3f} -> {torch_side['last_loss']:.3f}. Wall time of each run "
          f"(reading, encoding and set-up included): attn {attn_wall:.0f} s, PyTorch {torch_wall:.0f} s.")
    if args.json:
        machine = {"platform": platform.platform(), "cpus": os.cpu_count()}
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
            found = re.search(r"model name\s*:\s*(.*)", cpuinfo)
            machine["cpu"] = found.group(1) if found else None
        except OSError:
            pass
        result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine,
                  "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "torch_worker"},
                  "config": config, "data": {"source": str(src), "target": str(tgt), "kind": data_kind},
                  "vocabulary": info["vocab"], "batches": info["batches"], "same_batches": same_batches,
                  "omp_wait_policy": args.omp_wait_policy, "torch_model": model,
                  "attn": attn, "torch": torch_side, "ratios": ratios}
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
