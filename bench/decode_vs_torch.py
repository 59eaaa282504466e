#!/usr/bin/env python3
"""Decoding throughput of attn-translate against a PyTorch reference doing the same work, on the CPU
or (--device cuda[:N]) on a GPU.

One checkpoint (--run: its newest checkpoint-*.safetensors, or --checkpoint FILE), one input
(--input, the first --limit lines), greedy search and beam search (beam 4, alpha 0.6, at most
source length + 50 tokens), the same number of threads on both sides. attn-translate runs first,
once per search (and --repeat times), then one PyTorch process runs both searches. Each side
runs alone: never two processes at once.

The PyTorch side (the --torch-worker mode of this script, under --python) is written here in
plain torch ops, as fairseq's incremental decoding is, and computes what attn-translate
computes (examples/translate/translate.hpp, include/attn/decode/{kv_cache,greedy,beam}.hpp):

- input: the lines as attn-translate reads them (a trailing '\\r' and a first-line byte-order
  mark dropped), encoded with the sentencepiece module and the same vocab.model; a source is
  ids + eos (3), padded with pad (0); sentences sorted by source length, longest first
  (stable), cut into batches of --batch-size (32): the whole input sorted at once, which
  attn-translate does with --window 0 (by default it sorts windows of 100 batches);
- model: the checkpoint's weights (read with tests/train/safetensors_read.py, the standard-library
  reader: the system python has no safetensors module) in attn's post-norm Transformer: one
  embedding matrix for source, target and output projection, tokens x sqrt(d_model) + sinusoids
  (or the learned position tables), LayerNorm(x + Sublayer(x)) with epsilon 1e-6, attention
  softmax(Q K^T / sqrt(d_k) + mask) V with padding keys of the source masked (-1e9), FFN
  relu(x W1 + b1) W2 + b2, logits x E^T, log_softmax over the vocabulary. Linear weights are
  transposed once at load to torch's [out, in]; the self-attention's query, key and value
  projections are one fused linear, the encoder-decoder keys and values another (as
  nn.MultiheadAttention's in_proj does); the arithmetic is otherwise attn's;
- decoding: a key/value cache (decoder self-attention keys and values appended each step with
  torch.cat, encoder-decoder keys and values computed once a batch), one position a step for
  every live row; finished rows leave the batch (index_select of the caches, only when the
  rows change);
- greedy: argmax over tokens other than pad and bos (lowest id on ties), eos forced at source
  length + 50 tokens;
- beam (k = 4): each live row's 2k best extensions (topk; pad and bos never extend; a row at
  the maximum length may only end), then per sentence the 2k best of those (a stable sort of
  the sentence's k x 2k candidates: cumulative log-probability in double, then parent, then
  rank in the row), eos extensions among the first k become finished, the first k others stay
  live; a sentence is done when none is live, or when k have finished and the best live one's
  log P over the penalty of this step's finished ones does not beat the best finished; the
  result is the best finished by log P / ((5 + |Y|) / 6)^alpha, |Y| counting eos. All of it is
  tensor operations over the batch; Python touches only the sentences whose best finished
  hypothesis improved in a step.

What is timed: attn-translate's --scores JSON `seconds`, the batch loop only (the model loaded,
the input encoded), the first batch included, and since --window (2026-11-29) the writes of the
finished lines to --output's temporary within it, without the final sync. PyTorch: the same loop, after one untimed warm-up
batch (the first, longest one) per search; torch.inference_mode(). Output tokens: each output's
subword tokens + 1 (the end symbol), as attn-translate counts them. With --repeat R each side
decodes each search R times and the fastest run is reported (all are in the JSON).

GPU (--device cuda[:N]): attn-translate --device cuda[:N], and the reference's weights and every
tensor it makes on that device (torch.set_default_device); TF32 off on both sides (attn-translate's
default --tf32 off; torch.backends.cuda.matmul.allow_tf32 = False), so both compute in fp32. The
reference's clock stops after torch.cuda.synchronize().

Threads: attn-translate --threads N, torch.set_num_threads(N), OMP_NUM_THREADS=N for both, and
the same OMP_WAIT_POLICY (--omp-wait-policy, ACTIVE by default, as bench/train_vs_torch.py).

Correctness: the script counts the output lines on which attn-translate and PyTorch agree
exactly, for each search. Agreement near 100% says the reference does attn's computation
(float rounding differs between the two, so a near tie may flip a few lines).

CTranslate2 (--ctranslate2 PYTHON, CPU only): a third side, under a python3 with the ctranslate2,
sentencepiece and numpy modules (pip install ctranslate2 sentencepiece). It converts the
checkpoint with bench/ctranslate2_model.py (untimed) and decodes the same batches in the same order
with Translator.translate_batch (float32, intra_threads N, inter_threads 1, beam_size 1 or k,
max_decoding_length the batch's longest source + 50 + 1), after one warm-up batch a search, the
fastest of --repeat runs. Its length penalty divides by |Y|^alpha where attn's divides by
((5 + |Y|) / 6)^alpha: beam search may rank a near tie differently (the identical-lines column
says how often). Greedy output identical to attn's is the check that the conversion is right.

Needs: attn-translate built (build/examples/attn-translate); a python3 with torch and
sentencepiece for the reference (the system /usr/bin/python3: apt-get install python3-torch
python3-sentencepiece). This script's parent process needs only the standard library.
Usage: bench/decode_vs_torch.py [--run runs/bible-en-es | --checkpoint FILE] [--input data/bible/test.en]
                                [--limit N] [--threads N] [--repeat R] [--device cpu|cuda[:N]] [--json FILE]
"""
import argparse
import json
import math
import os
import platform
import re
import shlex
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from child_process import INSTALL_HINT, check_python, run_child  # standard library only

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
READER = ROOT / "tests" / "train" / "safetensors_read.py"

PAD, UNK, BOS, EOS = 0, 1, 2, 3  # attn::text::subword_model's fixed ids
LAYER_NORM_EPSILON = 1e-6        # attn::nn::config::layer_norm_epsilon
MASKED = -1e9                    # attn::nn::masked
SEARCHES = ("greedy", "beam")


def fail(message):
    sys.exit(f"decode_vs_torch: {message}")


def read_lines(path):
    """attn-translate's read_lines: '\\n'-separated, a last line without '\\n' counts, a trailing
    '\\r' and a first-line byte-order mark dropped."""
    pieces = Path(path).read_bytes().split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    lines = []
    for number, raw in enumerate(pieces, 1):
        if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if raw.endswith(b"\r"):
            raw = raw[:-1]
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            fail(f"{path}:{number}: invalid UTF-8 at byte {e.start + 1}")
    return lines


def read_metadata(path):
    """The "__metadata__" strings of a safetensors file, from its header alone."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            fail(f"{path}: not a safetensors file (shorter than its header length)")
        (size,) = struct.unpack("<Q", head)
        if size > 100_000_000:
            fail(f"{path}: not a safetensors file (header of {size} bytes)")
        try:
            header = json.loads(f.read(size).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            fail(f"{path}: the header is not JSON: {e}")
    return header.get("__metadata__", {})


# --- the PyTorch side (runs under --python as `decode_vs_torch.py --torch-worker SPEC`) -------

def torch_worker(spec):
    try:
        import sentencepiece
        import torch
        import torch.nn.functional as F
    except ModuleNotFoundError as e:
        fail(f"{sys.executable} cannot import {e.name}; {INSTALL_HINT}")
    sys.path.insert(0, str(READER.parent))
    import safetensors_read

    def emit(record):
        print(json.dumps(record), flush=True)

    torch.set_num_threads(spec["threads"])
    device = spec.get("device", "cpu")
    on_gpu = device.startswith("cuda")
    if on_gpu:
        if not torch.cuda.is_available():
            fail(f"{sys.executable}'s torch {torch.__version__} sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 products, as attn-translate's --tf32 off

    def synchronize():
        if on_gpu:
            torch.cuda.synchronize()

    processor = sentencepiece.SentencePieceProcessor(model_file=spec["vocab"])
    ids = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
    if ids != (PAD, UNK, BOS, EOS):
        fail(f"{spec['vocab']} has special ids pad, unk, bos, eos = {ids}, expected (0, 1, 2, 3)")

    # The weights: "model.…" tensors of the checkpoint, as float32 torch tensors.
    metadata, stored = safetensors_read.load(spec["checkpoint"])
    weights = {}
    for name, (dtype, shape, data) in stored.items():
        if name.startswith("model."):
            if dtype != "F32":
                fail(f"{spec['checkpoint']}: tensor '{name}' is {dtype}, not F32")
            weights[name[len("model."):]] = torch.frombuffer(bytearray(data), dtype=torch.float32).reshape(shape).to(device)
    del stored
    if on_gpu:  # every tensor made from here on (masks, positions, search state) on the GPU
        torch.set_default_device(device)
    count = {key: int(metadata[f"model.{key}"]) for key in ("d_model", "d_ff", "heads", "d_k", "d_v", "layers",
                                                            "vocab_size")}
    if metadata.get("model.norm") != "post" or metadata.get("model.tied_embeddings") != "true":
        fail("the reference, like attn-translate, is for post-norm models with tied embeddings")
    learned = metadata.get("model.positions") == "learned"
    vocab = processor.get_piece_size()
    if vocab != count["vocab_size"]:
        fail(f"the checkpoint's vocabulary has {count['vocab_size']} pieces, {spec['vocab']} has {vocab}")
    d, heads, d_k, d_v = count["d_model"], count["heads"], count["d_k"], count["d_v"]

    def take(name):
        if name not in weights:
            fail(f"{spec['checkpoint']}: no tensor 'model.{name}'")
        return weights[name]

    def linear(prefix):  # attn's [in, out] weight as torch's [out, in]
        return take(prefix + ".weight").t().contiguous(), take(prefix + ".bias")

    def fused(prefix, parts):
        ws, bs = zip(*(linear(f"{prefix}.{part}") for part in parts))
        return torch.cat(ws, 0).contiguous(), torch.cat(bs, 0).contiguous()

    def norm(prefix):
        return take(prefix + ".norm.gain"), take(prefix + ".norm.bias")

    embedding = take("embeddings.shared")  # [vocab, d_model]: source, target and output
    scale = math.sqrt(d)                   # attn multiplies by T(sqrt(d_model)), a float
    attention_scale = 1.0 / math.sqrt(d_k)
    encoder, decoder = [], []
    for i in range(count["layers"]):
        p = f"encoder.layer.{i}"
        encoder.append({"qkv": fused(f"{p}.self_attention", ("query", "key", "value")),
                        "out": linear(f"{p}.self_attention.output"), "norm1": norm(f"{p}.self_attention_block"),
                        "inner": linear(f"{p}.ffn.inner"), "outer": linear(f"{p}.ffn.outer"),
                        "norm2": norm(f"{p}.ffn_block")})
        p = f"decoder.layer.{i}"
        decoder.append({"qkv": fused(f"{p}.self_attention", ("query", "key", "value")),
                        "out": linear(f"{p}.self_attention.output"), "norm1": norm(f"{p}.self_attention_block"),
                        "cq": linear(f"{p}.cross_attention.query"),
                        "ckv": fused(f"{p}.cross_attention", ("key", "value")),
                        "cout": linear(f"{p}.cross_attention.output"), "norm2": norm(f"{p}.cross_attention_block"),
                        "inner": linear(f"{p}.ffn.inner"), "outer": linear(f"{p}.ffn.outer"),
                        "norm3": norm(f"{p}.ffn_block")})

    def sinusoids(rows):
        """attn::nn::sinusoids: angles in double, stored as float."""
        pos = torch.arange(rows, dtype=torch.float64).unsqueeze(1)
        i = torch.arange(d)
        angle = pos / torch.pow(10000.0, (i - i % 2).to(torch.float64) / d)
        return torch.where(i % 2 == 0, torch.sin(angle), torch.cos(angle)).to(torch.float32)

    max_positions = None
    if learned:
        source_positions, target_positions = take("embeddings.source_positions"), take("embeddings.target_positions")
        max_positions = source_positions.shape[0]

    lines = read_lines(spec["input"])
    sources = processor.encode(lines)
    longest = max((len(s) for s in sources), default=0)
    if learned and longest + 1 > max_positions:
        fail(f"a sentence of {longest} subwords; the model's learned positions hold {max_positions - 1} and eos")
    if not learned:
        source_positions = target_positions = sinusoids(longest + spec["max_len_offset"] + 2)
    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))  # stable: longest first
    batches = [order[i:i + spec["batch_size"]] for i in range(0, len(order), spec["batch_size"])]
    torch.matmul(torch.ones(64, 64), torch.ones(64, 64))  # loads the BLAS library, if torch uses one
    try:
        blas = sorted({line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                       if "blas" in line.lower() and "/" in line})
    except OSError:
        blas = []
    emit({"kind": "info", "torch": torch.__version__, "python": sys.executable, "threads": torch.get_num_threads(),
          "blas": blas, "device": device, "gpu": torch.cuda.get_device_name(device) if on_gpu else None,
          "sentences": len(sources), "batches": len(batches), "vocab": vocab, "positions":
          "learned" if learned else "sinusoidal", "parallel_info": torch.__config__.parallel_info().splitlines()})

    def layer_norm(x, gain_bias):
        return F.layer_norm(x, (d,), gain_bias[0], gain_bias[1], LAYER_NORM_EPSILON)

    def heads_of(x, rows, length, depth):  # [rows, length, h·depth] -> [rows, h, length, depth]
        return x.view(rows, length, heads, depth).transpose(1, 2)

    def attend(q, k, v, mask):  # softmax(q kᵀ / √d_k + mask) v, then the heads merged
        scores = torch.matmul(q, k.transpose(-1, -2)).mul_(attention_scale)
        if mask is not None:
            scores.add_(mask)
        out = torch.matmul(torch.softmax(scores, -1), v)  # [rows, h, length, d_v]
        return out.transpose(1, 2).reshape(out.shape[0], out.shape[2], heads * d_v)

    def encode(source):
        """Encoder output [B, L, d], the padding mask [B, 1, 1, L] and every decoder layer's
        encoder-decoder keys and values [B, h, L, d_k|d_v]."""
        rows, length = source.shape
        x = F.embedding(source, embedding) * scale + source_positions[:length]
        mask = torch.zeros(rows, 1, 1, length).masked_fill_((source == PAD).view(rows, 1, 1, length), MASKED)
        for layer in encoder:
            q, k, v = F.linear(x, *layer["qkv"]).split((heads * d_k, heads * d_k, heads * d_v), -1)
            a = attend(heads_of(q, rows, length, d_k), heads_of(k, rows, length, d_k),
                       heads_of(v, rows, length, d_v), mask)
            x = layer_norm(x + F.linear(a, *layer["out"]), layer["norm1"])
            x = layer_norm(x + F.linear(F.relu(F.linear(x, *layer["inner"])), *layer["outer"]), layer["norm2"])
        memory = []
        for layer in decoder:
            k, v = F.linear(x, *layer["ckv"]).split((heads * d_k, heads * d_v), -1)
            memory.append((heads_of(k, rows, length, d_k), heads_of(v, rows, length, d_v)))
        return mask, memory

    class Cache:
        """A batch's decoding state: per layer the self-attention keys and values so far
        [rows, h, t, d], the encoder-decoder keys and values and the source mask of each row."""

        def __init__(self, source):
            self.mask, self.memory = encode(source)
            self.keys = [None] * len(decoder)
            self.values = [None] * len(decoder)
            self.step = 0

        def keep(self, rows):  # rows: a long tensor, new row i continues old row rows[i]
            self.mask = self.mask.index_select(0, rows)
            self.memory = [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in self.memory]
            self.keys = [k.index_select(0, rows) for k in self.keys]
            self.values = [v.index_select(0, rows) for v in self.values]

        def log_probs(self, last):
            """Each row's prefix grows by last[row]; log-probabilities of the next token [rows, vocab]."""
            rows = last.shape[0]
            x = (F.embedding(last, embedding) * scale + target_positions[self.step]).unsqueeze(1)  # [rows, 1, d]
            for i, layer in enumerate(decoder):
                q, k, v = F.linear(x, *layer["qkv"]).split((heads * d_k, heads * d_k, heads * d_v), -1)
                k, v = heads_of(k, rows, 1, d_k), heads_of(v, rows, 1, d_v)
                if self.step == 0:
                    self.keys[i], self.values[i] = k, v
                else:
                    self.keys[i] = torch.cat((self.keys[i], k), 2)
                    self.values[i] = torch.cat((self.values[i], v), 2)
                a = attend(heads_of(q, rows, 1, d_k), self.keys[i], self.values[i], None)
                x = layer_norm(x + F.linear(a, *layer["out"]), layer["norm1"])
                q = heads_of(F.linear(x, *layer["cq"]), rows, 1, d_k)
                a = attend(q, self.memory[i][0], self.memory[i][1], self.mask)
                x = layer_norm(x + F.linear(a, *layer["cout"]), layer["norm2"])
                x = layer_norm(x + F.linear(F.relu(F.linear(x, *layer["inner"])), *layer["outer"]), layer["norm3"])
            self.step += 1
            return torch.log_softmax(F.linear(x.squeeze(1), embedding), -1)

    def source_batch(batch):
        columns = max(len(sources[i]) for i in batch) + 1
        return torch.tensor([sources[i] + [EOS] + [PAD] * (columns - len(sources[i]) - 1) for i in batch])

    def max_offset(batch):  # learned positions: outputs may not outgrow the table (translate.hpp)
        if not learned:
            return spec["max_len_offset"]
        return min(spec["max_len_offset"], max_positions - 1 - len(sources[batch[0]]))

    def greedy(batch):
        cache = Cache(source_batch(batch))
        offset = max_offset(batch)
        limit = torch.tensor([len(sources[i]) + offset for i in batch])  # a row's maximum output length
        sentence = torch.arange(len(batch))                                 # each row's sentence
        results = [None] * len(batch)
        last = torch.full((len(batch),), BOS, dtype=torch.long)
        history = torch.zeros(len(batch), 0, dtype=torch.long)              # each row's tokens so far
        while True:
            log_probs = cache.log_probs(last)
            log_probs[:, PAD] = -math.inf
            log_probs[:, BOS] = -math.inf
            token = log_probs.argmax(1)
            token.masked_fill_(limit <= history.shape[1], EOS)
            ended = token == EOS
            if bool(ended.any()):
                for row in ended.nonzero().flatten().tolist():
                    results[int(sentence[row])] = history[row].tolist()
                rows = (~ended).nonzero().flatten()
                if rows.numel() == 0:
                    return results
                cache.keep(rows)
                token, limit, sentence, history = token[rows], limit[rows], sentence[rows], history[rows]
            history = torch.cat((history, token.unsqueeze(1)), 1)
            last = token

    def beam(batch, k):
        cache = Cache(source_batch(batch))
        sentences = len(batch)
        offset = max_offset(batch)
        limit = torch.tensor([len(sources[i]) + offset for i in batch])
        alpha = spec["alpha"]
        sentence = torch.arange(sentences)         # each live row's sentence
        slot = torch.zeros(sentences, dtype=torch.long)  # its place among the sentence's live hypotheses
        log_p = torch.zeros(sentences, dtype=torch.float64)  # cumulative log-probability
        history = torch.zeros(sentences, 0, dtype=torch.long)
        last = torch.full((sentences,), BOS, dtype=torch.long)
        finished = torch.zeros(sentences, dtype=torch.long)  # finished hypotheses of each sentence
        best = torch.full((sentences,), -math.inf, dtype=torch.float64)  # best finished score
        results = [None] * sentences
        width = 2 * k
        rank = torch.arange(width)
        not_eos = torch.arange(vocab) != EOS
        while True:
            rows = last.shape[0]
            step = history.shape[1]  # tokens of every live hypothesis
            log_probs = cache.log_probs(last)
            log_probs[:, PAD] = -math.inf
            log_probs[:, BOS] = -math.inf
            must_end = limit[sentence] <= step
            if bool(must_end.any()):
                log_probs.masked_fill_(must_end.unsqueeze(1) & not_eos, -math.inf)
            row_values, row_tokens = log_probs.topk(width, 1)  # each row's best extensions
            # Each sentence's candidates, k rows of 2k, in the order (parent, rank in its row).
            grid = torch.full((sentences, k, width), -math.inf, dtype=torch.float64)
            grid[sentence, slot] = log_p.unsqueeze(1) + row_values.double()
            grid_tokens = torch.zeros(sentences, k, width, dtype=torch.long)
            grid_tokens[sentence, slot] = row_tokens
            row_of = torch.zeros(sentences, k, dtype=torch.long)
            row_of[sentence, slot] = torch.arange(rows)
            values, where = grid.view(sentences, -1).sort(dim=1, descending=True, stable=True)
            values, where = values[:, :width], where[:, :width]
            tokens = grid_tokens.view(sentences, -1).gather(1, where)
            parents = row_of.gather(1, where // width)  # the row each candidate extends
            valid = values > -math.inf
            ends = valid & (tokens == EOS)
            early = ends & (rank < k)
            goes_on = valid & (tokens != EOS)
            goes_on &= goes_on.cumsum(1) <= k
            penalty = ((5.0 + step + 1) / 6.0) ** alpha  # of this step's ends, and the live ones' estimate
            if bool(early.any()):
                finished += early.sum(1)
                scores = torch.where(early, values / penalty,
                                     torch.tensor(-math.inf, dtype=torch.float64))
                top, at = scores.max(1)
                improved = top > best
                for s in improved.nonzero().flatten().tolist():  # the first of equals, as a stable sort
                    first = int(torch.nonzero(scores[s] == top[s])[0])
                    results[s] = history[int(parents[s, first])].tolist()
                best = torch.where(improved, top, best)
            best_live = torch.where(goes_on, values, torch.tensor(-math.inf, dtype=torch.float64)).max(1).values
            done = ((finished >= k) & (best_live / penalty <= best)) | (goes_on.sum(1) == 0)
            goes_on &= ~done.unsqueeze(1)
            chosen = goes_on.nonzero()  # sentence by sentence, in rank order
            if chosen.shape[0] == 0:
                return results
            s, r = chosen[:, 0], chosen[:, 1]
            kept = parents[s, r]
            last = tokens[s, r]
            log_p = values[s, r]
            sentence = s
            slot = goes_on.cumsum(1)[s, r] - 1
            history = torch.cat((history[kept], last.unsqueeze(1)), 1)
            if kept.shape[0] != rows or not bool((kept == torch.arange(rows)).all()):
                cache.keep(kept)

    def decode_all(search):
        outputs = [None] * len(sources)
        for batch in batches:
            found = greedy(batch) if search == "greedy" else beam(batch, spec["beam"])
            for i, tokens in zip(batch, found):
                outputs[i] = tokens
        return outputs

    with torch.inference_mode():
        for search in SEARCHES:
            started = time.perf_counter()
            if batches:  # warm-up: the first (longest) batch, untimed
                greedy(batches[0]) if search == "greedy" else beam(batches[0], spec["beam"])
            synchronize()
            warmup = time.perf_counter() - started
            runs = []
            for _ in range(spec["repeat"]):
                synchronize()
                started = time.perf_counter()
                outputs = decode_all(search)
                synchronize()
                runs.append(time.perf_counter() - started)
            tokens = sum(len(t) + 1 for t in outputs)
            path = Path(spec["work"]) / f"torch-{search}.txt"
            path.write_text("".join(processor.decode(t) + "\n" for t in outputs), encoding="utf-8")
            emit({"kind": "result", "search": search, "sentences": len(outputs), "output_tokens": tokens,
                  "seconds": min(runs), "runs_seconds": runs, "warmup_seconds": warmup, "output": str(path)})


def ctranslate2_worker(spec):
    """The CTranslate2 side: converts the checkpoint, then decodes both searches; JSON lines."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import ctranslate2
    import ctranslate2_model
    import sentencepiece

    def emit(record):
        print(json.dumps(record), flush=True)

    work = Path(spec["work"])
    processor = sentencepiece.SentencePieceProcessor(model_file=spec["vocab"])
    lines = read_lines(spec["input"])
    sources = processor.encode(lines, out_type=str)
    longest = max((len(x) for x in sources), default=0)
    model_dir = work / "ctranslate2-model"
    ctranslate2_model.convert(spec["checkpoint"], spec["vocab"], model_dir,
                              positions=longest + spec["max_len_offset"] + 2)
    translator = ctranslate2.Translator(str(model_dir), device="cpu", compute_type="float32",
                                        inter_threads=1, intra_threads=spec["threads"])
    eos = processor.id_to_piece(EOS)
    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))  # as the PyTorch side
    batches = [order[i:i + spec["batch_size"]] for i in range(0, len(order), spec["batch_size"])]
    emit({"kind": "info", "ctranslate2": ctranslate2.__version__, "python": sys.executable,
          "threads": spec["threads"]})

    def run(batch, search):
        tokens = [sources[i] + [eos] for i in batch]
        found = translator.translate_batch(
            tokens, max_batch_size=len(batch), beam_size=1 if search == "greedy" else spec["beam"],
            length_penalty=spec["alpha"], max_decoding_length=len(tokens[0]) + spec["max_len_offset"] + 1)
        return [r.hypotheses[0] for r in found]

    for search in SEARCHES:
        if batches:
            run(batches[0], search)  # warm-up, untimed
        runs = []
        for _ in range(spec["repeat"]):
            outputs = [None] * len(sources)
            started = time.perf_counter()
            for batch in batches:
                for i, pieces in zip(batch, run(batch, search)):
                    outputs[i] = pieces
            runs.append(time.perf_counter() - started)
        path = work / f"ctranslate2-{search}.txt"
        path.write_text("".join(processor.decode_pieces(t) + "\n" for t in outputs), encoding="utf-8")
        emit({"kind": "result", "search": search, "sentences": len(outputs),
              "output_tokens": sum(len(t) + 1 for t in outputs), "seconds": min(runs), "runs_seconds": runs,
              "output": str(path)})


# --- the parent -----------------------------------------------------------------------------

def newest_checkpoint(run):
    """attn::train::checkpoint_files' newest: checkpoint-NNNNNNNN….safetensors, longer names later."""
    found = sorted((p for p in Path(run).glob("checkpoint-*.safetensors")
                    if re.fullmatch(r"checkpoint-\d{8,}\.safetensors", p.name) and p.is_file()),
                   key=lambda p: (len(p.name), p.name))
    if not found:
        fail(f"no checkpoint-*.safetensors in '{run}': train one, or pass --checkpoint")
    return found[-1]


def machine_info(threads):
    info = {"platform": platform.platform(), "cpus": os.cpu_count(), "threads": threads}
    try:
        info["cpus_usable"] = len(os.sched_getaffinity(0))
    except AttributeError:
        pass
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        found = re.search(r"model name\s*:\s*(.*)", cpuinfo)
        info["cpu"] = found.group(1).strip() if found else None
        cores = {(m.group(1), m.group(2)) for m in
                 re.finditer(r"physical id\s*:\s*(\d+).*?core id\s*:\s*(\d+)", cpuinfo, re.S)}
        info["physical_cores"] = len(cores) or None
    except OSError:
        pass
    return info


def commit_info():
    def git(*arguments):
        try:
            done = subprocess.run(["git", "--no-optional-locks", "-C", str(ROOT), *arguments],
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout.strip() if done.returncode == 0 else None
    commit = git("rev-parse", "--short", "HEAD")
    changes = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "uncommitted_changes": bool(changes) if changes is not None else None}


def linked_blas(program):
    """The BLAS libraries (and oneDNN) a program loads, as ldd resolves them (empty when ldd is missing).
    attn-translate built with oneDNN multiplies floats through it unless ATTN_DNNL=0 is set."""
    try:
        done = subprocess.run(["ldd", str(program)], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted({m.group(1) for m in re.finditer(r"=>\s*(\S*(?:blas|dnnl)\S*)", done.stdout, re.I)})


def parse_args():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="Method, equivalence of the two sides and what is timed: see this script's docstring.")
    model = p.add_mutually_exclusive_group()
    model.add_argument("--run", type=Path, default=ROOT / "runs" / "bible-en-es",
                       help="an attn-train --out directory: its newest checkpoint (default: runs/bible-en-es)")
    model.add_argument("--checkpoint", type=Path, help="a checkpoint or averaged weights file instead of --run's")
    p.add_argument("--vocab", type=Path, help="SentencePiece model (default: vocab.model beside the checkpoint)")
    p.add_argument("--input", type=Path, default=ROOT / "data" / "bible" / "test.en",
                   help="text to translate, a sentence a line (default: data/bible/test.en)")
    p.add_argument("--limit", type=int, help="only the first N lines of --input (default: all)")
    p.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)),
                   help="threads on each side (default: all usable cores, here %(default)s)")
    p.add_argument("--omp-wait-policy", choices=["ACTIVE", "PASSIVE"], default="ACTIVE",
                   help="OMP_WAIT_POLICY for both sides (default: ACTIVE; PASSIVE beside other work)")
    p.add_argument("--device", default="cpu",
                   help="cpu, or cuda[:N]: attn-translate --device and the reference's torch device (default: cpu)")
    p.add_argument("--beam", type=int, default=4, help="beam size of the beam search (default: 4)")
    p.add_argument("--alpha", type=float, default=0.6, help="length penalty alpha (default: 0.6)")
    p.add_argument("--max-len-offset", type=int, default=50, help="at most source length + this (default: 50)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences decoded together (default: 32)")
    p.add_argument("--repeat", type=int, default=1,
                   help="decode each search this many times on each side, report the fastest (default: 1)")
    p.add_argument("--translate", type=Path, default=ROOT / "build" / "examples" / "attn-translate",
                   help="the attn-translate program (default: build/examples/attn-translate)")
    p.add_argument("--python", default="/usr/bin/python3",
                   help="a python3 with torch and sentencepiece for the PyTorch side (default: /usr/bin/python3)")
    p.add_argument("--work", type=Path, help="keep both sides' outputs and logs here (default: a temporary directory)")
    p.add_argument("--json", type=Path, help="write the settings and results to this file")
    p.add_argument("--ctranslate2", metavar="PYTHON",
                   help="also decode with CTranslate2 under this python3 (with ctranslate2, sentencepiece, numpy; "
                        "CPU only; see the docstring)")
    p.add_argument("--torch-worker", metavar="SPEC", help=argparse.SUPPRESS)
    p.add_argument("--ctranslate2-worker", metavar="SPEC", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.torch_worker is None and args.ctranslate2_worker is None:
        for name in ("threads", "beam", "batch_size", "repeat"):
            if getattr(args, name) < 1:
                p.error(f"--{name.replace('_', '-')} must be at least 1")
        if args.limit is not None and args.limit < 1:
            p.error("--limit must be at least 1")
        if args.max_len_offset < 0 or args.alpha < 0:
            p.error("--max-len-offset and --alpha must not be negative")
        if not re.fullmatch(r"cpu|cuda(:\d+)?", args.device):
            p.error(f"--device {args.device}: expected cpu, cuda or cuda:N")
        if not args.input.is_file():
            p.error(f"input '{args.input}' does not exist or is not a file")
        if args.ctranslate2 and args.device != "cpu":
            p.error("--ctranslate2 compares on the CPU only (--device cpu)")
    return args


def agreement(attn_path, torch_path):
    a = read_lines(attn_path)
    b = read_lines(torch_path)
    same = sum(x == y for x, y in zip(a, b))
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    return {"identical": same, "lines": max(len(a), len(b)), "first_difference_line": None if first is None
            else first + 1}


def main():
    args = parse_args()
    if args.torch_worker is not None:
        torch_worker(json.loads(args.torch_worker))
        return
    if args.ctranslate2_worker is not None:
        ctranslate2_worker(json.loads(args.ctranslate2_worker))
        return
    translate = args.translate.resolve()
    if not (translate.is_file() and os.access(translate, os.X_OK)):
        fail(f"no attn-translate program at '{args.translate}': build it (meson compile -C build attn-translate) "
             "or pass --translate")
    if not READER.is_file():
        fail(f"the PyTorch side reads checkpoints with {READER}, which is missing")
    checkpoint = (args.checkpoint if args.checkpoint is not None else newest_checkpoint(args.run)).resolve()
    if not checkpoint.is_file():
        fail(f"checkpoint '{checkpoint}' does not exist")
    vocab = (args.vocab if args.vocab is not None else checkpoint.parent / "vocab.model").resolve()
    if not vocab.is_file():
        fail(f"no vocabulary '{vocab}': pass --vocab")
    metadata = read_metadata(checkpoint)
    check_python(args.python, "decode_vs_torch")
    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"decode_vs_torch: warning: the load average is {load:.2f}: other work may be running, and beside it the "
              "timings are unreliable (with OMP_WAIT_POLICY=ACTIVE, spinning threads can make both sides many "
              "times slower)", file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="decode_vs_torch.") as temporary:
        work = args.work.resolve() if args.work else Path(temporary)
        work.mkdir(parents=True, exist_ok=True)
        lines = read_lines(args.input)
        if args.limit is not None:
            lines = lines[:args.limit]
        if not lines:
            fail(f"'{args.input}' has no lines")
        source = work / "input.txt"  # both sides read this: the (first --limit) lines of --input
        source.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OMP_WAIT_POLICY=args.omp_wait_policy)

        attn, commands = {}, {}
        for search in SEARCHES:
            command = [translate, "--checkpoint", checkpoint, "--vocab", vocab, "--input", source,
                       "--threads", args.threads, "--batch-size", args.batch_size, "--window", 0,
                       "--alpha", args.alpha, "--max-len-offset", args.max_len_offset, "--device", args.device,
                       "--quiet"]
            command += ["--greedy"] if search == "greedy" else ["--beam", args.beam]
            runs, peak_kib = [], 0
            for repeat in range(args.repeat):
                output, scores = work / f"attn-{search}.txt", work / f"attn-{search}-{repeat + 1}.json"
                rss, _, _, _ = run_child("decode_vs_torch", f"attn-translate --{search} ({repeat + 1}/{args.repeat})",
                                         command + ["--output", output, "--scores", scores], env, work)
                peak_kib = max(peak_kib, rss)
                runs.append(json.loads(scores.read_text()))
            commands[search] = " ".join(shlex.quote(str(c)) for c in command + ["--output", "OUT", "--scores", "JSON"])
            fastest = min(runs, key=lambda r: r["seconds"])
            attn[search] = {"sentences": fastest["sentences"], "output_tokens": fastest["output_tokens"],
                            "seconds": fastest["seconds"], "runs_seconds": [r["seconds"] for r in runs],
                            "model": fastest.get("model"), "output": str(work / f"attn-{search}.txt"),
                            "peak_rss_mib": peak_kib / 1024}

        spec = dict(checkpoint=str(checkpoint), vocab=str(vocab), input=str(source), threads=args.threads,
                    device=args.device,
                    beam=args.beam, alpha=args.alpha, max_len_offset=args.max_len_offset,
                    batch_size=args.batch_size, repeat=args.repeat, work=str(work))
        def worker(name, python, mode):
            """Runs this script's --MODE-worker under `python`: (wall seconds, info, results by search,
            agreement with attn by search); info gains the process's peak resident memory."""
            rss, wall, out, _ = run_child("decode_vs_torch", name, [python, Path(__file__).resolve(), f"--{mode}-worker",
                                                                  json.dumps(spec)], env, work)
            records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
            found = next((r for r in records if r["kind"] == "info"), None)
            results = {r["search"]: r for r in records if r["kind"] == "result"}
            if found is None or set(results) != set(SEARCHES):
                fail(f"the {mode} worker's output ({out}) lacks its info or a result line")
            found["peak_rss_mib"] = rss / 1024
            return wall, found, results, {search: agreement(attn[search]["output"], results[search]["output"])
                                          for search in SEARCHES}

        torch_wall, info, torch_side, agree = worker("PyTorch (greedy, then beam)", args.python, "torch")
        ct2_side, ct2_agree, ct2_info = {}, {}, None
        if args.ctranslate2:
            probe = subprocess.run([args.ctranslate2, "-c", "import ctranslate2, sentencepiece, numpy"],
                                   capture_output=True, text=True)
            if probe.returncode != 0:
                fail(f"{args.ctranslate2} cannot import ctranslate2, sentencepiece and numpy "
                     f"({(probe.stderr.strip().splitlines() or ['?'])[-1]}): pip install ctranslate2 sentencepiece")
            _, ct2_info, ct2_side, ct2_agree = worker("CTranslate2 (conversion, greedy, then beam)", args.ctranslate2,
                                                      "ctranslate2")

    for side in (attn, torch_side, ct2_side):
        for r in side.values():
            r["sentences_per_second"] = r["sentences"] / r["seconds"]
            r["tokens_per_second"] = r["output_tokens"] / r["seconds"]
    machine = machine_info(args.threads)
    source_info = commit_info()
    command = " ".join(shlex.quote(a) for a in [os.path.relpath(__file__)] + sys.argv[1:])
    widths = (f"d_model {metadata.get('model.d_model')}, d_ff {metadata.get('model.d_ff')}, "
              f"h {metadata.get('model.heads')}, d_k {metadata.get('model.d_k')}, d_v {metadata.get('model.d_v')}, "
              f"N {metadata.get('model.layers')}, vocabulary {metadata.get('model.vocab_size')}, "
              f"{metadata.get('model.positions')} positions")
    label = {"greedy": "greedy", "beam": f"beam {args.beam}"}
    cpu = machine.get("cpu") or platform.processor() or "?"
    cores = f"{machine['cpus']} logical CPUs" + (f", {machine['physical_cores']} cores"
                                                   if machine.get("physical_cores") else "")
    commit = source_info["commit"] or "?"
    if source_info["uncommitted_changes"]:
        commit += " (with uncommitted changes)"

    where = "the CPU" if args.device == "cpu" else f"the GPU ({args.device}: {info.get('gpu')})"
    print(f"attn-translate vs PyTorch: decoding throughput on {where}, one process at a time (attn first)")
    print(f"machine:    {cpu}, {cores}; {args.threads} threads on each side "
          f"(OMP_NUM_THREADS, --threads, torch.set_num_threads), OMP_WAIT_POLICY={args.omp_wait_policy}")
    def short(paths):
        return ", ".join(Path(b).parent.name + "/" + Path(b).name for b in paths) or "none found"
    attn_blas = linked_blas(translate)
    print(f"software:   attn {commit} (BLAS: {short(attn_blas)}); PyTorch {info['torch']} ({info['python']}; "
          f"BLAS: {short(info['blas'])})" + (f"; CTranslate2 {ct2_info['ctranslate2']} ({ct2_info['python']}, "
                                              "float32)" if ct2_info else ""))
    print(f"model:      {checkpoint} ({widths})")
    print(f"input:      {args.input} ({len(lines)} lines{'' if args.limit is None else f', --limit {args.limit}'}), "
          f"batches of {args.batch_size} sorted by length; alpha {args.alpha}, at most source + "
          f"{args.max_len_offset} tokens")
    print("timed:      decoding only (model loaded, input encoded); PyTorch after one warm-up batch; "
          + (f"fastest of {args.repeat} runs" if args.repeat > 1 else "one run") + " each")
    print(f"command:    {command}")
    print()
    print("| search | side | sentences/s | target tokens/s | seconds | output tokens | identical lines |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    ratios = {}
    for search in SEARCHES:
        a, t, g = attn[search], torch_side[search], agree[search]
        same = f"{g['identical']}/{g['lines']} ({100.0 * g['identical'] / max(g['lines'], 1):.1f}%)"
        print(f"| {label[search]} | attn | {a['sentences_per_second']:.1f} | {a['tokens_per_second']:.0f} | "
              f"{a['seconds']:.2f} | {a['output_tokens']} | {same} |")
        print(f"| {label[search]} | PyTorch | {t['sentences_per_second']:.1f} | {t['tokens_per_second']:.0f} | "
              f"{t['seconds']:.2f} | {t['output_tokens']} | |")
        ratios[search] = {"sentences_per_second": a["sentences_per_second"] / t["sentences_per_second"],
                          "tokens_per_second": a["tokens_per_second"] / t["tokens_per_second"]}
        print(f"| {label[search]} | attn / PyTorch | **{ratios[search]['sentences_per_second']:.2f}x** | "
              f"**{ratios[search]['tokens_per_second']:.2f}x** | | | |")
        if ct2_side:
            c, g = ct2_side[search], ct2_agree[search]
            same = f"{g['identical']}/{g['lines']} ({100.0 * g['identical'] / max(g['lines'], 1):.1f}%)"
            ratios[search]["ctranslate2_sentences_per_second"] = a["sentences_per_second"] / c["sentences_per_second"]
            print(f"| {label[search]} | CTranslate2 | {c['sentences_per_second']:.1f} | {c['tokens_per_second']:.0f} | "
                  f"{c['seconds']:.2f} | {c['output_tokens']} | {same} |")
            print(f"| {label[search]} | attn / CTranslate2 | "
                  f"**{ratios[search]['ctranslate2_sentences_per_second']:.2f}x** | "
                  f"**{a['tokens_per_second'] / c['tokens_per_second']:.2f}x** | | | |")
    print()
    print("Ratios above 1: attn decodes faster. Identical lines: attn-translate's output line equals the "
          "PyTorch reference's" + (" (CTranslate2's row: CTranslate2's)." if ct2_side else "."))
    print("Peak resident memory of each process (MiB; the Python sides' include the interpreter and their "
          "libraries, and run both searches in one process): attn "
          + ", ".join(f"{label[search]} {attn[search]['peak_rss_mib']:.0f}" for search in SEARCHES)
          + f"; PyTorch {info['peak_rss_mib']:.0f}"
          + (f"; CTranslate2 {ct2_info['peak_rss_mib']:.0f}" if ct2_info else "") + ".")
    for search in SEARCHES:
        g = agree[search]
        if g["identical"] < g["lines"]:
            print(f"{label[search]}: {g['lines'] - g['identical']} line(s) differ, the first at line "
                  f"{g['first_difference_line']}" + (f" (outputs kept in {work})" if args.work else ""))
    if args.json:
        result = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "machine": machine, "source": source_info,
                  "torch": info["torch"], "torch_blas": info["blas"], "torch_parallel_info": info["parallel_info"],
                  "attn_blas": attn_blas, "command": command,
                  "attn_commands": commands,
                  "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()
                           if k not in ("torch_worker", "ctranslate2_worker")},
                  "checkpoint": str(checkpoint), "model": {k: v for k, v in metadata.items() if k.startswith("model.")},
                  "input": {"path": str(args.input), "lines": len(lines)},
                  "attn": attn, "pytorch": torch_side, "agreement": agree, "ratios": ratios,
                  "ctranslate2": ct2_side or None, "ctranslate2_agreement": ct2_agree or None,
                  "ctranslate2_info": ct2_info,
                  "pytorch_wall_seconds": torch_wall, "load_average_before": load}
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
