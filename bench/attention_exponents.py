#!/usr/bin/env python3
"""Exponents of time and memory in n for each attention variant, beside Table 1.

Reads bench_attention's JSON (--benchmark_out=FILE --benchmark_out_format=json; with
--benchmark_repetitions=K the median time of the K is taken), fits
log(time) and log(peak bytes) against log(n) by least squares over the largest n measured (the
three largest, where the n^2 term dominates the projections' n*d^2), and prints a Markdown table
beside the paper's Table 1 (complexity per layer). With --charts DIR it also draws, with gnuplot
(Debian: gnuplot-nox), time and memory against n, log-log, one line a variant:
DIR/attention_{time,memory}_d{256,512}.png.

    python3 bench/attention_exponents.py attention.json --charts docs/images
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from collections import defaultdict

# Table 1 of the paper, complexity per layer, as the exponent of n it predicts.
TABLE1 = {
    "restricted": ("O(r·n·d)", 1),
}
SELF_ATTENTION = ("O(n²·d)", 2)


def table1(spec):
    return TABLE1.get(spec.split(":")[0], SELF_ATTENTION)


def load(path):
    with open(path) as f:
        report = json.load(f)
    runs = defaultdict(list)  # (device, spec, width, mode, n) -> [(ms, bytes)], one a repetition
    for b in report["benchmarks"]:
        if b.get("run_type") == "aggregate" or not b["name"].startswith("attention/"):
            continue
        _, device, spec, width, mode, n = b["name"].split("/")[:6]
        scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b.get("time_unit", "ns")]
        runs[(device, spec, int(width[1:]), mode, int(n))].append((b["real_time"] * scale, b.get("bytes_peak")))
    series = defaultdict(dict)  # (device, spec, width, mode) -> {n: (median ms, peak bytes)}
    for (device, spec, width, mode, n), measured in runs.items():
        times = sorted(t for t, _ in measured)
        peaks = [p for _, p in measured if p]
        series[(device, spec, width, mode)][n] = (times[len(times) // 2], max(peaks) if peaks else None)
    return report.get("context", {}), series


def slope(points):
    """Least-squares slope of log y against log x."""
    xs = [math.log(x) for x, _ in points]
    ys = [math.log(y) for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else float("nan")


def fit(values, which, top=3):
    points = sorted((n, v[which]) for n, v in values.items() if v[which])
    points = points[-top:]
    return (slope(points), points[0][0], points[-1][0]) if len(points) >= 2 else (float("nan"), 0, 0)


def chart(series, device, width, which, path):
    ylabel = "forward + backward time (ms)" if which == 0 else "peak tensor memory, forward + backward (MiB)"
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for (dev, spec, w, mode), values in sorted(series.items()):
            if dev != device or w != width or mode != "fwd_bwd":
                continue
            data = os.path.join(tmp, f"{len(lines)}.dat")
            with open(data, "w") as f:
                for n, v in sorted(values.items()):
                    if v[which]:
                        f.write(f"{n} {v[which] if which == 0 else v[which] / 2**20}\n")
            lines.append(f"'{data}' using 1:2 with linespoints title '{spec}'")
        if not lines:
            return False
        script = "\n".join([
            "set terminal pngcairo size 800,560 font ',11'",
            f"set output '{path}'",
            "set logscale x 2",
            "set logscale y",
            "set grid",
            "set key top left",
            "set xlabel 'sequence length n'",
            f"set ylabel '{ylabel}'",
            f"set title 'Attention variants, one self-attention layer, d_{{model}} {width}, {device}'",
            "plot " + ", ".join(lines),
        ])
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", help="bench_attention's --benchmark_out (JSON)")
    parser.add_argument("--charts", metavar="DIR", help="draw PNG charts into DIR (needs gnuplot)")
    args = parser.parse_args()
    try:
        context, series = load(args.json)
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"{args.json}: not a bench_attention JSON report ({e})")
    if not series:
        sys.exit(f"{args.json}: no attention/ benchmarks in it")

    print(f"{context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs, "
          f"threads {context.get('threads', '?')}, {context.get('date', '')}")
    print()
    print("| device | variant | d_model | n fitted | time exponent, forward | time exponent, fwd+bwd "
          "| memory exponent, fwd+bwd | Table 1, per layer | Table 1 exponent |")
    print("|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(d, s, w) for d, s, w, _ in series})
    for device, spec, width in keys:
        forward = series.get((device, spec, width, "fwd"), {})
        both = series.get((device, spec, width, "fwd_bwd"), {})
        t_fwd, lo, hi = fit(forward, 0)
        t_both, _, _ = fit(both, 0)
        m_both, _, _ = fit(both, 1)
        complexity, exponent = table1(spec)
        print(f"| {device} | {spec} | {width} | {lo}–{hi} | {t_fwd:.2f} | {t_both:.2f} | {m_both:.2f} "
              f"| {complexity} | {exponent} |")

    if args.charts:
        os.makedirs(args.charts, exist_ok=True)
        drawn = []
        for device in sorted({d for d, _, _, _ in series}):
            for width in sorted({w for _, _, w, _ in series}):
                for which, what in ((0, "time"), (1, "memory")):
                    suffix = "" if device == "cpu" else "_" + device
                    path = os.path.join(args.charts, f"attention_{what}_d{width}{suffix}.png")
                    if chart(series, device, width, which, path):
                        drawn.append(path)
        print()
        print("charts: " + ", ".join(drawn))


if __name__ == "__main__":
    main()
