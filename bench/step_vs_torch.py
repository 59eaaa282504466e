#!/usr/bin/env python3
"""Training-step time of attn against PyTorch's nn.Transformer, same configuration, one run.

For each configuration (tiny, small, base) both implementations run the same step on the
same batch shape: forward, label-smoothed cross-entropy, backward, Adam (β 0.9/0.98, ε 1e-9),
dropout 0.1, shared source/target/output embeddings scaled by √d_model, sinusoidal
positions. PyTorch gets its best threading set-up: it is timed under each OMP_WAIT_POLICY
and the faster is kept. Prints a table and, with --json FILE, writes every measurement.

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
print(json.dumps({"impl": "torch", "ms_per_step": median * 1e3, "ms_min": times[0] * 1e3,
                  "tokens_per_s": a["batch"] * a["tgt_len"] / median, "threads": torch.get_num_threads(),
                  "parameters": sum(p.numel() for p in model.parameters()),
                  "torch": torch.__version__, "last_loss": loss.item()}))
'''


def run_attn(build, config, args, env):
    cmd = [os.path.join(build, "bench", "bench-step"), "--config", config, "--batch", str(args.batch),
           "--src-len", str(args.len), "--tgt-len", str(args.len), "--vocab", str(args.vocab),
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_torch(config, args, env):
    d, ff, h, n = CONFIGS[config]
    spec = dict(d_model=d, d_ff=ff, heads=h, layers=n, vocab=args.vocab, batch=args.batch, src_len=args.len,
                tgt_len=args.len, steps=args.steps, warmup=args.warmup, threads=args.threads,
                bench_dir=os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([args.python, "-c", TORCH_WORKER, json.dumps(spec)], env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


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
        rows.append({"config": config, "attn": ours, "torch": best, "torch_all": torch_runs,
                     "speedup": best["ms_per_step"] / ours["ms_per_step"]})
        print(f"{config:6s} attn {ours['ms_per_step']:9.1f} ms/step {ours['tokens_per_s']:8.0f} tok/s | "
              f"torch {best['ms_per_step']:9.1f} ms/step {best['tokens_per_s']:8.0f} tok/s "
              f"(OMP_WAIT_POLICY={best['omp_wait_policy']}) | attn/torch speed {rows[-1]['speedup']:.2f}x",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "date": time.strftime("%Y-%m-%d"), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
