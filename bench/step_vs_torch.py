#!/usr/bin/env python3
"""Training-step time of attn against PyTorch's nn.Transformer, same configuration, one run.

For each configuration (tiny, small, base) both implementations run the same step on the
same batch shape: forward, label-smoothed cross-entropy, backward, Adam (β 0.9/0.98, ε 1e-9),
dropout 0.1, shared source/target/output embeddings scaled by √d_model, sinusoidal
positions. PyTorch gets its best threading set-up: it is timed under each OMP_WAIT_POLICY
and the faster is kept. Each side's process reports its peak resident memory, and what one
forward pass keeps for the backward pass (attn: bytes of live tensors; PyTorch: autograd's saved
tensors, on the model attn builds). First, in the
same run, bench-step --config gemm measures the machine's rate for attn's float product (the
path the step's products take: oneDNN or Eigen/OpenBLAS); each attn step's model FLOP/s
(model_flops: the products' multiply-adds, ×3 for the backward) are given beside it.
Prints a table and, with --json FILE, writes every measurement.

Usage: bench/step_vs_torch.py [--build build] [--configs tiny,small,base] [--threads 2]
                              [--batch 32] [--len 32] [--vocab 8000] [--steps 10]
Needs the system python3 with Debian's python3-torch; builds build/bench/bench-step with Meson.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

from torch_reference import CONFIGS  # torch-free import: the model itself lives in the worker

# Runs under --python; imports the model from bench/torch_reference.py (stock nn.Transformer).
TORCH_WORKER = r'''
import json, sys, time
a = json.loads(sys.argv[1])
sys.path.insert(0, a["bench_dir"])
import torch
from torch_reference import Model
torch.manual_seed(0)
torch.set_num_threads(a["threads"])
model = Model(a["vocab"], a["d_model"], a["d_ff"], a["heads"], a["layers"], max(a["src_len"], a["tgt_len"]))
opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9)
loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
g = torch.Generator().manual_seed(2)
src = torch.randint(1, a["vocab"], (a["batch"], a["src_len"]), generator=g)
tgt_in = torch.randint(1, a["vocab"], (a["batch"], a["tgt_len"]), generator=g)
tgt_out = torch.randint(1, a["vocab"], (a["batch"], a["tgt_len"]), generator=g)
times = []
for step in range(a["warmup"] + a["steps"]):
    t0 = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    logits = model(src, tgt_in)
    loss = loss_fn(logits.reshape(-1, a["vocab"]), tgt_out.reshape(-1))
    loss.backward()
    opt.step()
    dt = time.perf_counter() - t0
    if step >= a["warmup"]:
        times.append(dt)
times.sort()
median = times[len(times) // 2]
# What a forward pass keeps for the backward pass, as attn's bench-step counts it (forward_held_mib):
# the tensors autograd saves, each storage once, parameters left out, on the model attn builds
# (like_attn: no dropout on the weights or inside the FFN, no final LayerNorms). Not timed.
held_model = Model(a["vocab"], a["d_model"], a["d_ff"], a["heads"], a["layers"], max(a["src_len"], a["tgt_len"]),
                   like_attn=True)
storage_of = lambda t: t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
parameters = {storage_of(p).data_ptr() for p in held_model.parameters()}
saved = {}
def note(t):
    storage = storage_of(t)
    if storage.data_ptr() not in parameters:
        saved[storage.data_ptr()] = storage.nbytes()
    return t
with torch.autograd.graph.saved_tensors_hooks(note, lambda t: t):
    held_logits = held_model(src, tgt_in)
    held_loss = loss_fn(held_logits.reshape(-1, a["vocab"]), tgt_out.reshape(-1))
print(json.dumps({"impl": "torch", "forward_held_mib": sum(saved.values()) / 2**20, "ms_per_step": median * 1e3, "ms_min": times[0] * 1e3,
                  "tokens_per_s": a["batch"] * a["tgt_len"] / median, "threads": torch.get_num_threads(),
                  "parameters": sum(p.numel() for p in model.parameters()),
                  "torch": torch.__version__, "last_loss": loss.item()}))
'''


def run_measured(cmd, env):
    """Runs cmd to its end; its last stdout line as JSON, with the process's peak resident memory."""
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(cmd, env=env, stdout=out)
        _, status, usage = os.wait4(child.pid, 0)  # this child's rusage alone
        if os.waitstatus_to_exitcode(status) != 0:
            sys.exit(f"step_vs_torch: {cmd[0]} failed (exit status {os.waitstatus_to_exitcode(status)})")
        out.seek(0)
        result = json.loads(out.read().decode().strip().splitlines()[-1])
    result["peak_rss_mib"] = usage.ru_maxrss / 1024
    return result


def run_attn(build, config, args, env):
    cmd = [os.path.join(build, "bench", "bench-step"), "--config", config, "--batch", str(args.batch),
           "--src-len", str(args.len), "--tgt-len", str(args.len), "--vocab", str(args.vocab),
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    return run_measured(cmd, env)


def run_torch(config, args, env):
    d, ff, h, n = CONFIGS[config]
    spec = dict(d_model=d, d_ff=ff, heads=h, layers=n, vocab=args.vocab, batch=args.batch, src_len=args.len,
                tgt_len=args.len, steps=args.steps, warmup=args.warmup, threads=args.threads,
                bench_dir=os.path.dirname(os.path.abspath(__file__)))
    return run_measured([args.python, "-c", TORCH_WORKER, json.dumps(spec)], env)


def model_flops(config, batch, src_len, tgt_len, vocab):
    """Multiply-adds ×2 of one training step of the paper's model: the forward's products (projections,
    feed-forward, both attention products, the output projection over the vocabulary) ×3 for the
    backward's two products per forward product. Embedding lookups, softmax, LayerNorm: not counted."""
    d, ff, _, n = CONFIGS[config]
    s, t = batch * src_len, batch * tgt_len  # tokens
    encoder = n * (s * (8 * d * d + 4 * d * ff) + 4 * batch * src_len * src_len * d)
    decoder = n * (t * (8 * d * d + 4 * d * d + 4 * d * ff) + s * 4 * d * d
                   + 4 * batch * tgt_len * tgt_len * d + 4 * batch * tgt_len * src_len * d)
    logits = 2 * t * d * vocab
    return 3 * (encoder + decoder + logits)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--configs", default="tiny,small,base")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--len", type=int, default=32)
    p.add_argument("--vocab", type=int, default=8000)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--python", default="/usr/bin/python3", help="a python3 with torch (Debian's python3-torch)")
    p.add_argument("--json", help="write every measurement to this file")
    args = p.parse_args()

    if subprocess.run([args.python, "-c", "import torch"], capture_output=True).returncode != 0:
        sys.exit(f"step_vs_torch: {args.python} cannot import torch; install Debian's python3-torch "
                 "(apt-get install python3-torch) or pass --python")
    # bench-step is not built by default: build (or bring up to date) the one to time.
    subprocess.run(["meson", "compile", "-C", args.build, "bench-step"], check=True, stdout=subprocess.DEVNULL)
    base_env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    # The machine's rate for the step's products, through attn's own product path, in the same run.
    gemm = run_measured([os.path.join(args.build, "bench", "bench-step"), "--config", "gemm"], base_env)
    print(f"gemm   attn's float product [1024,512]x[512,2048] through {gemm['through']}: "
          f"{gemm['gflops']:.1f} GFLOP/s (median), {gemm['gflops_max']:.1f} best", flush=True)
    rows = []
    for config in args.configs.split(","):
        if config not in CONFIGS:
            sys.exit(f"step_vs_torch: unknown configuration {config!r} (tiny, small, base)")
        ours = run_attn(args.build, config, args, base_env)
        torch_runs = []
        for policy in ("ACTIVE", "PASSIVE"):
            r = run_torch(config, args, dict(base_env, OMP_WAIT_POLICY=policy))
            r["omp_wait_policy"] = policy
            torch_runs.append(r)
        best = min(torch_runs, key=lambda r: r["ms_per_step"])
        flops = model_flops(config, args.batch, args.len, args.len, args.vocab)
        gflops = flops / (ours["ms_per_step"] * 1e-3) / 1e9
        rows.append({"config": config, "attn": ours, "torch": best, "torch_all": torch_runs,
                     "speedup": best["ms_per_step"] / ours["ms_per_step"], "model_flops": flops,
                     "attn_model_gflops": gflops, "attn_fraction_of_gemm": gflops / gemm["gflops"]})
        print(f"{config:6s} attn {ours['ms_per_step']:9.1f} ms/step {ours['tokens_per_s']:8.0f} tok/s "
              f"{gflops:6.1f} model GFLOP/s ({100 * gflops / gemm['gflops']:.0f}% of the gemm) "
              f"{ours['peak_rss_mib']:6.0f} MiB, {ours['forward_held_mib']:6.1f} held | "
              f"torch {best['ms_per_step']:9.1f} ms/step {best['tokens_per_s']:8.0f} tok/s "
              f"{best['peak_rss_mib']:6.0f} MiB, {best['forward_held_mib']:6.1f} held "
              f"(OMP_WAIT_POLICY={best['omp_wait_policy']}) | "
              f"attn/torch speed {rows[-1]['speedup']:.2f}x", flush=True)
    print("MiB: each process's peak resident memory (PyTorch's includes the interpreter and its libraries);")
    print("held: what a forward pass keeps for the backward pass (attn: its tensors' bytes live after the loss,")
    print("less those before; PyTorch: the tensors autograd saves, parameters left out). attn's step peak over")
    print("its resting memory is in --json (step_peak_mib).")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "date": time.strftime("%Y-%m-%d"), "gemm": gemm, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
