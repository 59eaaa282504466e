#!/usr/bin/env python3
"""Attention forward and forward + backward TFLOP/s on the GPU: attn's fused kernels and unfused
path (bench/attention_gpu.cu) against PyTorch's scaled_dot_product_attention with its flash,
cuDNN and math back ends and FlexAttention, at the FlashAttention-3 paper's protocol.

Protocol (FlashAttention-3, §4.1): sequence length 512 … 16384 with batch × length = 16384
tokens, hidden size 2048 (head dim 64 → 32 heads, 128 → 16 heads), causal and not, bf16 (and
fp32 for attn's fp32 path and PyTorch's math and cuDNN back ends where they take it).
FLOPs: forward 4·n²·d·heads·batch, halved when causal; backward 2.5× the forward, so forward +
backward 3.5×. Each side times with CUDA events: two warm-up runs, then the median of
--repeat timed runs on the same inputs (random normal; never zeros). PyTorch's backward is
out.backward(d_out) after a fresh forward in the timed region, as attn's is. FlexAttention is
torch.compile'd once a shape (compilation outside the timing), with a causal block mask when
causal; only at --flex-lengths, since each shape compiles anew.

With --alibi, ALiBi with learned slopes (−m_h·|i − j| added to the scaled scores; forward + backward
includes the slopes' gradient) on each side: attn's fused kernels (the variant's expression inside
them), FlexAttention with a score_mod that reads the slopes, and SDPA with the [heads, n, n] bias
made from the slopes in the timed region (up to --unfused-max, as the other paths that hold n²).

With --window W, restricted attention's band (keys within W positions of the query, and before it
when causal) on each side: attn's fused kernels walking only the band's tiles, FlexAttention with
the band's block mask, and SDPA with the band as a boolean mask (up to --unfused-max). FLOPs
count the pairs the band lets through: 4·pairs·d·heads·batch forward.

With --dropout P, dropout P on the attention weights: attn's fused kernels (their dropout factor
from the counter-based stream) against SDPA's flash back end with dropout_p (bf16), FLOPs counted
as without it.

Usage (on a machine with a GPU and PyTorch with CUDA):
  bench/attention_vs_torch.py --attention-gpu build/bench/attention_gpu [--json out.json]
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HIDDEN = 2048


def forward_flops(n, batch, heads, d, causal, window=0):
    if window:
        pairs = sum(min(n - 1, i if causal else i + window) - max(0, i - window) + 1 for i in range(n))
        return 4.0 * pairs * d * heads * batch
    return 4.0 * n * n * d * heads * batch * (0.5 if causal else 1.0)


def torch_side(args):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        flex = torch.compile(flex_attention, dynamic=False)
    except Exception as error:  # an older PyTorch
        print(f"FlexAttention unavailable: {error}", file=sys.stderr)
        flex = None

    def median_ms(run):
        for _ in range(2):
            run()
        times = []
        for _ in range(args.repeat):
            start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            stop.record()
            stop.synchronize()
            times.append(start.elapsed_time(stop))
        times.sort()
        return times[len(times) // 2]

    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "math": SDPBackend.MATH}
    records = []
    for type_name in args.types:
        dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[type_name]
        for d in (64, 128):
            heads = HIDDEN // d
            for n in args.lengths:
                batch = max(1, args.tokens // n)
                for causal in (False, True):
                    generator = torch.Generator(device="cuda").manual_seed(n * 7 + d)
                    shape = (batch, heads, n, d)
                    q, k, v, d_out = (torch.randn(shape, device="cuda", dtype=dtype, generator=generator)
                                      for _ in range(4))
                    leaves = [t.requires_grad_() for t in (q, k, v)]
                    slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)], device="cuda",
                                          requires_grad=True)
                    leaves.append(slopes)
                    candidates = []
                    for name, backend in backends.items():
                        if name == "flash" and type_name != "bf16":
                            continue  # flash takes 16-bit inputs only
                        if name == "math" and n > args.unfused_max:
                            continue  # its [batch, heads, n, n] scores, as attn's unfused path
                        candidates.append((f"torch sdpa {name}", lambda backend=backend, causal=causal:
                                           _sdpa(F, sdpa_kernel, backend, q, k, v, causal)))
                    if flex is not None and n in args.flex_lengths:
                        mask = None
                        if causal:
                            mask = create_block_mask(lambda b, h, i, j: j <= i, None, None, n, n, device="cuda")
                        candidates.append(("torch flex", lambda mask=mask: flex(q, k, v, block_mask=mask)))
                        if args.alibi:
                            def alibi(score, b, h, q_index, kv_index, slopes=slopes):
                                return score - slopes[h] * (q_index - kv_index).abs()
                            candidates.append(("torch flex alibi", lambda mask=mask, alibi=alibi:
                                               flex(q, k, v, score_mod=alibi, block_mask=mask)))
                    if args.alibi and n <= args.unfused_max:
                        positions = torch.arange(n, device="cuda")
                        distance = (positions[:, None] - positions[None, :]).abs().to(dtype)
                        hidden = positions[None, :] > positions[:, None] if causal else None

                        def sdpa_alibi(distance=distance, hidden=hidden, slopes=slopes, dtype=dtype):
                            bias = -slopes.to(dtype).view(-1, 1, 1) * distance
                            if hidden is not None:
                                bias = bias.masked_fill(hidden, float("-inf"))
                            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
                        candidates.append(("torch sdpa alibi", sdpa_alibi))
                    window = args.window
                    if window and flex is not None and n in args.flex_lengths:
                        def near(b, h, i, j, causal=causal):
                            inside = (i - j).abs() <= window
                            return inside & (j <= i) if causal else inside
                        band = create_block_mask(near, None, None, n, n, device="cuda")
                        candidates.append(("torch flex window", lambda band=band: flex(q, k, v, block_mask=band)))
                    if window and n <= args.unfused_max:
                        positions = torch.arange(n, device="cuda")
                        visible = (positions[:, None] - positions[None, :]).abs() <= window
                        if causal:
                            visible &= positions[None, :] <= positions[:, None]
                        candidates.append(("torch sdpa window", lambda visible=visible:
                                           F.scaled_dot_product_attention(q, k, v, attn_mask=visible)))
                    if args.dropout and type_name == "bf16":
                        candidates.append((f"torch sdpa flash dropout {args.dropout:g}", lambda causal=causal:
                                           _sdpa(F, sdpa_kernel, SDPBackend.FLASH_ATTENTION, q, k, v, causal,
                                                 args.dropout)))
                    for impl, attend in candidates:
                        record = {"impl": impl, "type": type_name, "n": n, "batch": batch, "heads": heads, "d": d,
                                  "causal": causal}
                        try:
                            with torch.no_grad():
                                record["forward_ms"] = median_ms(attend)

                            def both():
                                for t in leaves:
                                    t.grad = None
                                attend().backward(d_out)
                            record["forward_backward_ms"] = median_ms(both)
                        except Exception as error:  # a back end that does not take this shape or type
                            record["error"] = str(error).splitlines()[0][:160]
                            torch.cuda.empty_cache()
                            records.append(record)
                            continue
                        flops = forward_flops(n, batch, heads, d, causal, window if "window" in impl else 0)
                        record["forward_tflops"] = flops / (record["forward_ms"] * 1e9)
                        record["forward_backward_tflops"] = 3.5 * flops / (record["forward_backward_ms"] * 1e9)
                        records.append(record)
                        print(json.dumps(record), flush=True)
                    del q, k, v, d_out, leaves, slopes
                    torch.cuda.empty_cache()
    return records


def _sdpa(F, sdpa_kernel, backend, q, k, v, causal, dropout=0.0):
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, dropout_p=dropout)


def attn_side(args):
    command = [str(args.attention_gpu), "--lengths", ",".join(map(str, args.lengths)), "--types",
               ",".join(args.types), "--tokens", str(args.tokens), "--unfused-max", str(args.unfused_max),
               "--cuda-cores-max", str(args.cuda_cores_max), "--repeat", str(args.repeat)] + (["--alibi"] if args.alibi else []) + \
              (["--heads-in-rows"] if args.heads_in_rows else []) + \
              (["--window", str(args.window)] if args.window else []) + \
              (["--dropout", str(args.dropout)] if args.dropout else [])
    records = []
    # Line by line as they come, so that a run stopped part-way still leaves its measurements.
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as child:
        for line in child.stdout:
            if line.startswith("{"):
                records.append(json.loads(line))
                print(line, end="", flush=True)
    if child.returncode != 0:
        sys.exit(f"attention_vs_torch: {' '.join(command)} failed (exit status {child.returncode})")
    return records


def table(records):
    """One row a (type, d, causal, n); one column pair (forward, forward + backward) an implementation."""
    impls = sorted({r["impl"] for r in records if "error" not in r},
                   key=lambda i: (not i.startswith("attn"), i))
    rows = {}
    for r in records:
        if "error" in r:
            continue
        rows.setdefault((r["type"], r["d"], r["causal"], r["n"]), {})[r["impl"]] = r
    lines = ["TFLOP/s, forward / forward + backward (FlashAttention's FLOP count; - not run)", "",
             "| type | d | causal | n | " + " | ".join(impls) + " |",
             "|---|---|---|---|" + "---|" * len(impls)]
    for key in sorted(rows):
        cells = []
        for impl in impls:
            r = rows[key].get(impl)
            cells.append("-" if r is None else f"{r['forward_tflops']:.1f} / {r['forward_backward_tflops']:.1f}")
        type_name, d, causal, n = key
        lines.append(f"| {type_name} | {d} | {'yes' if causal else 'no'} | {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--attention-gpu", type=Path, default=ROOT / "build" / "bench" / "attention_gpu",
                   help="attn's program (meson compile -C build attention_gpu)")
    p.add_argument("--lengths", default="512,1024,2048,4096,8192,16384", help="sequence lengths")
    p.add_argument("--flex-lengths", default="1024,4096,16384",
                   help="lengths FlexAttention is compiled for and timed at (each compiles anew)")
    p.add_argument("--types", default="bf16,fp32", help="bf16, fp32 or both")
    p.add_argument("--tokens", type=int, default=16384, help="batch × length (default 16384)")
    p.add_argument("--unfused-max", type=int, default=4096,
                   help="longest length of the paths that hold the scores (attn unfused, torch math)")
    p.add_argument("--cuda-cores-max", type=int, default=1 << 40,
                   help="bf16: longest length attn's CUDA-core fused kernels are timed at (tensor cores: all)")
    p.add_argument("--repeat", type=int, default=10, help="timed runs after two warm-up runs")
    p.add_argument("--skip-attn", action="store_true", help="PyTorch's side only")
    p.add_argument("--alibi", action="store_true", help="also ALiBi with learned slopes on each side")
    p.add_argument("--heads-in-rows", action="store_true",
                   help="also attn's tensor-core kernels on [batch, n, heads, d], as nn's fused path hands them over")
    p.add_argument("--window", type=int, default=0,
                   help="also restricted attention's band, keys within this many positions, on each side")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="also dropout on the attention weights, attn's fused kernels against SDPA flash's")
    p.add_argument("--json", type=Path, help="write every measurement here")
    args = p.parse_args()
    args.lengths = [int(n) for n in args.lengths.split(",")]
    args.flex_lengths = [int(n) for n in args.flex_lengths.split(",") if n]
    args.types = args.types.split(",")
    if unused := [n for n in args.flex_lengths if n not in args.lengths]:
        # FlexAttention runs only at lengths that are timed at all (it did not, unnoticed, on 2026-11-28).
        print(f"attention_vs_torch: --flex-lengths {','.join(map(str, unused))} not among --lengths "
              f"{','.join(map(str, args.lengths))}: FlexAttention is not timed there", file=sys.stderr)
    import torch
    if not torch.cuda.is_available():
        print("attention_vs_torch: no CUDA device for PyTorch", file=sys.stderr)
        return 77
    records = [] if args.skip_attn else attn_side(args)
    records += torch_side(args)
    if args.json:
        args.json.write_text(json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                                         "records": records}, indent=1))
    print()
    print(table(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
