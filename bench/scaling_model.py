#!/usr/bin/env python3
"""A model of one data-parallel training step of the paper's base and big Transformers on 8 GPUs
of one machine (NVLink) and on 2 x 8 (InfiniBand between the machines): the step's compute
time at an assumed model FLOP utilisation, the gradient bytes, the ring all-reduce time at the
links' bandwidths, and the step's efficiency with the sum after the backward pass or overlapped
with it (docs/scaling.md explains every assumption; nothing here is measured).

    python3 bench/scaling_model.py [--tokens-per-gpu 3125] [--mfu 0.4] [--peak 989.4]
        [--nvlink 360] [--infiniband 50] [--gradient-bytes 4] [--markdown]
"""
import argparse

VOCAB = 37000  # the paper's shared BPE vocabulary (§5.1)
MODELS = {  # d_model, d_ff, N (paper, Table 3)
    "base": (512, 2048, 6),
    "big": (1024, 4096, 6),
}


def parameters(d, d_ff, layers, vocab=VOCAB):
    """Weights and biases of attn's model (docs/model.md's counts): tied embeddings, every
    projection with a bias, LayerNorm gains and biases; no final LayerNorm (post-norm)."""
    attention = 4 * (d * d + d)
    ffn = d * d_ff + d_ff + d_ff * d + d
    norm = 2 * d
    encoder = layers * (attention + ffn + 2 * norm)
    decoder = layers * (2 * attention + ffn + 3 * norm)
    return vocab * d + encoder + decoder


def step_flops(d, d_ff, layers, source_tokens, target_tokens, vocab=VOCAB):
    """6 x the multiply-adds of every weight matrix a token goes through (bench/train_vs_torch.py's
    model_flops: attention's score and weighted-sum products left out)."""
    per_source = layers * (4 * d * d + 2 * d * d_ff) + layers * 2 * d * d
    per_target = layers * (6 * d * d + 2 * d * d_ff) + d * vocab
    return 6 * (per_source * source_tokens + per_target * target_tokens)


def ring_all_reduce(bytes_, processes, bandwidth):
    """Seconds for a ring all-reduce: each process sends and receives 2 (n - 1) / n of the bytes
    (reduce-scatter, then all-gather) at `bandwidth` bytes/s (NCCL's 'bus bandwidth')."""
    return 2 * (processes - 1) / processes * bytes_ / bandwidth


def two_level_all_reduce(bytes_, per_node, nodes, nvlink, infiniband):
    """Within each machine a reduce-scatter (each GPU ends with 1/per_node of the sum), across the
    machines an all-reduce of that shard by each GPU over its own network link, then an all-gather
    within the machine: NCCL's tree/ring over several NICs, idealised."""
    inside = 2 * (per_node - 1) / per_node * bytes_ / nvlink
    across = ring_all_reduce(bytes_ / per_node, nodes, infiniband)
    return inside + across


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens-per-gpu", type=float, default=25000 / 8,
                   help="target tokens (and as many source tokens) a GPU computes a step (default: the paper's "
                        "25000 a step over 8 GPUs)")
    p.add_argument("--mfu", type=float, default=0.40, help="model FLOP utilisation assumed (default 0.40)")
    p.add_argument("--peak", type=float, default=989.4, help="a GPU's dense bf16 peak, TFLOP/s (default: H100 SXM)")
    p.add_argument("--nvlink", type=float, default=360.0,
                   help="all-reduce bus bandwidth within a machine, GB/s (default 360: an assumption for NVLink 4)")
    p.add_argument("--infiniband", type=float, default=50.0,
                   help="network bandwidth a GPU has to other machines, GB/s (default 50: one 400 Gb/s NDR link)")
    p.add_argument("--gradient-bytes", type=int, default=4, help="bytes a gradient element (default 4: fp32)")
    p.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = p.parse_args()

    rows = []
    for name, (d, d_ff, layers) in MODELS.items():
        params = parameters(d, d_ff, layers)
        flops = step_flops(d, d_ff, layers, args.tokens_per_gpu, args.tokens_per_gpu)
        compute = flops / (args.mfu * args.peak * 1e12)
        gradient = params * args.gradient_bytes
        for setup, processes, comm in (
                ("8 GPUs, NVLink", 8, ring_all_reduce(gradient, 8, args.nvlink * 1e9)),
                ("2 x 8 GPUs, InfiniBand", 16,
                 two_level_all_reduce(gradient, 8, 2, args.nvlink * 1e9, args.infiniband * 1e9))):
            # After the backward pass: the step is compute + the sum. Overlapped: the sum of each
            # bucket runs while the backward pass (two thirds of the compute) goes on; what cannot
            # hide is the part longer than the backward pass, and the last bucket's sum.
            backward = compute * 2 / 3
            last_bucket = comm * min(1.0, 25 * 2**20 / gradient)
            exposed = max(comm - backward, 0) + last_bucket
            rows.append((name, setup, params, flops, compute, gradient, comm,
                         compute / (compute + comm), compute / (compute + exposed)))
    header = ("model", "setup", "parameters", "TFLOP a GPU a step", "compute ms", "gradient MB", "all-reduce ms",
              "efficiency, sum after", "efficiency, overlapped")
    lines = []
    for r in rows:
        lines.append((r[0], r[1], f"{r[2] / 1e6:.1f} M", f"{r[3] / 1e12:.2f}", f"{r[4] * 1e3:.2f}",
                      f"{r[5] / 1e6:.0f}", f"{r[6] * 1e3:.2f}", f"{100 * r[7]:.0f} %", f"{100 * r[8]:.0f} %"))
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
        for line in (header, *lines):
            print("  ".join(str(x).ljust(w) for x, w in zip(line, widths)))


if __name__ == "__main__":
    main()
